"""The client's `roots` narrowing or widening the workspace (`mcpkit serve --client-roots`),
over real stdio and HTTP with real files, in both eras."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.procs import free_port, stop_process, wait_for_port

from mcpkit import Client
from mcpkit.client import Responders
from mcpkit.coding.roots import narrowed, path_of_uri, paths_of, widened
from mcpkit.coding.workspace import Workspace, WorkspaceError

pytestmark = pytest.mark.anyio


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """tmp/ws/{sub/a.txt, other/b.txt} and tmp/outside/c.txt."""
    for rel, text in (("ws/sub/a.txt", "alpha"), ("ws/other/b.txt", "beta"),
                      ("outside/c.txt", "gamma")):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text + "\n")
    return tmp_path


def serve_stdio(root: Path, policy: str) -> list[str]:
    return [sys.executable, "-m", "mcpkit", "serve", "--transport", "stdio",
            "--workspace", str(root), "--client-roots", policy]


async def view(client: Client, path: str) -> tuple[bool, str]:
    result = await client.call_tool("view", {"file_path": path})
    text = "".join(getattr(block, "text", "") for block in result.content)
    return result.is_error is True, text.strip()


# --- the rules -----------------------------------------------------------------------------------


def test_only_local_file_uris_are_roots(tree: Path) -> None:
    assert path_of_uri("file:///tmp/x%20y") == "/tmp/x y"
    assert path_of_uri("file://localhost/tmp") == "/tmp"
    assert path_of_uri("file://elsewhere/tmp") is None
    assert path_of_uri("https://example.com/") is None
    assert path_of_uri("file:///tmp/%00") is None
    roots: list[Any] = [{"uri": (tree / "ws").as_uri()}, {"uri": "file:///no/such/dir"},
                        {"uri": 5}, "junk", {"uri": (tree / "ws").as_uri()}]
    assert paths_of(roots) == [(tree / "ws").resolve()]


def test_narrowing_keeps_what_overlaps(tree: Path) -> None:
    base = Workspace.at(tree / "ws")
    sub = (tree / "ws" / "sub").resolve()
    inside = narrowed(base, [sub, (tree / "outside").resolve()])
    assert inside.roots == (sub,)
    assert narrowed(base, [tree.resolve()]).roots == (base.root,)  # a root holding it all
    with pytest.raises(WorkspaceError, match="do not overlap"):
        narrowed(base, [(tree / "outside").resolve()])


def test_widening_adds_outside_roots_only(tree: Path) -> None:
    base = Workspace.at(tree / "ws")
    wide = widened(base, [(tree / "outside").resolve(), (tree / "ws" / "sub").resolve()])
    assert wide.root == base.root
    assert wide.extra_roots == ((tree / "outside").resolve(),)


# --- over stdio, legacy and modern ------------------------------------------------------------


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_narrow_confines_tools_to_the_clients_root(tree: Path, era: str) -> None:
    offered = [(tree / "ws" / "sub").as_uri()]
    asked = 0

    async def roots() -> list[str]:
        nonlocal asked
        asked += 1
        return offered

    with anyio.fail_after(30):
        async with Client(
            serve_stdio(tree / "ws", "narrow"),
            era=era,
            responders=Responders(roots=roots),
        ) as c:
            assert await view(c, "a.txt") == (False, "1\talpha")  # relative to the root
            failed, text = await view(c, str(tree / "ws" / "other" / "b.txt"))
            assert failed and "outside the workspace" in text
            ran = await c.call_tool("bash", {"command": "pwd"})
            assert str((tree / "ws" / "sub").resolve()) in ran.content[0].text  # cwd: the root
            if era == "legacy":
                assert asked == 1  # asked once per session, then cached
                offered[:] = [(tree / "ws").as_uri()]
                await c.notify_roots_changed()
                for _ in range(100):  # the notification and the call race
                    failed, text = await view(c, "other/b.txt")
                    if not failed:
                        break
                    await anyio.sleep(0.05)
                assert (failed, text) == (False, "1\tbeta")
                assert asked == 2
            else:
                assert asked >= 3  # modern: every call asks (input_required round)


async def test_narrow_without_overlap_refuses_every_call(tree: Path) -> None:
    with anyio.fail_after(30):
        async with Client(
            serve_stdio(tree / "ws", "narrow"),
            era="legacy",
            responders=Responders(roots=[(tree / "outside").as_uri()]),
        ) as c:
            failed, text = await view(c, "sub/a.txt")
            assert failed and "do not overlap the workspace" in text


async def test_a_client_without_roots_keeps_the_workspace(tree: Path) -> None:
    with anyio.fail_after(30):
        async with Client(serve_stdio(tree / "ws", "narrow")) as c:
            assert await view(c, "other/b.txt") == (False, "1\tbeta")
        async with Client(
            serve_stdio(tree / "ws", "narrow"),
            era="legacy",
            responders=Responders(roots=[]),
        ) as c:
            assert await view(c, "other/b.txt") == (False, "1\tbeta")


async def test_ignore_never_asks(tree: Path) -> None:
    asked = 0

    async def roots() -> list[str]:
        nonlocal asked
        asked += 1
        return [(tree / "outside").as_uri()]

    with anyio.fail_after(30):
        async with Client(
            serve_stdio(tree / "ws", "ignore"),
            era="legacy",
            responders=Responders(roots=roots),
        ) as c:
            assert await view(c, "other/b.txt") == (False, "1\tbeta")
            failed, _ = await view(c, str(tree / "outside" / "c.txt"))
            assert failed
    assert asked == 0


# --- over HTTP: widen ----------------------------------------------------------------------------


@pytest.fixture
def widening_server(tree: Path) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpkit", "serve", "--workspace", str(tree / "ws"),
         "--port", str(port), "--client-roots", "widen"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(proc, port)
        yield f"http://127.0.0.1:{port}/mcp?task_id=roots"
    finally:
        stop_process(proc)


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_widen_over_http_adds_the_clients_roots(
    tree: Path, widening_server: str, era: str,
) -> None:
    outside = str(tree / "outside" / "c.txt")
    with anyio.fail_after(30):
        async with Client(
            widening_server,
            era=era,
            responders=Responders(roots=[(tree / "outside").as_uri()]),
        ) as c:
            assert await view(c, outside) == (False, "1\tgamma")
            assert await view(c, "sub/a.txt") == (False, "1\talpha")  # the workspace stays
            written = await c.call_tool("write", {"file_path": str(tree / "outside" / "n.txt"),
                                                  "content": "new\n"})
            assert written.is_error is not True
        assert (tree / "outside" / "n.txt").read_text() == "new\n"
        async with Client(widening_server, era=era) as c:  # no roots: the workspace only
            failed, text = await view(c, outside)
            assert failed and "outside the workspace" in text
