"""File tools: `view` (alias `read`), `write`, `edit` and `patch`.

Every path goes through `Workspace.resolve` (confinement). Writers follow these rules:

- **read before write**: an existing file may only be changed when the task has read it
  (`view`) and it is unchanged since (same mtime_ns and size as recorded); the record is
  renewed after each write, so a model can edit a file several times in a row;
- **atomic**: the new bytes go to a temporary file beside the target, which is renamed over
  it (`os.replace` replaces a symlink swapped in meanwhile, it never writes through it); the
  file's mode and its line endings (CRLF stays CRLF) and a UTF-8 BOM are kept;
- **serialized per path**: writes of one file take a lock and re-check the read record under
  it, so concurrent edits of one file all land;
- `patch` checks every hunk of every file before writing anything (all or nothing).

Failures are `isError` results with a message for the model, never exceptions.
"""

from __future__ import annotations

import codecs
import contextlib
import difflib
import operator
import os
import re
import stat
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import anyio
import anyio.to_thread
import msgspec

from mcpkit.coding.env import CodingEnv
from mcpkit.coding.scope import ReadRecord
from mcpkit.coding.workspace import WorkspaceError
from mcpkit.server import content
from mcpkit.server.server import Server
from mcpkit.server.tools import ToolResult

DEFAULT_LIMIT = 2000
MAX_LINE_CHARS = 2000
MAX_VIEW_BYTES = 256 * 1024
INLINE_VIEW_BYTES = 256 * 1024
"""Regular files up to this size are viewed on the event loop itself, read whole and rendered
in bulk (`_render_data`, a fraction of a millisecond for usual text). A worker thread would
add a hand-off there and back (about 0.1-0.3 ms, most of a small view's time) and spare the
loop nothing but the wait on the disk: the rendering holds the GIL in either thread, and one
read of a file this small is short. Bigger files, directories and anything that is not a
regular file go to a worker thread, and big files are streamed (`_render_lines`)."""
MAX_IMAGE_BYTES = 4 * 1024 * 1024
MAX_EDIT_BYTES = 64 * 1024 * 1024
SNIFF_BYTES = 8192
MAX_LISTING = 1000
MAX_DIFF_LINES = 80
MAX_DIFF_CHARS = 8000
PATCH_DRIFT = 100
"""How far (in lines) a unified-diff hunk is looked for around its stated line first."""

_LINE_READ = MAX_LINE_CHARS * 4 + 8  # bytes: enough for MAX_LINE_CHARS characters of UTF-8
_BLOCK = 1 << 20

IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
             "openWorldHint": False}
WRITES = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True,
          "openWorldHint": False}
EDITS = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False,
         "openWorldHint": False}

WRITE_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "created": {"type": "boolean"},
        "bytes": {"type": "integer"},
        "line_ending": {"enum": ["lf", "crlf"]},
    },
    "required": ["path", "created", "bytes", "line_ending"],
}
EDIT_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "replacements": {"type": "integer"},
        "first_line": {"type": "integer"},
        "diff": {"type": "string"},
    },
    "required": ["path", "replacements", "first_line", "diff"],
}
PATCH_OUTPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "files": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "action": {"enum": ["update", "add", "delete", "move"]},
                    "added": {"type": "integer"},
                    "removed": {"type": "integer"},
                },
                "required": ["path", "action", "added", "removed"],
            },
        },
    },
    "required": ["files"],
}


class FileToolError(Exception):
    """A refusal or failure of a file tool (the message is meant for the model)."""


def _error(message: str) -> ToolResult:
    return ToolResult(content=[{"type": "text", "text": message}], is_error=True)


def _text(message: str, structured: Any = None) -> ToolResult:
    return ToolResult(content=[{"type": "text", "text": message}],
                      structured_content=structured)


# --- text helpers ----------------------------------------------------------------------------


@dataclass(slots=True)
class TextFile:
    """A file's text with its conventions: LF-normalized text, the line ending, a BOM."""

    text: str
    crlf: bool
    bom: bool

    @classmethod
    def decode(cls, data: bytes) -> TextFile:
        bom = data.startswith(codecs.BOM_UTF8)
        if bom:
            data = data[len(codecs.BOM_UTF8):]
        raw = data.decode("utf-8", errors="surrogateescape")
        crlf_count = raw.count("\r\n")
        crlf = crlf_count > 0 and crlf_count * 2 >= raw.count("\n")
        return cls(raw.replace("\r\n", "\n") if crlf else raw, crlf, bom)

    def encode(self, text: str) -> bytes:
        if self.crlf:
            text = text.replace("\r\n", "\n").replace("\n", "\r\n")
        try:
            data = text.encode("utf-8", errors="surrogateescape")
        except UnicodeEncodeError as exc:
            raise FileToolError(f"the new text cannot be encoded as UTF-8: {exc.reason}") from None
        return codecs.BOM_UTF8 + data if self.bom else data


