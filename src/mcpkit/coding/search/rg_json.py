"""ripgrep's `--json` event stream, read into what `grep` found: a parser that does no IO.

Both grep engines print these events, one JSON object a line: ripgrep itself and the Python
worker (`grep_worker.py`), which adds `chars` (the full length of a line it cut) and a
`{"type": "timeout"}` event. `RgJsonParser` is fed one line at a time (`feed`), or the start
of a line too long to read whole (`feed_oversized`), and builds a `GrepOutcome`: the files
with a match, their matching (and context) lines, and the counts of what it kept no more of.

It touches no file and no process: paths are computed from the ones in the events, so it can
be tested on any bytes. What it keeps is bounded whatever it is fed: at most `max_files`
files (the rest are only counted), `store_lines` lines in all (the rest are only counted),
`max_line` characters of one line; a line that is not a well-formed event is skipped,
as if it were not there.
ripgrep writes a path or a line that is not valid UTF-8 as `{"bytes": <base64>}`; it is
decoded with U+FFFD for the invalid bytes.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePath

import msgspec

from mcpkit.coding.search.common import shown_path

STORE_LINES = 20_000
"""Lines `grep` keeps in memory for content output; past that it only counts."""
MAX_FILES_KEPT = 50_000
"""Files with matches `grep` keeps (paths, counts); past that it only counts them."""
MAX_LINE = 400
"""Characters of one line `grep` shows; the rest is cut with a note."""
OVERSIZED_LINE_TEXT = "[line too long to show]"


def cut_line(text: str, chars: int | None = None, max_line: int | None = None) -> str:
    """At most `max_line` (default `MAX_LINE`) characters of a line (`chars`: its full length
    when the engine already cut it), with a note of the full length."""
    limit = MAX_LINE if max_line is None else max_line
    full = max(len(text), chars or 0)
    if full <= limit:
        return text
    return f"{text[:limit]} … [line cut, {full} chars]"


@dataclass(slots=True)
class FileHits:
    path: str  # as shown to the model
    abs_path: str
    matches: int = 0
    lines: list[tuple[int, str, bool]] = field(default_factory=list)  # (number, text, match)


@dataclass(slots=True)
class GrepOutcome:
    """What one search found; `files_dropped` and `matches_dropped` count what was found past
    `max_files` kept files."""

    engine: str
    files: list[FileHits] = field(default_factory=list)
    stored: int = 0
    timed_out: bool = False
    files_dropped: int = 0  # past max_files: counted only
    matches_dropped: int = 0
    max_files: int = MAX_FILES_KEPT
    store_lines: int = STORE_LINES

    def add(self, hits: FileHits) -> None:
        if hits.matches <= 0:
            return
        if len(self.files) >= self.max_files:
            self.files_dropped += 1
            self.matches_dropped += hits.matches
            return
        if self.stored >= self.store_lines:
            hits.lines = []
        self.stored += len(hits.lines)
        self.files.append(hits)


# --- the events ------------------------------------------------------------------------------


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
    """A `{"text": …}` or `{"bytes": <base64>}` value as text (invalid UTF-8 as U+FFFD)."""
    if value is None:
        return ""
    if value.text is not None:
        return value.text
    return base64.b64decode(value.bytes or "").decode("utf-8", errors="replace")


# --- the parser ------------------------------------------------------------------------------

PathFilter = Callable[[str, str], bool]
"""An `include` filter on (file name, path below the searched directory)."""


class RgJsonParser:
    """Turns the engines' JSON events into a `GrepOutcome` (on the event loop: each event is
    small - see `child_lines.MAX_LINE_BYTES` - and costs one msgspec decode).

    `walk_root` is the directory the engine's relative paths start from, `workspace_root`
    the one the model's paths are shown from, `base` the directory searched (or the file's
    directory), `mode` the grep output mode (lines are kept in `content` mode only), and
    `accept` an optional filter a file must pass to count."""

    def __init__(self, *, engine: str, mode: str, walk_root: PurePath,
                 workspace_root: PurePath, base: PurePath, accept: PathFilter | None = None,
                 max_files: int | None = None, store_lines: int | None = None,
                 max_line: int | None = None) -> None:
        self.outcome = GrepOutcome(
            engine, max_files=MAX_FILES_KEPT if max_files is None else max_files,
            store_lines=STORE_LINES if store_lines is None else store_lines)
        self.mode = mode
        self.walk_root = walk_root
        self.workspace_root = workspace_root
        self.accept = accept
        self.max_line = MAX_LINE if max_line is None else max_line
        self.current: FileHits | None = None
        base_rel = base.relative_to(walk_root).as_posix()
        self.skip = 0 if base_rel == "." else len(base_rel) + 1

    def feed(self, raw: bytes) -> None:
        """One line of the engine's output (without its newline); not an event: skipped."""
        try:
            event = _rg_decoder.decode(raw)
        except (msgspec.DecodeError, ValueError):
            return
        kind, data = event.type, event.data
        try:
            if kind == "begin":
                self._begin(_rg_text(data.path))
            elif kind in ("match", "context"):
                text = _rg_text(data.lines) if data.lines is not None else None
                self._line(kind == "match", data.line_number or 0, text, data.chars)
        except (binascii.Error, ValueError):
            return  # `bytes` that are not base64, or a path outside the walk
        if kind == "end":
            if self.current is not None:
                self.outcome.add(self.current)
            self.current = None
        elif kind == "timeout":
            self.outcome.timed_out = True

    def feed_oversized(self, prefix: bytes) -> None:
        """A line of more than a MiB (ripgrep prints a matched line whole): counted, shown as
        a note; its line number comes after its text, so it is not known."""
        for kind in (b"match", b"context"):
            if prefix.startswith(b'{"type":"' + kind + b'"'):
                self._line(kind == b"match", 0, OVERSIZED_LINE_TEXT, None)

    def _begin(self, shown: str) -> None:
        """A new file; `ValueError` (the event is skipped, nothing changed) when its path is
        absolute but outside `walk_root`."""
        walk_root = self.walk_root
        if shown.startswith("./"):
            shown = shown[2:]
        absolute = os.path.isabs(shown)
        abs_path = shown if absolute else str(walk_root / shown)
        rel = PurePath(shown).relative_to(walk_root).as_posix() if absolute else shown
        if self.accept is not None and not self.accept(rel.rsplit("/", 1)[-1], rel[self.skip:]):
            self.current = None
            return
        self.current = FileHits(shown_path(self.workspace_root, walk_root, rel), abs_path)

    def _line(self, is_match: bool, number: int, text: str | None, chars: int | None) -> None:
        current = self.current
        if current is None:
            return
        if is_match:
            current.matches += 1
        if (self.mode == "content" and text is not None
                and self.outcome.stored + len(current.lines) < self.outcome.store_lines):
            current.lines.append((number, cut_line(text.rstrip("\n").rstrip("\r"), chars,
                                                   self.max_line), is_match))
