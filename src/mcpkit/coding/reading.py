"""Reading files for `view`: sniffing images and binary data, rendering numbered lines
(streamed from a handle or in bulk from bytes in memory, with long lines cut and a byte cap
per page), directory listings, 'did you mean' suggestions for a missing file, and opening a
small regular file without blocking on a FIFO.
"""

from __future__ import annotations

import codecs
import difflib
import operator
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from mcpkit.coding.patches import FileToolError

MAX_LINE_CHARS = 2000
MAX_VIEW_BYTES = 256 * 1024
INLINE_VIEW_BYTES = 256 * 1024
"""Regular files up to this size are viewed on the event loop itself, read whole and rendered
in bulk (`render_data`, a fraction of a millisecond for usual text). A worker thread would
add a hand-off there and back (about 0.1-0.3 ms, most of a small view's time) and spare the
loop nothing but the wait on the disk: the rendering holds the GIL in either thread, and one
read of a file this small is short. Bigger files, directories and anything that is not a
regular file go to a worker thread, and big files are streamed (`render_lines`)."""
MAX_LISTING = 1000

_LINE_READ = MAX_LINE_CHARS * 4 + 8  # bytes: enough for MAX_LINE_CHARS characters of UTF-8
_BLOCK = 1 << 20

IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def sniff_image(head: bytes) -> str | None:
    for magic, mime in IMAGE_MAGIC:
        if head.startswith(magic):
            return mime
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def looks_binary(head: bytes) -> bool:
    if b"\x00" in head:
        return True
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return True
    return False


def _skip_lines(handle: Any, count: int) -> int:
    """Move past `count` newlines (fewer at end of file); the number skipped."""
    skipped = 0
    while skipped < count:
        block = handle.read(_BLOCK)
        if not block:
            return skipped
        found = block.count(b"\n")
        if skipped + found < count:
            skipped += found
            continue
        at = -1
        for _ in range(count - skipped):
            at = block.index(b"\n", at + 1)
        handle.seek(at + 1 - len(block), os.SEEK_CUR)
        return count
    return skipped


def _read_line(handle: Any) -> tuple[bytes, int] | None:
    """The next line (at most `_LINE_READ` bytes of it) and its full length in bytes."""
    chunk: bytes = handle.readline(_LINE_READ)
    if not chunk:
        return None
    total = len(chunk)
    if not chunk.endswith(b"\n"):
        while True:
            more: bytes = handle.readline(_BLOCK)
            if not more:
                break
            total += len(more)
            if more.endswith(b"\n"):
                break
    return chunk, total


def _shown_line(raw: bytes, total: int) -> str:
    """A line as `view` shows it (without its number): `raw` is how `_read_line` read it (at
    most `_LINE_READ` bytes, the newline included when it fits), `total` its full length."""
    text = raw.decode("utf-8", errors="replace").rstrip("\n").rstrip("\r")
    if len(text) > MAX_LINE_CHARS or total > len(raw):
        text = text[:MAX_LINE_CHARS] + f" … [line cut: {total} bytes]"
    return text


_PREFIX_CACHE_LINES = 20_000
_prefixes: tuple[str, ...] = ()
"""`f"{n:>6}\t"` for the line numbers n = 1, 2, … up to the highest a view has shown (at most
`_PREFIX_CACHE_LINES`: about 1.2 MB): formatting a number costs more than the rest of the
work on a line. A tuple, replaced whole when it grows, so threads can share it unlocked."""


def _numbered(lines: Sequence[str], first: int) -> str:
    """`lines` numbered from `first` like `cat -n`, joined with newlines."""
    global _prefixes
    last = first + len(lines) - 1
    cached = _prefixes
    if len(cached) < last <= _PREFIX_CACHE_LINES:
        grow_to = min(_PREFIX_CACHE_LINES, max(last, 2 * len(cached)))
        cached = _prefixes = cached + tuple(
            f"{number:>6}\t" for number in range(len(cached) + 1, grow_to + 1))
    if last <= len(cached):
        return "\n".join(map(operator.add, cached[first - 1:last], lines))
    return "\n".join([f"{number:>6}\t{line}" for number, line in enumerate(lines, first)])


def render_lines(handle: Any, offset: int, limit: int) -> tuple[str, int | None, int]:
    """Numbered lines from `offset`, streamed from `handle` (any size of file): (the text,
    the next offset if more lines follow, how many lines were skipped to reach `offset`)."""
    skipped = _skip_lines(handle, offset - 1)
    out: list[str] = []
    used = 0
    number = offset
    while len(out) < limit:
        got = _read_line(handle)
        if got is None:
            return "\n".join(out), None, skipped
        line = f"{number:>6}\t{_shown_line(*got)}"
        size = len(line.encode()) + 1
        if out and used + size > MAX_VIEW_BYTES:
            return "\n".join(out), number, skipped
        out.append(line)
        used += size
        number += 1
    more = handle.read(1)
    return "\n".join(out), (number if more else None), skipped


