"""The Python fallback of `grep` (no ripgrep installed), run as a child process.

    python -m mcpkit.coding.search.grep_worker '<WorkerQuery as JSON>'

Python's `re` backtracks and holds the GIL for as long as one `search` call takes: `(a+)+$`
over a line of many `a`s and a `!` never returns. Run in the server, that froze every other
request and made SIGTERM wait. Here it runs in a process of its own, which the server kills
(its whole process group) at the time limit or when the call is cancelled; the worker also
limits itself - address space, CPU seconds - and dies with its parent (Linux), so even a
server killed with SIGKILL leaves nothing running for long.

It prints ripgrep's `--json` events (begin / match / context / end, one JSON object a line),
so the server reads both engines with one parser; a matched line is cut to `max_line`
characters (its full length in `chars`). `{"type": "timeout"}` says the soft time limit
stopped the walk. Exit status as ripgrep's: 0 found, 1 nothing found, 2 error (a line on
stderr: `regex parse error` then the reason, or `error: ...`).
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import msgspec

from mcpkit.coding.ignore import Walker, _WalkStopped
from mcpkit.coding.search.globmatch import compile_glob


class WorkerQuery(msgspec.Struct, frozen=True):
    pattern: str
    target: str  # absolute: a file or a directory
    walk_root: str  # absolute: the workspace root holding `target` (.gitignore from there)
    mode: str  # files_with_matches | content | count
    context: int
    case_insensitive: bool
    include: str | None
    timeout: float  # soft: the walk stops after this many seconds
    store_lines: int  # content lines sent in full; past that, matches are only counted
    max_file_bytes: int
    max_line: int
    memory_bytes: int  # RLIMIT_AS


_encoder = msgspec.json.Encoder()


def limit_self(query: WorkerQuery) -> None:
    """Address space and CPU caps, and SIGKILL when the server dies (best effort)."""
    import resource
    import signal

    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (query.memory_bytes, query.memory_bytes))
    seconds = int(query.timeout) + 5  # a backstop behind the server's own kill
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


class Emitter:
    """Writes ripgrep-shaped events to stdout."""

    def __init__(self, out: BinaryIO, query: WorkerQuery) -> None:
        self.out = out
        self.query = query
        self.stored = 0
        self.found = False

    def event(self, kind: str, data: dict[str, Any]) -> None:
        self.out.write(_encoder.encode({"type": kind, "data": data}) + b"\n")

    def line(self, kind: str, number: int, text: str | None) -> None:
        data: dict[str, Any] = {"line_number": number}
        if text is not None and self.stored < self.query.store_lines:
            self.stored += 1
            data["lines"] = {"text": text[:self.query.max_line]}
            if len(text) > self.query.max_line:
                data["chars"] = len(text)
        self.event(kind, data)


def context_ranges(match_lines: list[int], context: int, count: int) -> list[int]:
    """The 0-based line indexes to show: the matches and `context` lines around each."""
    wanted: set[int] = set()
    for i in match_lines:
        wanted.update(range(max(0, i - context), min(count, i + context + 1)))
    return sorted(wanted)


def search_file(regex: re.Pattern[str], path: str, query: WorkerQuery, emit: Emitter) -> None:
    try:
        with open(path, "rb") as f:
            data = f.read(query.max_file_bytes + 1)
    except OSError:
        return
    if len(data) > query.max_file_bytes or b"\0" in data:
        return  # too big, or binary
    text = data.decode("utf-8", errors="replace")
    first = regex.search(text)
    if first is None:
        return
    emit.found = True
    emit.event("begin", {"path": {"text": path}})
    if query.mode == "files_with_matches" and "\n" not in first.group():
        emit.line("match", 0, None)
        emit.event("end", {})
        return
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    matched = [i for i, line in enumerate(lines) if regex.search(line.rstrip("\r"))]
    if query.mode != "content":
        for i in matched[:1] if query.mode == "files_with_matches" else matched:
            emit.line("match", i + 1, None)
    else:
        marks = set(matched)
        for i in context_ranges(matched, query.context, len(lines)):
            emit.line("match" if i in marks else "context", i + 1, lines[i].rstrip("\r"))
    emit.event("end", {})


def run(query: WorkerQuery, out: BinaryIO) -> int:
    flags = re.MULTILINE | (re.IGNORECASE if query.case_insensitive else 0)
    try:
        regex = re.compile(query.pattern, flags)
    except re.error as exc:
        sys.stderr.write(f"regex parse error:\nerror: {exc}\n")
        return 2
    accept = include_filter(query.include)
    target, walk_root = Path(query.target), Path(query.walk_root)
    base = target if target.is_dir() else target.parent
    base_rel = base.relative_to(walk_root).as_posix()
    skip = 0 if base_rel == "." else len(base_rel) + 1
    at = time.monotonic() + query.timeout
    emit = Emitter(out, query)

    def out_of_time() -> bool:
        return time.monotonic() > at

    try:
        if target.is_file():
            search_file(regex, str(target), query, emit)
        else:
            walker = Walker(walk_root, lambda _: False, stop=out_of_time)
            for entry in walker.files(target, include_links=False):
                if out_of_time():
                    raise _WalkStopped
                if accept is None or accept(entry.name, entry.rel[skip:]):
                    search_file(regex, entry.path, query, emit)
    except _WalkStopped:
        emit.event("timeout", {})
    except MemoryError:
        sys.stderr.write(f"error: the Python search ran out of memory (its limit is "
                         f"{query.memory_bytes >> 20} MiB)\n")
        return 2
    return 0 if emit.found else 1


def include_filter(include: str | None) -> Callable[[str, str], bool] | None:
    """A filter on (name, path below the search directory) for the `include` glob."""
    if not include:
        return None
    if "/" in include:
        full = compile_glob(include.lstrip("/"))
        return lambda name, rel: full.match(rel)
    by_name = compile_glob(include)
    return lambda name, rel: by_name.match(name)


def main(argv: list[str]) -> int:
    """Exit 2 with one `error:` line on any failure: a crash must not read as "no match"."""
    out = sys.stdout.buffer
    try:
        query = msgspec.json.decode(argv[1], type=WorkerQuery)
        limit_self(query)
        return run(query, out)
    except Exception as exc:
        sys.stderr.write(f"error: the Python search failed: {type(exc).__name__}: {exc}\n")
        return 2
    finally:
        with contextlib.suppress(OSError):
            out.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
