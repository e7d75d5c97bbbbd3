"""The file tools (`view`/`read`, `write`, `edit`, `patch`) on real files, through a client in
memory and over real stdio: success and error paths, confinement attacks, read-before-write,
atomic writes (mode, CRLF, symlinks swapped in), concurrent edits, big and binary files."""

from __future__ import annotations

import base64
import os
import stat
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpkit.client import Client
from mcpkit.coding import files, reading
from mcpkit.coding.env import CodingEnv
from mcpkit.coding.files import FileTools, atomic_write
from mcpkit.coding.patches import parse_patch
from mcpkit.coding.reading import MAX_VIEW_BYTES
from mcpkit.coding.scope import Scopes, current_task
from mcpkit.coding.server import build_server
from mcpkit.coding.workspace import Workspace
from mcpkit.protocol import types

pytestmark = pytest.mark.anyio

PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00"
       b"\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8"
       b"N\x00\x00\x00\x00IEND\xaeB`\x82")


class Tools:
    """A client on the coding server, with helpers that return (is_error, text)."""

    def __init__(self, client: Client, root: Path) -> None:
        self.client = client
        self.root = root

    async def raw(self, name: str, **arguments: Any) -> Any:
        return await self.client.call_tool(name, arguments)

    async def call(self, name: str, **arguments: Any) -> tuple[bool, str]:
        result = await self.raw(name, **arguments)
        text = "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))
        return result.is_error is True, text

    async def ok(self, name: str, **arguments: Any) -> str:
        is_error, text = await self.call(name, **arguments)
        assert not is_error, text
        return text

    async def fails(self, name: str, **arguments: Any) -> str:
        is_error, text = await self.call(name, **arguments)
        assert is_error, text
        return text


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "outside.txt").write_text("secret\n")
    return ws


@pytest.fixture
async def tools(root: Path, tmp_path: Path) -> AsyncIterator[Tools]:
    env = CodingEnv(Workspace.at(root), Scopes(tmp_path / "scopes"))
    async with Client(build_server(env)) as client:
        yield Tools(client, root)


# --- the catalog -------------------------------------------------------------------------------


async def test_tools_are_listed_with_annotations_and_schemas(tools: Tools) -> None:
    listed = {t.name: t for t in await tools.client.list_tools()}
    assert {"view", "read", "write", "edit", "patch"} <= set(listed)
    assert listed["view"].annotations.read_only_hint is True
    assert listed["read"].input_schema == listed["view"].input_schema
    assert listed["view"].input_schema["required"] == ["file_path"]
    assert listed["edit"].annotations.destructive_hint is True
    assert listed["edit"].annotations.idempotent_hint is False
    assert listed["write"].annotations.open_world_hint is False
    for name in ("write", "edit", "patch"):
        assert listed[name].output_schema["type"] == "object"
        assert listed[name].title


# --- view ----------------------------------------------------------------------------------------