def _normalize(text: str) -> str:
    return text.replace("\r\n", "\n")


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _split_lines(text: str) -> tuple[list[str], bool]:
    """(lines without their newlines, whether the text ended with a newline)."""
    if text == "":
        return [], False
    trailing = text.endswith("\n")
    return (text[:-1] if trailing else text).split("\n"), trailing


def _short(line: str, limit: int = 120) -> str:
    return line if len(line) <= limit else line[:limit] + "…"


def closest_lines(lines: Sequence[str], wanted: Sequence[str], *, start: int = 0) -> str | None:
    """'closest match at line N:' and the numbered lines most like `wanted`, or None."""
    if not lines or not wanted:
        return None
    size = max(1, len(wanted))
    target = "\n".join(w.strip() for w in wanted)
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(target)
    best, best_at = 0.0, -1
    last = max(start, len(lines) - size)
    step = 1 if last - start < 20000 else (last - start) // 20000 + 1
    first_wanted = wanted[0].strip()
    for at in range(start, last + 1, step):
        window = "\n".join(x.strip() for x in lines[at:at + size])
        matcher.set_seq1(window)
        if matcher.real_quick_ratio() <= best or matcher.quick_ratio() <= best:
            continue
        ratio = matcher.ratio()
        if ratio > best or (ratio == best and lines[at].strip() == first_wanted):
            best, best_at = ratio, at
    if best_at < 0 or best < 0.5:
        return None
    shown = lines[best_at:best_at + min(size, 6)]
    numbered = "\n".join(f"{best_at + 1 + k:>6}\t{_short(x)}" for k, x in enumerate(shown))
    return f"closest match at line {best_at + 1} ({best:.0%} similar):\n{numbered}"


def short_diff(display: str, before: str, after: str) -> str:
    """A unified diff of two texts, computed on their differing middle, capped."""
    a, _ = _split_lines(before)
    b, _ = _split_lines(after)
    prefix = 0
    while prefix < len(a) and prefix < len(b) and a[prefix] == b[prefix]:
        prefix += 1
    suffix = 0
    while (suffix < len(a) - prefix and suffix < len(b) - prefix
           and a[-1 - suffix] == b[-1 - suffix]):
        suffix += 1
    lo = max(0, prefix - 3)
    a_mid = a[lo:len(a) - max(0, suffix - 3)]
    b_mid = b[lo:len(b) - max(0, suffix - 3)]
    out: list[str] = []
    for line in difflib.unified_diff(a_mid, b_mid, f"a/{display}", f"b/{display}", lineterm=""):
        match = _HUNK_HEADER.match(line)
        if match and lo:
            old_start, old_count, new_start, new_count = match.groups()
            line = (f"@@ -{int(old_start) + lo}{',' + old_count if old_count else ''} "
                    f"+{int(new_start) + lo}{',' + new_count if new_count else ''} @@")
        out.append(line)
    text = "\n".join(out[:MAX_DIFF_LINES])
    if len(out) > MAX_DIFF_LINES or len(text) > MAX_DIFF_CHARS:
        text = text[:MAX_DIFF_CHARS] + f"\n… diff truncated ({len(out)} lines)"
    return text


# --- file system helpers (blocking; run in a worker thread) -------------------------------


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _record(st: os.stat_result) -> ReadRecord:
    return ReadRecord(st.st_mtime_ns, st.st_size)


def atomic_write(real: Path, data: bytes, mode: int, owner: tuple[int, int] | None = None
                 ) -> ReadRecord:
    """Write `data` to a temporary file beside `real` and rename it over `real`."""
    fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name[:64]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if owner is not None:
            with contextlib.suppress(OSError):
                os.chown(tmp, *owner)
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return _record(os.lstat(real))


def _sniff_image(head: bytes) -> str | None:
    for magic, mime in IMAGE_MAGIC:
        if head.startswith(magic):
            return mime
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _looks_binary(head: bytes) -> bool:
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


def _render_lines(handle: Any, offset: int, limit: int) -> tuple[str, int | None, int]:
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


