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
import os
import stat
import tempfile
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import anyio
import anyio.to_thread
import msgspec

from mcpkit.coding.env import CodingEnv
from mcpkit.coding.patches import (
    HUNK_HEADER,
    FilePatch,
    FileToolError,
    apply_hunks,
    closest_lines,
    normalize,
    parse_patch,
    split_lines,
)
from mcpkit.coding.reading import (
    INLINE_VIEW_BYTES,
    MAX_LINE_CHARS,
    MAX_VIEW_BYTES,
    listing,
    looks_binary,
    open_small_file,
    past_end,
    render_data,
    render_lines,
    sniff_image,
    suggest,
)
from mcpkit.coding.scope import ReadRecord
from mcpkit.coding.workspace import WorkspaceError
from mcpkit.server import content
from mcpkit.server.server import Server
from mcpkit.server.tools import ToolResult

DEFAULT_LIMIT = 2000
MAX_IMAGE_BYTES = 4 * 1024 * 1024
MAX_EDIT_BYTES = 64 * 1024 * 1024
SNIFF_BYTES = 8192
MAX_DIFF_LINES = 80
MAX_DIFF_CHARS = 8000

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


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def short_diff(display: str, before: str, after: str) -> str:
    """A unified diff of two texts, computed on their differing middle, capped."""
    a, _ = split_lines(before)
    b, _ = split_lines(after)
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
        match = HUNK_HEADER.match(line)
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
        small = open_small_file(real)
        if small is not None:  # on the event loop: see INLINE_VIEW_BYTES
            with small:
                return self._view_file(small, real, display, offset, limit, reads)
        return await anyio.to_thread.run_sync(self._view, real, display, offset, limit, reads)

    def _view(self, real: Path, display: str, offset: int, limit: int,
              reads: dict[Path, ReadRecord]) -> ToolResult:
        """A view in a worker thread: a directory, a big file, or what is not a file."""
        if real.is_dir():
            return _text(listing(real, display))
        if not real.exists():
            raise FileToolError(suggest(real, display))
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
        mime = sniff_image(head)
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
        if looks_binary(head):
            raise FileToolError(f"{display} is a binary file ({st.st_size} bytes); "
                                "not shown")
        reads[real] = _record(st)
        if st.st_size == 0:
            return _text(f"{display} is empty")
        if st.st_size <= INLINE_VIEW_BYTES:
            text, next_offset, skipped = render_data(head + handle.read(), offset, limit)
        else:
            handle.seek(0)
            text, next_offset, skipped = render_lines(handle, offset, limit)
        if not text:
            raise past_end(handle, display, offset, skipped)
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
            binary = looks_binary(head[:SNIFF_BYTES]) or sniff_image(head) is not None
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
            raise FileToolError(suggest(real, display) + " (use write to create a file)")
        if st.st_size > MAX_EDIT_BYTES:
            raise FileToolError(f"{display} is {st.st_size} bytes, over the "
                                f"{MAX_EDIT_BYTES} byte limit of edit")
        with open(real, "rb") as handle:
            before = TextFile.decode(handle.read())
        text = before.text
        old_n, new_n = normalize(old), normalize(new)
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
        try:  # deleting is a change like any other: the file must have been read
            st = self.check_fresh(reads, real, display)
        except FileToolError as exc:
            return None, [str(exc)]
        if st is None:
            return None, [suggest(real, display)]
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