@pytest.fixture(params=["inline", "thread"])
def view_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Small files are viewed on the event loop and rendered in memory; with no size allowed
    for that, every file takes the worker thread and is streamed: both must behave alike."""
    mode: str = request.param
    if mode == "thread":
        # read by `open_small_file` (reading) and by `FileTools._view_file` (files)
        monkeypatch.setattr(reading, "INLINE_VIEW_BYTES", 0)
        monkeypatch.setattr(files, "INLINE_VIEW_BYTES", 0)
    return mode


async def test_view_numbers_lines_and_pages(tools: Tools, view_path: str) -> None:
    (tools.root / "a.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    text = await tools.ok("view", file_path="a.txt")
    assert text.splitlines()[0] == "     1\tline 1"
    assert "    10\tline 10" in text and "offset=" not in text
    text = await tools.ok("read", file_path="a.txt", offset=3, limit=2)
    assert text.splitlines()[:2] == ["     3\tline 3", "     4\tline 4"]
    assert "use offset=5 to continue" in text
    text = await tools.ok("view", file_path=str(tools.root / "a.txt"), offset=10)
    assert text == "    10\tline 10"
    assert "past the end" in await tools.fails("view", file_path="a.txt", offset=50)
    assert "(it has 10 lines)" in await tools.fails("view", file_path="a.txt", offset=12)
    (tools.root / "open.txt").write_text("x\ny")  # no newline at the end
    assert "(it has 2 lines)" in await tools.fails("view", file_path="open.txt", offset=4)
    assert await tools.ok("view", file_path="open.txt", offset=2) == "     2\ty"


async def test_view_cuts_long_lines_and_caps_bytes(tools: Tools, view_path: str) -> None:
    (tools.root / "long.txt").write_text("x" * 5000 + "\nshort\n")
    text = await tools.ok("view", file_path="long.txt")
    first = text.splitlines()[0]
    assert first.startswith("     1\t" + "x" * 2000) and "line cut: 5001 bytes" in first
    assert "     2\tshort" in text
    _write_lines(tools.root / "one.min.js", "z" * 3000, 1000)  # 3 MB, a single line
    text = await tools.ok("view", file_path="one.min.js")
    assert text.endswith("line cut: 3000000 bytes]") and len(text) < 2100
    (tools.root / "big.txt").write_text(("y" * 1000 + "\n") * 1000)
    text = await tools.ok("view", file_path="big.txt")
    assert len(text.encode()) <= MAX_VIEW_BYTES + 200
    assert "use offset=" in text.splitlines()[-1]
    next_offset = int(text.rsplit("offset=", 1)[1].split()[0])
    text = await tools.ok("view", file_path="big.txt", offset=next_offset)
    assert text.startswith(f"{next_offset:>6}\t")


async def test_view_empty_directory_missing(tools: Tools, view_path: str) -> None:
    (tools.root / "empty.txt").write_text("")
    assert "empty" in await tools.ok("view", file_path="empty.txt")
    (tools.root / "pkg" / "sub").mkdir(parents=True)
    (tools.root / "pkg" / "mod.py").write_text("")
    listing = await tools.ok("view", file_path="pkg")
    assert "directory" in listing and "sub/" in listing and "mod.py" in listing
    (tools.root / "pkg" / "config.yaml").write_text("a: 1\n")
    message = await tools.fails("view", file_path="pkg/confg.yaml")
    assert "not found" in message and "pkg/config.yaml" in message
    assert "not found" in await tools.fails("view", file_path="nope/x.txt")


async def test_view_refuses_binary_and_returns_images(tools: Tools, view_path: str) -> None:
    (tools.root / "blob.bin").write_bytes(b"\x7fELF\x02\x01\x00\x00" + bytes(range(256)))
    assert "binary" in await tools.fails("view", file_path="blob.bin")
    (tools.root / "latin.txt").write_bytes(b"caf\xe9 \xff\xfe\n")
    assert "binary" in await tools.fails("view", file_path="latin.txt")
    (tools.root / "pixel.dat").write_bytes(PNG)  # by magic bytes, not by name
    result = await tools.raw("view", file_path="pixel.dat")
    assert not result.is_error
    image = result.content[0]
    assert isinstance(image, types.ImageContent) and image.mime_type == "image/png"
    assert base64.b64decode(image.data) == PNG
    (tools.root / "huge.png").write_bytes(PNG + bytes(5 * 1024 * 1024))
    assert "limit" in await tools.fails("view", file_path="huge.png")
    # the image was read, so it may be overwritten; its bytes say nothing of line endings
    result = await tools.raw("write", file_path="pixel.dat", content="text\n")
    assert result.structured_content["line_ending"] == "lf"
    assert (tools.root / "pixel.dat").read_bytes() == b"text\n"


async def test_view_refuses_a_fifo(tools: Tools) -> None:
    os.mkfifo(tools.root / "pipe")
    assert "not a regular file" in await tools.fails("view", file_path="pipe")


async def test_only_small_regular_files_skip_the_worker_thread(
        tools: Tools, monkeypatch: pytest.MonkeyPatch) -> None:
    threaded: list[str] = []
    in_thread = FileTools._view

    def spy(self: FileTools, real: Path, display: str, *rest: Any) -> Any:
        threaded.append(display)
        return in_thread(self, real, display, *rest)

    monkeypatch.setattr(FileTools, "_view", spy)
    (tools.root / "small.py").write_text("x = 1\n" * 100)
    (tools.root / "big.py").write_text("y = 2\n" * (reading.INLINE_VIEW_BYTES // 6 + 1))
    (tools.root / "dir").mkdir()
    os.mkfifo(tools.root / "pipe")
    assert (await tools.ok("view", file_path="small.py")).endswith("   100\tx = 1")
    assert threaded == []
    text = await tools.ok("view", file_path="big.py", offset=3, limit=2)
    assert text.startswith("     3\ty = 2\n     4\ty = 2\n") and "offset=5" in text
    await tools.ok("view", file_path="dir")
    await tools.fails("view", file_path="pipe")
    await tools.fails("view", file_path="missing.py")
    assert threaded == ["big.py", "dir", "pipe", "missing.py"]


def _write_lines(path: Path, line: str, count: int) -> None:
    with open(path, "w") as f:
        for _ in range(count // 1000):
            f.write(line * 1000)


async def test_view_50mb_file_near_the_end_is_quick(tools: Tools) -> None:
    line = "0123456789" * 5 + "\n"  # 51 bytes
    count = 1_000_000
    _write_lines(tools.root / "huge.log", line, count)
    assert (tools.root / "huge.log").stat().st_size > 50_000_000
    started = time.monotonic()
    text = await tools.ok("view", file_path="huge.log", offset=count - 4, limit=10)
    assert time.monotonic() - started < 3.0
    assert text.splitlines()[0] == f"{count - 4:>6}\t" + line.strip()
    assert len(text.splitlines()) == 5


# --- write ---------------------------------------------------------------------------------------


async def test_write_creates_with_parents_and_then_overwrites(tools: Tools) -> None:
    result = await tools.raw("write", file_path="new/deep/f.txt", content="hello\n")
    assert not result.is_error
    assert result.structured_content["created"] is True
    assert (tools.root / "new/deep/f.txt").read_text() == "hello\n"
    # our own write counts as a read: writing again needs no view
    await tools.ok("write", file_path="new/deep/f.txt", content="again\n")
    assert (tools.root / "new/deep/f.txt").read_text() == "again\n"
    mode = (tools.root / "new/deep/f.txt").stat().st_mode
    assert mode & 0o600 == 0o600  # the umask's mode, not mkstemp's 0600-only by accident
    assert not [p for p in (tools.root / "new/deep").iterdir() if p.name.endswith(".tmp")]


async def test_write_needs_a_fresh_read(tools: Tools) -> None:
    target = tools.root / "f.txt"
    target.write_text("one\n")
    assert "has not been read" in await tools.fails("write", file_path="f.txt", content="x")
    await tools.ok("view", file_path="f.txt")
    target.write_text("changed by someone else\n")
    assert "changed on disk" in await tools.fails("write", file_path="f.txt", content="x")
    assert target.read_text() == "changed by someone else\n"
    await tools.ok("view", file_path="f.txt")
    await tools.ok("write", file_path="f.txt", content="mine\n")
    assert target.read_text() == "mine\n"


async def test_write_keeps_mode_crlf_and_bom(tools: Tools) -> None:
    target = tools.root / "run.sh"
    target.write_bytes(b"\xef\xbb\xbf#!/bin/sh\r\necho hi\r\n")
    target.chmod(0o751)
    await tools.ok("view", file_path="run.sh")
    result = await tools.raw("write", file_path="run.sh", content="#!/bin/sh\necho bye\n")
    assert result.structured_content["line_ending"] == "crlf"
    assert target.read_bytes() == b"\xef\xbb\xbf#!/bin/sh\r\necho bye\r\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o751


async def test_write_errors(tools: Tools) -> None:
    (tools.root / "d").mkdir()
    assert "directory" in await tools.fails("write", file_path="d", content="x")
    (tools.root / "plain").write_text("x")
    await tools.ok("view", file_path="plain")
    assert "not a directory" in await tools.fails("write", file_path="plain/f", content="x")


# --- edit ----------------------------------------------------------------------------------------


async def test_edit_replaces_and_returns_a_diff(tools: Tools) -> None:
    target = tools.root / "m.py"
    target.write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    target.chmod(0o640)
    await tools.ok("view", file_path="m.py")
    result = await tools.raw("edit", file_path="m.py", old_string="return 2",
                             new_string="return 3")
    assert not result.is_error
    assert result.structured_content["first_line"] == 6
    assert "-    return 2" in result.structured_content["diff"]
    assert "+    return 3" in result.structured_content["diff"]
    assert "@@ -3," in result.structured_content["diff"]
    assert target.read_text().endswith("return 3\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    # a second edit right away: the record was renewed by the first
    await tools.ok("edit", file_path="m.py", old_string="return 1", new_string="return 0")


async def test_edit_errors(tools: Tools) -> None:
    target = tools.root / "m.py"
    target.write_text("a = 1\nb = 2\na = 1\ncounter = compute(value)\n")
    assert "has not been read" in await tools.fails(
        "edit", file_path="m.py", old_string="b = 2", new_string="b = 3")
    await tools.ok("view", file_path="m.py")
    message = await tools.fails("edit", file_path="m.py", old_string="a = 1", new_string="a = 5")
    assert "2 matches" in message and "lines 1, 3" in message and "replace_all" in message
    message = await tools.fails("edit", file_path="m.py", old_string="counter = compute(valu)",
                                new_string="x")
    assert "not found" in message and "closest match at line 4" in message
    assert "same" in await tools.fails("edit", file_path="m.py", old_string="b = 2",
                                       new_string="b = 2")
    assert "empty" in await tools.fails("edit", file_path="m.py", old_string="", new_string="x")
    message = await tools.fails("edit", file_path="mm.py", old_string="x", new_string="y")
    assert "not found" in message and "m.py" in message
    assert target.read_text() == "a = 1\nb = 2\na = 1\ncounter = compute(value)\n"
    await tools.ok("edit", file_path="m.py", old_string="a = 1", new_string="a = 5",
                   replace_all=True)
    assert target.read_text() == "a = 5\nb = 2\na = 5\ncounter = compute(value)\n"


async def test_edit_crlf_file(tools: Tools) -> None:
    target = tools.root / "w.txt"
    target.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    await tools.ok("view", file_path="w.txt")
    await tools.ok("edit", file_path="w.txt", old_string="one\ntwo", new_string="1\n2\n2b")
    assert target.read_bytes() == b"1\r\n2\r\n2b\r\nthree\r\n"


async def test_twenty_concurrent_edits_of_one_file_all_land(tools: Tools) -> None:
    target = tools.root / "c.txt"
    target.write_text("".join(f"value_{i} = 0\n" for i in range(20)))
    await tools.ok("view", file_path="c.txt")
    outcomes: list[bool] = []

    async def one(i: int) -> None:
        is_error, _ = await tools.call("edit", file_path="c.txt", old_string=f"value_{i} = 0",
                                       new_string=f"value_{i} = {i + 100}")
        outcomes.append(is_error)

    async with anyio.create_task_group() as group:
        for i in range(20):
            group.start_soon(one, i)
    assert outcomes == [False] * 20
    assert target.read_text() == "".join(f"value_{i} = {i + 100}\n" for i in range(20))


# --- confinement -------------------------------------------------------------------------------


async def test_confinement_attacks(tools: Tools, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    os.symlink("/etc", tools.root / "etc")
    os.symlink(outside, tools.root / "out.txt")
    for name in ("view", "write", "edit"):
        args: dict[str, Any] = {"content": "x"} if name == "write" else (
            {"old_string": "secret", "new_string": "x"} if name == "edit" else {})
        for path in ("etc/passwd", "out.txt", "../outside.txt", str(outside), "a\x00b"):
            message = await tools.fails(name, file_path=path, **args)
            assert "outside" in message or "NUL" in message or "'..'" in message, message
    diff = "--- a/out.txt\n+++ b/out.txt\n@@ -1 +1 @@\n-secret\n+owned\n"
    assert "outside" in await tools.fails("patch", diff=diff)
    diff = "--- /dev/null\n+++ b/etc/evil\n@@ -0,0 +1 @@\n+x\n"
    assert "outside" in await tools.fails("patch", diff=diff)
    assert outside.read_text() == "secret\n"


async def test_symlink_swapped_in_after_the_read(tools: Tools, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    target = tools.root / "f.txt"
    target.write_text("mine\n")
    await tools.ok("view", file_path="f.txt")
    target.unlink()
    os.symlink(outside, target)
    for name, args in (("write", {"content": "owned\n"}),
                       ("edit", {"old_string": "secret", "new_string": "owned"})):
        assert "outside" in await tools.fails(name, file_path="f.txt", **args)
    assert outside.read_text() == "secret\n"


def test_atomic_write_replaces_a_symlink_instead_of_following_it(tmp_path: Path) -> None:
    # the race after every check: the rename replaces the link, the outside file is untouched
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    (tmp_path / "ws").mkdir()
    link = tmp_path / "ws" / "f.txt"
    os.symlink(outside, link)
    atomic_write(link, b"new\n", 0o644)
    assert outside.read_text() == "secret\n"
    assert not link.is_symlink() and link.read_text() == "new\n"


# --- patch ---------------------------------------------------------------------------------------


SOURCE = "".join(f"line {i}\n" for i in range(1, 31))


async def test_patch_unified_multi_file(tools: Tools) -> None:
    (tools.root / "a.txt").write_text(SOURCE)
    (tools.root / "gone.txt").write_text("bye\n")
    (tools.root / "a.txt").chmod(0o604)
    await tools.ok("view", file_path="a.txt")
    await tools.ok("view", file_path="gone.txt")
    diff = (
        "diff --git a/a.txt b/a.txt\nindex 111..222 100644\n"
        "--- a/a.txt\n+++ b/a.txt\n"
        "@@ -2,3 +2,3 @@\n line 2\n-line 3\n+line three\n line 4\n"
        "@@ -25,3 +25,4 @@\n line 25\n line 26\n+line 26.5\n line 27\n"
        "--- /dev/null\n+++ b/new/b.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n"
        "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
    )
    result = await tools.raw("patch", diff=diff)
    assert not result.is_error, result.content[0].text
    files = {f["path"]: f for f in result.structured_content["files"]}
    assert files["a.txt"] == {"path": "a.txt", "action": "update", "added": 2, "removed": 1}
    assert files["new/b.txt"]["action"] == "add" and files["gone.txt"]["action"] == "delete"
    text = (tools.root / "a.txt").read_text()
    assert "line three\n" in text and "line 26\nline 26.5\nline 27\n" in text
    assert stat.S_IMODE((tools.root / "a.txt").stat().st_mode) == 0o604
    assert (tools.root / "new/b.txt").read_text() == "hello\nworld\n"
    assert not (tools.root / "gone.txt").exists()


async def test_patch_bare_hunks_drift_and_crlf(tools: Tools) -> None:
    target = tools.root / "w.txt"
    target.write_bytes(SOURCE.replace("\n", "\r\n").encode())
    await tools.ok("view", file_path="w.txt")
    hunk = "@@ -7,3 +7,3 @@\n line 10\n-line 11\n+line eleven\n line 12\n"  # 3 lines off
    assert "file_path" in await tools.fails("patch", diff=hunk)
    await tools.ok("patch", diff=hunk, file_path="w.txt")
    assert b"line 10\r\nline eleven\r\nline 12\r\n" in target.read_bytes()


async def test_patch_is_all_or_nothing(tools: Tools) -> None:
    (tools.root / "a.txt").write_text(SOURCE)
    (tools.root / "b.txt").write_text(SOURCE)
    await tools.ok("view", file_path="a.txt")
    await tools.ok("view", file_path="b.txt")
    diff = (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n-line 1\n+line one\n line 2\n"
        "--- a/b.txt\n+++ b/b.txt\n@@ -1,2 +1,2 @@\n-line 1\n+line one\n line 2\n"
        "@@ -20,2 +20,2 @@\n-line twenty\n+line 20!\n line 21\n"
        "--- /dev/null\n+++ b/c.txt\n@@ -0,0 +1 @@\n+new\n"
    )
    message = await tools.fails("patch", diff=diff)
    assert "no file changed" in message and "b.txt: hunk 2" in message
    assert "closest match at line 20" in message
    assert (tools.root / "a.txt").read_text() == SOURCE
    assert (tools.root / "b.txt").read_text() == SOURCE
    assert not (tools.root / "c.txt").exists()


async def test_patch_restores_earlier_files_when_a_write_fails(
    tools: Tools, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tools.root / "a.txt").write_text(SOURCE)
    (tools.root / "b.txt").write_text(SOURCE)
    await tools.ok("view", file_path="a.txt")
    await tools.ok("view", file_path="b.txt")
    calls: list[Path] = []

    def flaky(real: Path, data: bytes, mode: int, owner: Any = None) -> Any:
        calls.append(real)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return atomic_write(real, data, mode, owner)

    monkeypatch.setattr(files, "atomic_write", flaky)
    diff = ("--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-line 1\n+one\n"
            "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-line 1\n+one\n"
            "--- /dev/null\n+++ b/c.txt\n@@ -0,0 +1 @@\n+c\n")
    message = await tools.fails("patch", diff=diff)
    assert "No space left" in message and "restored" in message
    assert (tools.root / "a.txt").read_text() == SOURCE
    assert (tools.root / "b.txt").read_text() == SOURCE
    assert not (tools.root / "c.txt").exists()
    monkeypatch.undo()
    await tools.ok("patch", diff=diff)  # the restore renewed the read records


async def test_patch_needs_reads_and_refuses_existing_adds(tools: Tools) -> None:
    (tools.root / "a.txt").write_text(SOURCE)
    diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-line 1\n+x\n"
    assert "has not been read" in await tools.fails("patch", diff=diff)
    diff = "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+x\n"
    assert "already exists" in await tools.fails("patch", diff=diff)
    assert "not found" in await tools.fails(
        "patch", diff="--- a/zz.txt\n+++ b/zz.txt\n@@ -1 +1 @@\n-a\n+b\n")
    assert "no hunks" in await tools.fails("patch", diff="just some text")
    assert (tools.root / "a.txt").read_text() == SOURCE


async def test_patch_deletes_only_files_read_and_unchanged(tools: Tools) -> None:
    """Deleting is a change: the file must have been read in this task, and not have
    changed since, in both patch formats; nothing else in a refused patch is applied."""
    (tools.root / "keep.txt").write_text("precious\n")
    (tools.root / "other.txt").write_text("other\n")
    await tools.ok("view", file_path="other.txt")
    begin = ("*** Begin Patch\n*** Delete File: keep.txt\n"
             "*** Update File: other.txt\n@@\n-other\n+changed\n*** End Patch\n")
    unified = "--- a/keep.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-precious\n"
    for diff in (begin, unified):
        message = await tools.fails("patch", diff=diff)
        assert "keep.txt exists but has not been read in this task" in message
        assert (tools.root / "keep.txt").read_text() == "precious\n"
    assert (tools.root / "other.txt").read_text() == "other\n"  # all or nothing
    # the same message as an update of an unread file gives
    update = "--- a/keep.txt\n+++ b/keep.txt\n@@ -1 +1 @@\n-precious\n+x\n"
    assert message == await tools.fails("patch", diff=update)
    # read, then changed on disk: refused as stale
    await tools.ok("view", file_path="keep.txt")
    (tools.root / "keep.txt").write_text("precious, edited elsewhere\n")
    assert "changed on disk" in await tools.fails("patch", diff=unified)
    await tools.ok("view", file_path="keep.txt")
    await tools.ok("patch", diff="*** Begin Patch\n*** Delete File: keep.txt\n"
                                 "*** End Patch\n")
    assert not (tools.root / "keep.txt").exists()


async def test_patch_begin_patch_format(tools: Tools) -> None:
    (tools.root / "a.py").write_text("class A:\n    def f(self):\n        return 1\n\n"
                                     "    def g(self):\n        return 1\n")
    (tools.root / "old.txt").write_text("old\n")
    (tools.root / "del.txt").write_text("x\n")
    await tools.ok("view", file_path="a.py")
    await tools.ok("view", file_path="old.txt")
    await tools.ok("view", file_path="del.txt")
    diff = (
        "*** Begin Patch\n"
        "*** Update File: a.py\n"
        "@@     def g(self):\n"
        "-        return 1\n"
        "+        return 2\n"
        "*** Add File: pkg/new.py\n"
        "+print('hi')\n"
        "*** Delete File: del.txt\n"
        "*** Update File: old.txt\n"
        "*** Move to: moved.txt\n"
        "-old\n"
        "+new\n"
        "*** End Patch\n"
    )
    text = await tools.ok("patch", diff=diff)
    assert "M a.py" in text and "A pkg/new.py" in text and "D del.txt" in text
    assert (tools.root / "a.py").read_text().endswith("    def g(self):\n        return 2\n")
    assert "return 1\n\n" in (tools.root / "a.py").read_text()  # f() untouched
    assert (tools.root / "pkg/new.py").read_text() == "print('hi')\n"
    assert not (tools.root / "del.txt").exists()
    assert not (tools.root / "old.txt").exists()
    assert (tools.root / "moved.txt").read_text() == "new\n"
    assert "End Patch" in await tools.fails(
        "patch", diff="*** Begin Patch\n*** Add File: z.txt\n+z\n")


async def test_patch_begin_patch_insertion_after_anchor_and_end_of_file(tools: Tools) -> None:
    (tools.root / "a.py").write_text("import os\n\nx = 1\nx = 1\n")
    await tools.ok("view", file_path="a.py")
    diff = ("*** Begin Patch\n*** Update File: a.py\n@@ import os\n+import sys\n"
            "@@\n-x = 1\n+x = 2\n*** End of File\n*** End Patch")
    await tools.ok("patch", diff=diff)
    assert (tools.root / "a.py").read_text() == "import os\nimport sys\n\nx = 1\nx = 2\n"


def test_parse_patch_shapes() -> None:
    [only] = parse_patch("@@ -3,2 +3,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n", "f")
    assert only.path == "f" and only.hunks[0].start == 2
    assert only.hunks[0].old == ["a", "b"] and only.hunks[0].new == ["a", "c"]
    assert only.hunks[0].new_no_eol
    [moved] = parse_patch("--- a/x.py\n+++ b/y.py\n@@ -1 +1 @@\n-a\n+b\n\n", None)
    assert moved.move_to == "y.py" and moved.hunks[0].old == ["a"]


async def test_reads_are_per_task(root: Path, tmp_path: Path) -> None:
    (root / "f.txt").write_text("one\n")
    server = build_server(CodingEnv(Workspace.at(root), Scopes(tmp_path / "scopes")))
    token = current_task.set("task-a")
    try:
        async with Client(server) as client:
            await Tools(client, root).ok("view", file_path="f.txt")
        current_task.set("task-b")
        async with Client(server) as client:
            message = await Tools(client, root).fails("write", file_path="f.txt", content="x")
            assert "has not been read" in message
    finally:
        current_task.reset(token)
    assert (root / "f.txt").read_text() == "one\n"


async def test_write_locks_are_forgotten_when_idle(root: Path, tmp_path: Path) -> None:
    tools = FileTools(CodingEnv(Workspace.at(root), Scopes(tmp_path / "scopes")))
    for i in range(5):
        await tools.write(f"f{i}.txt", "x\n")
    assert tools.locks == {}


# --- over real stdio -----------------------------------------------------------------------------


async def test_file_tools_over_stdio(root: Path, tmp_path: Path) -> None:
    (root / "a.txt").write_bytes(b"alpha\r\nbeta\r\n")
    (root / "a.txt").chmod(0o700)
    (root / "pic.png").write_bytes(PNG)
    (root / "c.txt").write_text("unread\n")
    os.symlink(tmp_path / "outside.txt", root / "out.txt")
    command = [sys.executable, "-m", "mcpkit", "serve", "--transport", "stdio",
               "--workspace", str(root)]
    async with Client(command) as client:
        tools = Tools(client, root)
        assert "     2\tbeta" in await tools.ok("view", file_path="a.txt")
        assert "use offset=2" in await tools.ok("read", file_path="a.txt", limit=1)
        await tools.ok("edit", file_path="a.txt", old_string="beta", new_string="gamma")
        await tools.ok("patch", file_path="a.txt",
                       diff="@@ -1,2 +1,2 @@\n-alpha\n+ALPHA\n gamma\n")
        await tools.ok("write", file_path="sub/b.txt", content="new\n")
        image = (await tools.raw("view", file_path="pic.png")).content[0]
        assert isinstance(image, types.ImageContent) and base64.b64decode(image.data) == PNG
        assert "outside" in await tools.fails("write", file_path="out.txt", content="x")
        assert "has not been read" in await tools.fails("write", file_path="c.txt",
                                                        content="x")
        assert "binary" not in await tools.fails("view", file_path="missing.txt")
    assert (root / "a.txt").read_bytes() == b"ALPHA\r\ngamma\r\n"
    assert stat.S_IMODE((root / "a.txt").stat().st_mode) == 0o700
    assert (root / "sub/b.txt").read_text() == "new\n"
    assert (tmp_path / "outside.txt").read_text() == "secret\n"
