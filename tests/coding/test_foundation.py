"""The coding server's foundation: workspace confinement, task scopes, the HTTP middleware
(bearer token, ?task_id=) and `mcpkit serve` as a real process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from tests.procs import free_port, wait_for_port

from mcpkit.client import Client, HttpStatusError
from mcpkit.coding.http import CodingHttpApp
from mcpkit.coding.scope import (
    DEFAULT_TASK,
    Scopes,
    TaskLimitError,
    current_task,
    valid_task_id,
)
from mcpkit.coding.workspace import Workspace, WorkspaceError

pytestmark = pytest.mark.anyio


# --- workspace confinement ------------------------------------------------------------------


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("x = 1\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    return Workspace.at(root)


def test_relative_and_absolute_paths_inside(ws: Workspace) -> None:
    assert ws.resolve("src/a.py") == ws.root / "src" / "a.py"
    assert ws.resolve(str(ws.root / "src" / "a.py")) == ws.root / "src" / "a.py"
    assert ws.resolve(None) == ws.root and ws.resolve("") == ws.root
    assert ws.resolve("new/file.txt") == ws.root / "new" / "file.txt"  # need not exist
    assert ws.display(ws.root / "src" / "a.py") == "src/a.py"


@pytest.mark.parametrize("bad", ["../outside.txt", "src/../../outside.txt", "src/.."])
def test_dotdot_refused(ws: Workspace, bad: str) -> None:
    with pytest.raises(WorkspaceError, match=r"'\.\.'"):
        ws.resolve(bad)


def test_absolute_path_elsewhere_refused(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        ws.resolve("/etc/passwd")


def test_nul_refused(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="NUL"):
        ws.resolve("src/a.py\x00.txt")


def test_symlink_out_refused(ws: Workspace, tmp_path: Path) -> None:
    (ws.root / "link").symlink_to(tmp_path / "outside.txt")
    (ws.root / "dirlink").symlink_to(tmp_path)
    with pytest.raises(WorkspaceError, match="symlink"):
        ws.resolve("link")
    with pytest.raises(WorkspaceError, match="outside"):
        ws.resolve("dirlink/outside.txt")


def test_symlink_inside_allowed(ws: Workspace) -> None:
    (ws.root / "alias.py").symlink_to(ws.root / "src" / "a.py")
    assert ws.resolve("alias.py") == ws.root / "src" / "a.py"


def test_extra_roots_widen(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    wide = Workspace.at(tmp_path / "a", [tmp_path / "b"])
    assert wide.resolve(str(tmp_path / "b" / "x")) == (tmp_path / "b" / "x").resolve()


def test_workspace_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match="not a directory"):
        Workspace.at(tmp_path / "missing")


# --- task scopes ------------------------------------------------------------------------------


def test_task_ids() -> None:
    assert valid_task_id("task-1.2_x")
    for bad in ("", "..", ".", "a/b", "a b", "x" * 129):
        assert not valid_task_id(bad)


class FakeJob:
    def __init__(self, running: bool) -> None:
        self.running = running
        self.killed = False

    def kill_now(self) -> None:
        self.killed = True


def test_scopes_are_separate_and_bounded(tmp_path: Path) -> None:
    scopes = Scopes(tmp_path / "out", max_tasks=3)
    one, two = scopes.get("one"), scopes.get("two")
    assert one is not two and one.output_dir != two.output_dir
    assert one.output_dir.is_dir()
    done = one.jobs["j"] = FakeJob(running=False)
    scopes.get("three")
    scopes.get("four")  # "one" is the least recently used and idle: dropped
    assert done.killed
    assert [s.task_id for s in scopes.all()] == ["two", "three", "four"]
    assert scopes.current().task_id == DEFAULT_TASK


def test_busy_tasks_are_never_dropped(tmp_path: Path) -> None:
    scopes = Scopes(tmp_path / "out", max_tasks=3)
    running = scopes.get("busy").jobs["j"] = FakeJob(running=True)
    scopes.get("foreground").commands = 1
    for i in range(300):  # other tasks come and go; they push each other out, not "busy"
        scopes.get(f"other-{i}")
    assert not running.killed
    assert [s.task_id for s in scopes.all()] == ["busy", "foreground", "other-299"]
    scopes.get("other-299").commands = 1
    with pytest.raises(TaskLimitError) as refused:
        scopes.get("new")
    assert refused.value.code == -32600
    assert "all 3 task scopes have commands or background jobs running" in refused.value.message
    assert "--max-tasks" in refused.value.message
    running.running = False  # its job ended: now it may go
    assert scopes.get("new").task_id == "new"
    assert "busy" not in [s.task_id for s in scopes.all()]
    with pytest.raises(ValueError):
        Scopes(tmp_path / "out", max_tasks=0)


# --- the HTTP middleware ------------------------------------------------------------------------


async def _call(app: CodingHttpApp, query: bytes = b"", auth: bytes | None = None
                ) -> tuple[int, str | None]:
    sent: list[dict[str, object]] = []
    headers = [(b"authorization", auth)] if auth is not None else []
    scope = {"type": "http", "path": "/mcp", "query_string": query, "headers": headers}

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = sent[0]
    return int(start["status"]), seen_task[-1] if seen_task else None  # type: ignore[call-overload]


seen_task: list[str] = []


async def _inner(scope: object, receive: object, send: object) -> None:
    seen_task.append(current_task.get())
    await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
    await send({"type": "http.response.body", "body": b"ok"})  # type: ignore[operator]


async def test_middleware_token_and_task() -> None:
    seen_task.clear()
    app = CodingHttpApp(_inner, token="s3cret")
    assert (await _call(app))[0] == 401
    assert (await _call(app, auth=b"Bearer wrong"))[0] == 401
    assert seen_task == []
    assert await _call(app, auth=b"Bearer s3cret") == (200, DEFAULT_TASK)
    assert await _call(app, b"task_id=t-7", auth=b"bearer s3cret") == (200, "t-7")
    assert (await _call(app, b"task_id=../x", auth=b"Bearer s3cret"))[0] == 400
    assert current_task.get() == DEFAULT_TASK  # reset after the request
    open_app = CodingHttpApp(_inner)
    assert (await _call(open_app, b"task_id=abc"))[0] == 200


# --- `mcpkit serve` as a process -----------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, str, subprocess.Popen[bytes]]]:
    """`mcpkit serve` over HTTP with a token (from the environment): (url, root, process)."""
    port = free_port()
    env = {**os.environ, "MCPKIT_SERVE_TOKEN": "tok-123"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpkit", "serve", "--workspace", str(tmp_path),
         "--port", str(port)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        wait_for_port(proc, port)
        yield f"http://127.0.0.1:{port}/mcp?task_id=t1", str(tmp_path.resolve()), proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


async def test_serve_http_with_token(
    served: tuple[str, str, subprocess.Popen[bytes]],
) -> None:
    url, root, proc = served
    with anyio.fail_after(20):
        async with Client(url, bearer_token="tok-123") as client:
            assert client.server_info is not None
            assert client.server_info.name == "mcpkit-coding"
            assert root in (client.instructions or "")
        with pytest.raises(HttpStatusError, match="401"):
            async with Client(url, bearer_token="nope"):
                pass
    proc.terminate()
    _, err = proc.communicate(timeout=10)
    assert b"tok-123" not in err  # the token is never logged


async def test_serve_stdio(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "mcpkit", "serve", "--transport", "stdio",
               "--workspace", str(tmp_path), "--task-id", "job-1"]
    with anyio.fail_after(20):
        async with Client(command) as client:
            assert client.server_info is not None
            assert client.server_info.name == "mcpkit-coding"


def test_serve_refuses_a_missing_workspace(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mcpkit", "serve", "--workspace", str(tmp_path / "nope")],
        capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert "not a directory" in out.stderr