def _render_data(data: bytes, offset: int, limit: int) -> tuple[str, int | None, int]:
    """`_render_lines` for a file held in memory, with the same output: one decode, one split
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
    redone from their bytes exactly as `_render_lines` shows them."""
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
    """The numbered `lines` that fit in `MAX_VIEW_BYTES` (at least one), as `_render_lines`
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


def _suggest(real: Path, display: str) -> str:
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


def _listing(real: Path, display: str) -> str:
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


def _open_small_file(real: Path) -> BinaryIO | None:
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


def _past_end(handle: BinaryIO, display: str, offset: int, skipped: int) -> FileToolError:
    """The refusal of an `offset` past the last line: the file has `skipped` lines, plus one
    when its last line has no newline."""
    total = skipped
    if skipped < offset - 1:
        handle.seek(-1, os.SEEK_END)
        total += handle.read(1) != b"\n"
    return FileToolError(f"offset {offset} is past the end of {display} (it has {total} lines)")


# --- patch parsing ---------------------------------------------------------------------------

_HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Hunk:
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    start: int | None = None
    """0-based index in the old file where `old` begins, when the diff says."""
    anchor: str | None = None
    eof: bool = False
    old_no_eol: bool = False
    new_no_eol: bool = False
    plus: int = 0
    minus: int = 0
    blank_tail: int = 0
    """Context lines at the end that came from empty diff lines (trimmed: editors add them)."""


@dataclass
class FilePatch:
    path: str
    action: str  # "update" | "add" | "delete"
    hunks: list[Hunk] = field(default_factory=list)
    move_to: str | None = None


def _diff_path(raw: str) -> str | None:
    name = raw.split("\t", 1)[0].strip()
    if name.startswith('"') and name.endswith('"') and len(name) >= 2:
        name = name[1:-1]
    if name == "/dev/null":
        return None
    if name[:2] in ("a/", "b/"):
        name = name[2:]
    return name


def parse_patch(diff: str, file_path: str | None) -> list[FilePatch]:
    text = _normalize(diff)
    stripped = text.lstrip()
    if stripped.startswith("*** Begin Patch"):
        return _parse_codex(stripped.split("\n"))
    return _parse_unified(text.split("\n"), file_path)


def _hunk_line(hunk: Hunk, line: str) -> bool:
    """Add one body line to `hunk`; False when `line` is not a hunk body line."""
    if line == "":
        hunk.old.append("")
        hunk.new.append("")
        hunk.blank_tail += 1
        return True
    kind, rest = line[0], line[1:]
    if kind == "\\":
        return True
    if kind == " ":
        hunk.old.append(rest)
        hunk.new.append(rest)
    elif kind == "-":
        hunk.old.append(rest)
        hunk.minus += 1
    elif kind == "+":
        hunk.new.append(rest)
        hunk.plus += 1
    else:
        return False
    hunk.blank_tail = 0
    return True


def _finish(hunk: Hunk) -> None:
    if hunk.blank_tail:
        del hunk.old[-hunk.blank_tail:]
        del hunk.new[-hunk.blank_tail:]
        hunk.blank_tail = 0


def _parse_unified(lines: list[str], file_path: str | None) -> list[FilePatch]:
    files: list[FilePatch] = []
    current: FilePatch | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = _diff_path(line[4:]), _diff_path(lines[i + 1][4:])
            if old is None and new is None:
                raise FileToolError("a diff header names /dev/null on both sides")
            if old is None:
                current = FilePatch(str(new), "add")
            elif new is None:
                current = FilePatch(old, "delete")
            else:
                current = FilePatch(old, "update", move_to=new if new != old else None)
            files.append(current)
            i += 2
            continue
        if line.startswith("@@"):
            if current is None:
                if not file_path:
                    raise FileToolError("the diff has hunks but no '--- a/x' / '+++ b/x' "
                                        "headers; pass file_path")
                current = FilePatch(file_path, "update")
                files.append(current)
            hunk = Hunk()
            match = _HUNK_HEADER.match(line)
            if match:
                old_start, old_count = int(match.group(1)), match.group(2)
                hunk.start = old_start if old_count == "0" else max(0, old_start - 1)
            i += 1
            last_kind = ""
            while i < len(lines):
                body = lines[i]
                header = (body.startswith("--- ") and i + 1 < len(lines)
                          and lines[i + 1].startswith("+++ "))
                if header or body.startswith(("@@", "diff --git ")):
                    break
                if body.startswith("\\"):
                    if last_kind in ("-", " "):
                        hunk.old_no_eol = True
                    if last_kind in ("+", " "):
                        hunk.new_no_eol = True
                elif not _hunk_line(hunk, body):
                    break
                last_kind = body[:1] or " "
                i += 1
            _finish(hunk)
            current.hunks.append(hunk)
            continue
        i += 1
    if not files:
        raise FileToolError("no hunks found in the diff (expected '@@ -a,b +c,d @@' lines or "
                            "the '*** Begin Patch' format)")
    return files


def _parse_codex(lines: list[str]) -> list[FilePatch]:
    files: list[FilePatch] = []
    current: FilePatch | None = None
    hunk: Hunk | None = None
    ended = False
    for number, line in enumerate(lines[1:], start=2):
        if line.startswith("*** End Patch"):
            ended = True
            break
        if line.startswith("*** "):
            if hunk is not None:
                _finish(hunk)
            hunk = None
            for prefix, action in (("*** Update File:", "update"), ("*** Add File:", "add"),
                                   ("*** Delete File:", "delete")):
                if line.startswith(prefix):
                    path = line[len(prefix):].strip()
                    if not path:
                        raise FileToolError(f"line {number}: a file path is missing")
                    current = FilePatch(path, action)
                    files.append(current)
                    if action == "add":
                        hunk = Hunk(start=0)
                        current.hunks.append(hunk)
                    break
            else:
                if line.startswith("*** Move to:") and current is not None:
                    current.move_to = line[len("*** Move to:"):].strip()
                elif line.startswith("*** End of File") and current is not None:
                    if current.hunks:
                        current.hunks[-1].eof = True
                else:
                    raise FileToolError(f"line {number}: unknown patch line {_short(line)!r}")
            continue
        if current is None:
            if line.strip() == "":
                continue
            raise FileToolError(f"line {number}: expected '*** Update File:', '*** Add File:' "
                                "or '*** Delete File:'")
        if current.action == "delete":
            if line.strip():
                raise FileToolError(f"line {number}: a deleted file takes no lines")
            continue
        if current.action == "add":
            assert hunk is not None
            if line.startswith("+"):
                hunk.new.append(line[1:])
            elif line.strip():
                raise FileToolError(f"line {number}: lines of an added file start with '+'")
            continue
        if line.startswith("@@"):
            if hunk is not None:
                _finish(hunk)
            anchor = line[2:].strip()
            hunk = Hunk(anchor=anchor or None)
            current.hunks.append(hunk)
            continue
        if hunk is None:
            hunk = Hunk()
            current.hunks.append(hunk)
        if not _hunk_line(hunk, line):
            raise FileToolError(f"line {number}: a hunk line must start with ' ', '-' or '+': "
                                f"{_short(line)!r}")
    if hunk is not None:
        _finish(hunk)
    if not ended:
        raise FileToolError("the patch has no '*** End Patch' line")
    if not files:
        raise FileToolError("the patch names no files")
    return files


_COMPARE: tuple[Callable[[str], str], ...] = (lambda s: s, str.rstrip, str.strip)


def _matches_at(lines: list[str], old: list[str], at: int, norm: Callable[[str], str]) -> bool:
    if at < 0 or at + len(old) > len(lines):
        return False
    return all(norm(lines[at + k]) == norm(old[k]) for k in range(len(old)))


def locate(lines: list[str], hunk: Hunk, floor: int) -> int | None:
    """Where `hunk.old` starts in `lines` (at or after `floor`), or None."""
    old = hunk.old
    if hunk.anchor is not None:
        found = None
        for norm in _COMPARE:
            want = norm(hunk.anchor)
            found = next((k for k in range(floor, len(lines)) if norm(lines[k]) == want), None)
            if found is not None:
                break
        if found is None:
            return None
        if not old:
            return found + 1
        floor = found if _matches_at(lines, old, found, str.strip) else found + 1
    if not old:
        if hunk.start is not None:
            return min(max(hunk.start, floor), len(lines))
        return len(lines)
    if hunk.eof:
        for norm in _COMPARE:
            if _matches_at(lines, old, len(lines) - len(old), norm):
                return len(lines) - len(old)
    for norm in _COMPARE:
        if hunk.start is not None:
            for delta in range(PATCH_DRIFT + 1):
                for at in (hunk.start + delta, hunk.start - delta):
                    if at >= floor and _matches_at(lines, old, at, norm):
                        return at
            found_all = [k for k in range(floor, len(lines) - len(old) + 1)
                         if _matches_at(lines, old, k, norm)]
            if len(found_all) == 1:
                return found_all[0]
        else:
            for k in range(floor, len(lines) - len(old) + 1):
                if _matches_at(lines, old, k, norm):
                    return k
    return None


def apply_hunks(display: str, text: str, hunks: list[Hunk]) -> tuple[str, int, int, list[str]]:
    """(new text, lines added, lines removed, problems); problems non-empty: not applied."""
    lines, trailing = _split_lines(text)
    problems: list[str] = []
    pieces: list[tuple[int, int, list[str]]] = []
    floor = 0
    added = removed = 0
    for number, hunk in enumerate(hunks, start=1):
        at = locate(lines, hunk, floor)
        if at is None:
            where = f" near line {hunk.start + 1}" if hunk.start is not None else ""
            first = next((x for x in hunk.old if x.strip()), hunk.old[0] if hunk.old else "")
            problem = (f"{display}: hunk {number} does not apply (context not found{where}; "
                       f"first line {_short(first)!r})")
            hint = closest_lines(lines, hunk.old)
            if hint:
                problem += "; " + hint.replace("\n", "\n    ")
            problems.append(problem)
            continue
        pieces.append((at, at + len(hunk.old), hunk.new))
        floor = at + len(hunk.old)
        if floor >= len(lines):
            if hunk.new_no_eol:
                trailing = False
            elif hunk.old_no_eol:
                trailing = True
        added += hunk.plus
        removed += hunk.minus
    if problems:
        return text, 0, 0, problems
    out: list[str] = []
    cursor = 0
    for start, end, new in pieces:
        out.extend(lines[cursor:start])
        out.extend(new)
        cursor = end
    out.extend(lines[cursor:])
    result = "\n".join(out)
    if out and (trailing or not lines):
        result += "\n"
    return result, added, removed, []


# --- the tools --------------------------------------------------------------------------------


@dataclass
class _Plan:
    """One file's change in a patch, computed before anything is written."""

    real: Path
    display: str
    action: str
    data: bytes | None = None
    mode: int = 0o644
    owner: tuple[int, int] | None = None
    original: bytes | None = None
    dest: Path | None = None
    added: int = 0
    removed: int = 0