def render_data(data: bytes, offset: int, limit: int) -> tuple[str, int | None, int]:
    """`render_lines` for a file held in memory, with the same output: one decode, one split
    and one numbering pass in C instead of Python work per line (lines short enough never to
    be cut, the usual case, need nothing else)."""
    # Decoding the whole text equals decoding line by line: a newline byte is never part of
    # a UTF-8 sequence, valid or not, so "replace" never swallows one.
    text = data.decode("utf-8", errors="replace")
    end = offset - 1 + limit
    parts = text.split("\n", end)  # the lines up to the window's end, then the rest if any
    skipped = min(offset - 1, len(parts) - 1)  # the newlines passed before `offset`
    if len(parts) > end:  # `limit` whole lines from `offset`; more when the rest is not empty
        lines = parts[offset - 1:end]
        next_offset = offset + limit if parts[end] else None
    else:  # the file ends in the window (or before): its last piece is a line unless empty
        if not parts[-1]:
            parts.pop()
        lines = parts[offset - 1:]
        next_offset = None
    if not lines:
        return "", None, skipped
    # Only a line of more than MAX_LINE_CHARS characters can be cut: a shorter one came from
    # at most 4 bytes a character, under _LINE_READ with its newline. (Counted with its CRs.)
    long_lines = max(map(len, lines)) > MAX_LINE_CHARS
    if "\r" in text:
        lines = [line.rstrip("\r") for line in lines]
    if long_lines:
        lines = _cut_long_lines(data, lines, offset)
    shown = _numbered(lines, offset)
    size = len(shown) if shown.isascii() else len(shown.encode())  # isascii(): O(1) on str
    if size + 1 > MAX_VIEW_BYTES:  # the rare page over the byte cap: cut it line by line
        shown, next_offset = _cap_bytes(lines, offset, next_offset)
    return shown, next_offset, skipped


def _cut_long_lines(data: bytes, lines: list[str], offset: int) -> list[str]:
    """`lines` (from line `offset` of `data`) with those of more than `MAX_LINE_CHARS` bytes
    redone from their bytes exactly as `render_lines` shows them."""
    first = offset - 1
    raws = data.split(b"\n", first + len(lines))[first:first + len(lines)]
    unterminated = data.count(b"\n") - first  # the index of a last line without a newline
    out = list(lines)
    for i, raw in enumerate(raws):
        if len(raw) > MAX_LINE_CHARS:
            whole = raw if i == unterminated else raw + b"\n"
            out[i] = _shown_line(whole[:_LINE_READ], len(whole))
    return out


def _cap_bytes(lines: Sequence[str], first: int, next_offset: int | None
               ) -> tuple[str, int | None]:
    """The numbered `lines` that fit in `MAX_VIEW_BYTES` (at least one), as `render_lines`
    cuts them, and the next offset (the first line left out, else `next_offset`)."""
    out: list[str] = []
    used = 0
    for number, line in enumerate(lines, first):
        shown = f"{number:>6}\t{line}"
        size = len(shown.encode()) + 1
        if out and used + size > MAX_VIEW_BYTES:
            return "\n".join(out), number
        out.append(shown)
        used += size
    return "\n".join(out), next_offset


def suggest(real: Path, display: str) -> str:
    parent = real.parent
    if not parent.is_dir():
        return f"File not found: {display} (its directory does not exist either)"
    try:
        names = os.listdir(parent)
    except OSError:
        names = []
    close = difflib.get_close_matches(real.name, names, n=3, cutoff=0.5)
    if not close:
        lowered = [n for n in names if n.lower() == real.name.lower()]
        close = lowered[:3]
    if not close:
        return f"File not found: {display}"
    base = Path(display).parent
    shown = ", ".join(str(base / name) if str(base) != "." else name for name in close)
    return f"File not found: {display}. Did you mean: {shown}?"


def listing(real: Path, display: str) -> str:
    entries = []
    with os.scandir(real) as scan:
        for entry in scan:
            suffix = ""
            if entry.is_symlink():
                suffix = "@"
            elif entry.is_dir():
                suffix = "/"
            entries.append(entry.name + suffix)
    entries.sort(key=lambda n: (not n.endswith("/"), n.lower()))
    shown = entries[:MAX_LISTING]
    text = f"{display} is a directory ({len(entries)} entries):\n" + "\n".join(shown)
    if len(entries) > len(shown):
        text += f"\n… {len(entries) - len(shown)} more"
    return text


def open_small_file(real: Path) -> BinaryIO | None:
    """`real` opened for reading when it is a regular file of at most `INLINE_VIEW_BYTES`,
    else None (missing, a directory, big, a FIFO …: the worker thread deals with it).

    O_NONBLOCK: opening a FIFO (or one swapped in for the file) must not wait for a writer
    on the event loop; it changes nothing for reading a regular file."""
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_size <= INLINE_VIEW_BYTES:
            return open(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None


def past_end(handle: BinaryIO, display: str, offset: int, skipped: int) -> FileToolError:
    """The refusal of an `offset` past the last line: the file has `skipped` lines, plus one
    when its last line has no newline."""
    total = skipped
    if skipped < offset - 1:
        handle.seek(-1, os.SEEK_END)
        total += handle.read(1) != b"\n"
    return FileToolError(f"offset {offset} is past the end of {display} (it has {total} lines)")
