"""Regexes of JSON Schema (`pattern`, `patternProperties`) matched in linear time with RE2.

jsonschema's stock keywords call Python's `re`, a backtracking engine that holds the GIL: a
pattern such as `^(a+)+$` against `"aaaa…a!"` runs for hours, and nothing in the process -
not the event loop, not a time limit, not SIGTERM - gets a turn meanwhile. The pattern and the
string come from different parties (a tool's author writes the schema, the caller sends the
arguments; on the client side a server sends both its outputSchema and its output), so one of
them can always freeze the other's process. RE2 (google-re2) matches in time linear in the
string, whatever the pattern.

RE2 has no lookaround and no backreferences. What happens to such a pattern depends on whose
schema it is (`PatternPolicy`):
- `REFUSE` - the process's own schemas (a tool author's hand-written inputSchema): the schema is
  refused when the tool is registered, with an error naming the pattern. The author can rewrite
  it; running it on caller input with a backtracking engine is what must not happen.
- `SKIP` - a peer's schemas (a server's outputSchema as seen by a client): the peer chose both
  the pattern and the value, so nothing is learnt by matching, and refusing would break a
  legitimate server. The keyword is skipped (treated as satisfied) with one logged warning.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from mcpkit.errors import UsageError

log = logging.getLogger(__name__)

# RE2 compiles each pattern into an automaton within this many bytes; a bigger pattern (e.g.
# `(a{1000}){1000}`) is refused like an unsupported one instead of taking the memory.
MAX_PATTERN_MEMORY = 8 << 20

Matcher = Callable[[str], bool]


class PatternPolicy(enum.Enum):
    """What to do with a pattern RE2 cannot compile (see the module docstring)."""

    REFUSE = "refuse"
    SKIP = "skip"


class UnsupportedPattern(UsageError, ValueError):
    """A pattern RE2 cannot run (lookaround, backreference, too big); raised under REFUSE."""


def _options() -> Any:
    import re2  # lazily, like jsonschema: a server with no hand-written pattern never loads it

    options = re2.Options()
    options.max_mem = MAX_PATTERN_MEMORY
    options.log_errors = False  # the reason goes into our error, not onto stderr
    return options


@lru_cache(maxsize=1024)
def _compile(pattern: str) -> Any:
    """The compiled pattern, or the reason RE2 refused it (cached: schemas repeat patterns)."""
    import re2

    try:
        return re2.compile(pattern, _options())
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        return str(reason)


def matcher(pattern: str, policy: PatternPolicy) -> Matcher:
    """A function telling whether a string contains a match of `pattern` (ECMA-262 `search`).

    Raises `UnsupportedPattern` under `REFUSE` when RE2 cannot compile it; under `SKIP` the
    matcher accepts every string.
    """
    compiled = _compile(pattern)
    if not isinstance(compiled, str):
        search = compiled.search
        return lambda text: search(text) is not None
    if policy is PatternPolicy.REFUSE:
        raise UnsupportedPattern(
            f"pattern {pattern!r} cannot be matched in linear time ({compiled}); mcpkit runs "
            "schema patterns with RE2, which has no lookaround or backreferences")
    _warn_skipped(pattern, compiled)
    return lambda text: True


@lru_cache(maxsize=256)
def _warn_skipped(pattern: str, reason: str) -> None:
    # Cached so a peer repeating the pattern logs it once per process, not once per call.
    log.warning("JSON Schema pattern %r of a peer is not checked: RE2 cannot run it (%s)",
                pattern, reason)


def check_supported(pattern: str) -> None:
    """Raise `UnsupportedPattern` if RE2 cannot compile `pattern`."""
    matcher(pattern, PatternPolicy.REFUSE)
