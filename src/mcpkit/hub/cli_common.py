"""What every `mcpkit hub …` command shares: the storage options, the one-line failure and
its exit status, the hint for the missing `hub` extra.

The command modules (cli.py: users and tokens; serve.py: `hub serve`; upstream_cli.py: the
REST client commands) import this module and never each other, except cli.py registering the
others lazily. Standard library only, so the mcpkit command works without the `hub` extra.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    Subcommands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

EXIT_ERROR = 2
HUB_EXTRA_HINT = "pip install 'mcpkit[hub]' (in a source checkout: pip install -e '.[hub]')"
"""How to get the hub's dependencies, both for an installed mcpkit and for the README's
install from a clone."""


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    """The storage settings every hub command that opens the database takes (`hub serve`
    included): one function, so the commands cannot drift apart on where the data is."""
    parser.add_argument(
        "--database-url",
        default=None,
        metavar="URL",
        help="sqlite+aiosqlite:///PATH or postgresql+asyncpg://… (default: "
        "$MCPKIT_HUB_DATABASE_URL, else hub.db in the data directory)",
    )
    parser.add_argument(
        "--data-dir", type=Path, default=None, metavar="DIR",
        help="where the SQLite file hub.db and the generated secret key live (default: "
        "$MCPKIT_HUB_DATA, else ~/.local/share/mcpkit/hub)",
    )


def fail(message: str) -> int:
    print(f"mcpkit hub: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def missing_extra(error: ImportError) -> int:
    return fail(f"the hub needs its extra: {HUB_EXTRA_HINT} ({error})")