class FileTools:
    """The state the file tools share: the env and the per-path write locks."""

    def __init__(self, env: CodingEnv) -> None:
        self.env = env
        self.locks: dict[Path, anyio.Lock] = {}
        self.new_file_mode = 0o666 & ~_umask()

    # helpers

    def resolve(self, file_path: str) -> tuple[Path, str]:
        real = self.env.workspace.resolve(file_path, default_root=False)
        return real, self.env.workspace.display(real)

    @contextlib.asynccontextmanager
    async def locked(self, paths: Sequence[Path]) -> AsyncIterator[None]:
        """Hold the write locks of `paths` (in a fixed order); forget idle locks after."""
        ordered = sorted(set(paths))
        locks = [self.locks.setdefault(path, anyio.Lock()) for path in ordered]
        try:
            async with contextlib.AsyncExitStack() as stack:
                for lock in locks:
                    await stack.enter_async_context(lock)
                yield
        finally:
            for path, lock in zip(ordered, locks, strict=True):
                idle = not lock.locked() and lock.statistics().tasks_waiting == 0
                if idle and self.locks.get(path) is lock:
                    del self.locks[path]

    def check_fresh(self, reads: dict[Path, ReadRecord], real: Path, display: str
                    ) -> os.stat_result | None:
        """The stat of an existing regular file the task may change (None: it does not exist)."""
        try:
            st = os.lstat(real)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat.S_ISLNK(st.st_mode):
            raise FileToolError(f"{display} was replaced by a symlink since it was read; "
                                "refusing to write through it")
        if stat.S_ISDIR(st.st_mode):
            raise FileToolError(f"{display} is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise FileToolError(f"{display} is not a regular file")
        record = reads.get(real)
        if record is None:
            raise FileToolError(f"{display} exists but has not been read in this task; "
                                f"view it before changing it")
        if record.mtime_ns != st.st_mtime_ns or record.size != st.st_size:
            raise FileToolError(f"{display} has changed on disk since it was last read; "
                                f"view it again before changing it")
        return st

    def recheck(self, file_path: str, real: Path) -> None:
        """Resolve again under the lock: a symlink swapped in meanwhile is refused."""
        again, _ = self.resolve(file_path)
        if again != real:
            raise FileToolError(f"{file_path} changed (now resolves to "
                                f"{self.env.workspace.display(again)}) since the call began")

    # view

    async def view(self, file_path: str, offset: int, limit: int) -> Any:
        real, display = self.resolve(file_path)
        reads = self.env.scopes.current().reads
        small = _open_small_file(real)
        if small is not None:  # on the event loop: see INLINE_VIEW_BYTES
            with small:
                return self._view_file(small, real, display, offset, limit, reads)
        return await anyio.to_thread.run_sync(self._view, real, display, offset, limit, reads)

    def _view(self, real: Path, display: str, offset: int, limit: int,
              reads: dict[Path, ReadRecord]) -> ToolResult:
        """A view in a worker thread: a directory, a big file, or what is not a file."""
        if real.is_dir():
            return _text(_listing(real, display))
        if not real.exists():
            raise FileToolError(_suggest(real, display))
        st = os.stat(real)
        if not stat.S_ISREG(st.st_mode):
            raise FileToolError(f"{display} is not a regular file")
        with open(real, "rb") as handle:
            return self._view_file(handle, real, display, offset, limit, reads)

    def _view_file(self, handle: BinaryIO, real: Path, display: str, offset: int, limit: int,
                   reads: dict[Path, ReadRecord]) -> ToolResult:
        """The view of the regular file open in `handle` (at its start)."""
        st = os.fstat(handle.fileno())
        head = handle.read(SNIFF_BYTES)
        mime = _sniff_image(head)
        if mime is not None:
            if st.st_size > MAX_IMAGE_BYTES:
                raise FileToolError(f"{display} is a {mime} image of {st.st_size} bytes, "
                                    f"over the {MAX_IMAGE_BYTES} byte limit")
            data = head + handle.read()
            reads[real] = _record(st)
            return ToolResult(content=[
                content.image(data, mime),
                {"type": "text", "text": f"{display}: {mime}, {len(data)} bytes"},
            ])
        if _looks_binary(head):
            raise FileToolError(f"{display} is a binary file ({st.st_size} bytes); "
                                "not shown")
        reads[real] = _record(st)
        if st.st_size == 0:
            return _text(f"{display} is empty")
        if st.st_size <= INLINE_VIEW_BYTES:
            text, next_offset, skipped = _render_data(head + handle.read(), offset, limit)
        else:
            handle.seek(0)
            text, next_offset, skipped = _render_lines(handle, offset, limit)
        if not text:
            raise _past_end(handle, display, offset, skipped)
        if next_offset is not None:
            text += (f"\n… more lines follow; use offset={next_offset} to continue")
        return _text(text)

    # write

    async def write(self, file_path: str, text: str) -> ToolResult:
        real, display = self.resolve(file_path)
        reads = self.env.scopes.current().reads
        async with self.locked([real]):
            self.recheck(file_path, real)
            return await anyio.to_thread.run_sync(self._write, real, display, text, reads)

    def _write(self, real: Path, display: str, text: str,
               reads: dict[Path, ReadRecord]) -> ToolResult:
        st = self.check_fresh(reads, real, display)
        if st is None:
            conventions = TextFile("", crlf=False, bom=False)
            mode, owner = self.new_file_mode, None
            parent = real.parent
            if not self.env.workspace.contains(parent):
                raise FileToolError(f"{display} is outside the workspace")
            if parent.exists() and not parent.is_dir():
                raise FileToolError(f"{self.env.workspace.display(parent)} is not a directory")
            parent.mkdir(parents=True, exist_ok=True)
        else:
            with open(real, "rb") as handle:
                head = handle.read(SNIFF_BYTES * 8)
            binary = _looks_binary(head[:SNIFF_BYTES]) or _sniff_image(head) is not None
            conventions = TextFile("", False, False) if binary else TextFile.decode(head)
            if text.startswith("\ufeff"):
                conventions.bom = False
            mode, owner = stat.S_IMODE(st.st_mode), (st.st_uid, st.st_gid)
        data = conventions.encode(text)
        reads[real] = atomic_write(real, data, mode, owner)
        verb = "Created" if st is None else "Wrote"
        ending = "crlf" if conventions.crlf else "lf"
        return _text(f"{verb} {display} ({len(data)} bytes"
                     f"{', CRLF line endings kept' if conventions.crlf else ''})",
                     {"path": display, "created": st is None, "bytes": len(data),
                      "line_ending": ending})

    # edit

    async def edit(self, file_path: str, old: str, new: str, replace_all: bool) -> ToolResult:
        if old == "":
            raise FileToolError("old_string is empty; to create a file use write")
        if old == new:
            raise FileToolError("old_string and new_string are the same; nothing to change")
        real, display = self.resolve(file_path)
        reads = self.env.scopes.current().reads
        async with self.locked([real]):
            self.recheck(file_path, real)
            return await anyio.to_thread.run_sync(
                self._edit, real, display, old, new, replace_all, reads)

    def _edit(self, real: Path, display: str, old: str, new: str, replace_all: bool,
              reads: dict[Path, ReadRecord]) -> ToolResult:
        st = self.check_fresh(reads, real, display)
        if st is None:
            raise FileToolError(_suggest(real, display) + " (use write to create a file)")
        if st.st_size > MAX_EDIT_BYTES:
            raise FileToolError(f"{display} is {st.st_size} bytes, over the "
                                f"{MAX_EDIT_BYTES} byte limit of edit")
        with open(real, "rb") as handle:
            before = TextFile.decode(handle.read())
        text = before.text
        old_n, new_n = _normalize(old), _normalize(new)
        count = text.count(old_n)
        if count == 0:
            message = f"old_string not found in {display}"
            hint = closest_lines(text.split("\n"), old_n.split("\n"))
            if hint:
                message += "; " + hint
            raise FileToolError(message)
        if count > 1 and not replace_all:
            starts: list[int] = []
            at = text.find(old_n)
            while at >= 0 and len(starts) < 20:
                starts.append(_line_of(text, at))
                at = text.find(old_n, at + 1)
            shown = ", ".join(str(n) for n in starts) + (", …" if count > len(starts) else "")
            raise FileToolError(f"old_string has {count} matches in {display} at lines "
                                f"{shown}; add context to make it unique or set replace_all")
        first_line = _line_of(text, text.find(old_n))
        after = text.replace(old_n, new_n) if replace_all else text.replace(old_n, new_n, 1)
        data = before.encode(after)
        reads[real] = atomic_write(real, data, stat.S_IMODE(st.st_mode), (st.st_uid, st.st_gid))
        diff = short_diff(display, text, after)
        done = count if replace_all else 1
        return _text(f"Edited {display}: {done} replacement{'s' if done != 1 else ''}\n{diff}",
                     {"path": display, "replacements": done, "first_line": first_line,
                      "diff": diff})

    # patch

    async def patch(self, diff: str, file_path: str | None) -> ToolResult:
        patches = parse_patch(diff, file_path)
        reads = self.env.scopes.current().reads
        resolved: list[tuple[FilePatch, Path, str, Path | None]] = []
        seen: set[Path] = set()
        for item in patches:
            real, display = self.resolve(item.path)
            dest = self.resolve(item.move_to)[0] if item.move_to else None
            for path in (real, dest):
                if path is None:
                    continue
                if path in seen:
                    raise FileToolError(f"{self.env.workspace.display(path)} appears more "
                                        "than once in the patch")
                seen.add(path)
            resolved.append((item, real, display, dest))
        async with self.locked(list(seen)):
            for item, real, _, dest in resolved:
                self.recheck(item.path, real)
                if item.move_to and dest is not None:
                    self.recheck(item.move_to, dest)
            return await anyio.to_thread.run_sync(self._patch, resolved, reads)
        raise AssertionError("unreachable")  # pragma: no cover

    def _plan(self, item: FilePatch, real: Path, display: str, dest: Path | None,
              reads: dict[Path, ReadRecord]) -> tuple[_Plan | None, list[str]]:
        if item.action == "add":
            if os.path.lexists(real):
                return None, [f"{display}: already exists (use an update, not an add)"]
            text = "\n".join(item.hunks[0].new if item.hunks else [])
            if item.hunks and item.hunks[0].new and not item.hunks[0].new_no_eol:
                text += "\n"
            return _Plan(real, display, "add", text.encode("utf-8", "surrogateescape"),
                         self.new_file_mode, added=text.count("\n")), []
        try:
            st = self.check_fresh(reads, real, display)
        except FileToolError as exc:
            if item.action == "delete" and "has not been read" in str(exc):
                st = os.lstat(real)
            else:
                return None, [str(exc)]
        if st is None:
            return None, [_suggest(real, display)]
        if item.action == "delete":
            return _Plan(real, display, "delete"), []
        if st.st_size > MAX_EDIT_BYTES:
            return None, [f"{display}: over the {MAX_EDIT_BYTES} byte limit"]
        with open(real, "rb") as handle:
            original = handle.read()
        before = TextFile.decode(original)
        after, added, removed, problems = apply_hunks(display, before.text, item.hunks)
        if problems:
            return None, problems
        if dest is not None and os.path.lexists(dest):
            return None, [f"{self.env.workspace.display(dest)}: the move target already exists"]
        return _Plan(real, display, "move" if dest is not None else "update",
                     before.encode(after), stat.S_IMODE(st.st_mode), (st.st_uid, st.st_gid),
                     original, dest, added, removed), []

    def _patch(self, resolved: list[tuple[FilePatch, Path, str, Path | None]],
               reads: dict[Path, ReadRecord]) -> ToolResult:
        plans: list[_Plan] = []
        problems: list[str] = []
        for item, real, display, dest in resolved:
            plan, found = self._plan(item, real, display, dest, reads)
            problems.extend(found)
            if plan is not None:
                plans.append(plan)
        if problems:
            head = "patch not applied (no file changed): "
            return _error(head + ("\n".join(problems) if len(problems) > 1 else problems[0]))
        done: list[_Plan] = []
        for plan in plans:
            try:
                self._apply(plan, reads)
            except OSError as exc:
                for finished in reversed(done):
                    with contextlib.suppress(OSError):
                        self._undo(finished, reads)
                raise FileToolError(f"patch not applied: writing {plan.display} failed "
                                    f"({exc.strerror or exc}); earlier files restored") from None
            done.append(plan)
        letters = {"update": "M", "add": "A", "delete": "D", "move": "R"}
        summary: list[dict[str, Any]] = []
        lines: list[str] = []
        for plan in done:
            shown = self.env.workspace.display(plan.dest or plan.real)
            summary.append({"path": shown, "action": plan.action, "added": plan.added,
                            "removed": plan.removed})
            counts = f" (+{plan.added} -{plan.removed})" if plan.action != "delete" else ""
            lines.append(f"{letters[plan.action]} {shown}{counts}")
        return _text("Patch applied:\n" + "\n".join(lines), {"files": summary})

    def _apply(self, plan: _Plan, reads: dict[Path, ReadRecord]) -> None:
        if plan.action == "delete":
            with open(plan.real, "rb") as handle:
                plan.original = handle.read()
            plan.mode = stat.S_IMODE(os.lstat(plan.real).st_mode)
            os.unlink(plan.real)
            reads.pop(plan.real, None)
            return
        assert plan.data is not None
        target = plan.dest or plan.real
        target.parent.mkdir(parents=True, exist_ok=True)
        reads[target] = atomic_write(target, plan.data, plan.mode, plan.owner)
        if plan.dest is not None:
            os.unlink(plan.real)
            reads.pop(plan.real, None)

    def _undo(self, plan: _Plan, reads: dict[Path, ReadRecord]) -> None:
        if plan.action == "add":
            os.unlink(plan.real)
            reads.pop(plan.real, None)
        elif plan.original is not None:
            reads[plan.real] = atomic_write(plan.real, plan.original, plan.mode, plan.owner)
            if plan.dest is not None:
                os.unlink(plan.dest)
                reads.pop(plan.dest, None)


async def _guard(work: Awaitable[Any]) -> Any:
    try:
        return await work
    except (FileToolError, WorkspaceError) as exc:
        return _error(str(exc))
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        return _error(f"{exc.strerror or exc}{where}")


# --- registration -----------------------------------------------------------------------------

FilePath = Annotated[str, msgspec.Meta(description=(
    "The file's path: relative to the workspace root, or absolute inside it"))]
Offset = Annotated[int, msgspec.Meta(ge=1, description="The first line to show (1-based)")]
Limit = Annotated[int, msgspec.Meta(ge=1, description="How many lines to show at most")]

VIEW_DESCRIPTION = (
    "Read a file from the workspace: numbered lines (like `cat -n`), from `offset` (1-based) "
    f"for `limit` lines (default {DEFAULT_LIMIT}). Lines over {MAX_LINE_CHARS} characters "
    f"are cut; output over {MAX_VIEW_BYTES // 1024} KiB stops with 'use offset=N to "
    "continue'. Images (PNG, JPEG, GIF, WebP) come back as image content; other binary files "
    "are refused; a directory gives its listing. Reading a file is required before `edit`, "
    "`write` or `patch` change it."
)


def register(server: Server, env: CodingEnv) -> None:
    tools = FileTools(env)

    async def view(file_path: FilePath, offset: Offset = 1, limit: Limit = DEFAULT_LIMIT
                   ) -> Any:
        return await _guard(tools.view(file_path, offset, limit))

    async def write(
        file_path: FilePath,
        content: Annotated[str, "The whole new content of the file"],
    ) -> Any:
        return await _guard(tools.write(file_path, content))

    async def edit(
        file_path: FilePath,
        old_string: Annotated[str, "The exact text to replace (with enough context to be "
                                   "unique)"],
        new_string: Annotated[str, "The text to put in its place"],
        replace_all: Annotated[bool, "Replace every occurrence (else it must be unique)"] = False,
    ) -> Any:
        return await _guard(tools.edit(file_path, old_string, new_string, replace_all))

    async def patch(
        diff: Annotated[str, "A unified diff (one or more files, '--- a/x' / '+++ b/x' "
                             "headers, or bare hunks for file_path) or a '*** Begin Patch' "
                             "... '*** End Patch' patch"],
        file_path: Annotated[str | None, "The file bare hunks apply to"] = None,
    ) -> Any:
        return await _guard(tools.patch(diff, file_path))

    server.add_tool(view, name="view", title="View file", description=VIEW_DESCRIPTION,
                    annotations=READ_ONLY)
    server.add_tool(view, name="read", title="Read file (alias of view)",
                    description=VIEW_DESCRIPTION, annotations=READ_ONLY)
    server.add_tool(
        write, name="write", title="Write file", annotations=WRITES, output_schema=WRITE_OUTPUT,
        description=(
            "Create a file or replace its whole content. Parent directories are created. An "
            "existing file must have been read (`view`) in this task and be unchanged since. "
            "The write is atomic; the file's mode and line endings (CRLF) are kept."))
    server.add_tool(
        edit, name="edit", title="Edit file", annotations=EDITS, output_schema=EDIT_OUTPUT,
        description=(
            "Replace exact text in a file: `old_string` must match exactly once (or set "
            "`replace_all`). The file must have been read (`view`) in this task and be "
            "unchanged since. Returns a short diff."))
    server.add_tool(
        patch, name="patch", title="Apply patch", annotations=EDITS, output_schema=PATCH_OUTPUT,
        description=(
            "Apply a unified diff (one or many files; `--- /dev/null` adds, `+++ /dev/null` "
            "deletes) or a '*** Begin Patch' / '*** Update File:' / '*** Add File:' / "
            "'*** Delete File:' / '*** End Patch' patch. Every hunk is checked before "
            "anything is written: all files change or none. Updated files must have been "
            "read (`view`) in this task."))
