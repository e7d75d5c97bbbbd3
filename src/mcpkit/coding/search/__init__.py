"""The search tools: `glob`, `grep` and `ls` (all read-only), one module each.

- `glob` (`glob.py`) lists files matching a shell glob, newest first, honouring .gitignore.
- `grep` (`grep.py`) searches file contents with a regex: ripgrep, else a Python search with
  the same output (`grep_worker.py`), each in a child process the server kills at its time
  limit or on cancellation (`grep_engines.py`); both print ripgrep's JSON events, read by one
  parser that does no IO (`rg_json.py`). Both honour .gitignore, skip `.git`, binary files
  and symlinks.
- `ls` (`ls.py`) prints a tree with the usual clutter (.git, node_modules, .venv, caches …)
  left out.

Every path goes through `Workspace.resolve`; walks never follow a symlink out of the
workspace (see `ignore.py`). Failures are `isError` results with one line for the model.

No caller-supplied pattern can stall the server: globs are matched in linear time without
regexes (`globmatch.py`), `{a,b}` expansion is capped (`braces.py`), regexes run in a child
process, walks run in worker threads that stop at `WALK_TIMEOUT_S` (`common.py`), and every
other caller-controlled size (pattern length, result counts, context lines, output
characters, ignore globs, walk depth) has a cap; hitting one answers with an error naming it.
"""

from __future__ import annotations

from mcpkit.coding.env import CodingEnv
from mcpkit.server.server import Server


def register(server: Server, env: CodingEnv) -> None:
    """The three tools, in the order `tools/list` has always shown them."""
    # here, not at the top: importing one piece (say the IO-free `rg_json`) needs no tool
    from mcpkit.coding.search import glob, grep, ls

    glob.register(server, env)
    grep.register(server, env)
    ls.register(server, env)
