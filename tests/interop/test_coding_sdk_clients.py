"""The official SDK clients use every tool of `mcpkit serve` (the coding tools server).

- the Python SDK (`mcp`): its `ClientSession` over `stdio_client` and `streamable_http_client`,
  and its high-level `mcp.Client` (which negotiates the modern era) over both;
- the TypeScript SDK: tests/interop/js/coding_sdk_client.mjs run with `node` (skipped without
  node or tests/js/node_modules);
- task isolation over HTTP (`?task_id=`) and the bearer token (401 without it).

Every server is a real `mcpkit serve` process on 127.0.0.1 (its own process group, stopped by
PID), working in a temporary workspace; the checks are on the files it leaves on disk.
"""

from __future__ import annotations

import contextlib
import http.server
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client as SdkClient
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from mcpkit import Client

from .conftest import JS_NODE_MODULES, ROOT, free_port, stop_process, wait_for_port

pytestmark = [pytest.mark.interop, pytest.mark.anyio]

TOKEN = "interop-tok-7"
LIMIT_S = 15.0
SCRIPT = Path(__file__).parent / "js" / "coding_sdk_client.mjs"
TS_SDK = JS_NODE_MODULES / "@modelcontextprotocol" / "sdk" / "package.json"

CORE_TOOLS = {"view", "read", "write", "edit", "patch", "glob", "grep", "ls",
              "bash", "bash_output", "bash_kill"}
# The server registers each of these when its module exists; the scenario calls those it lists.
OPTIONAL_TOOLS = {name for name in ("diagnostics", "fetch", "agent")
                  if importlib.util.find_spec(f"mcpkit.coding.{name}") is not None}

Record = dict[str, Any]
Call = Callable[[str, dict[str, Any]], Awaitable[Record]]


# --- servers --------------------------------------------------------------------------------


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hello.txt").write_text("alpha\nbeta\ngamma\n")
    (ws / "broken.py").write_text("def f(:\n    pass\n")  # for `diagnostics`
    return ws


def _serve_args(ws: Path, *more: str) -> list[str]:
    # --allow-private-fetch: `fetch` reads the test's own page server on 127.0.0.1.
    return ["-m", "mcpkit", "serve", "--workspace", str(ws), "--allow-private-fetch", *more]


PAGE = {"answer": 42, "source": "interop page server"}


@pytest.fixture
def page_url() -> Iterator[str]:
    """A tiny HTTP server on 127.0.0.1 for `fetch`; the URL carries a per-test token."""
    marker = os.urandom(4).hex()
    body = json.dumps({**PAGE, "marker": marker}).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == f"/{marker}.json" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/{marker}.json"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


class Served:
    """A running `mcpkit serve --port N --token T`: its /mcp URL (no query) and its process."""

    def __init__(self, url: str, proc: subprocess.Popen[bytes]) -> None:
        self.url, self.proc = url, proc


@contextlib.contextmanager
def serve_http_process(ws: Path) -> Iterator[Served]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, *_serve_args(ws, "--host", "127.0.0.1", "--port", str(port),
                                      "--token", TOKEN)],
        cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        wait_for_port(proc, port, LIMIT_S)
        yield Served(f"http://127.0.0.1:{port}/mcp", proc)
    finally:
        stop_process(proc, group=True)


@contextlib.contextmanager
def serve_http(ws: Path) -> Iterator[str]:
    with serve_http_process(ws) as served:
        yield served.url


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def reap(pid: int | None) -> None:
    """Kill a `sleep` job the test started if it is still there (see the SIGTERM bug below)."""
    if pid is None or _gone(pid):
        return
    with contextlib.suppress(OSError):
        if b"sleep" in Path(f"/proc/{pid}/cmdline").read_bytes():
            os.kill(pid, signal.SIGKILL)


def wait_gone(pid: int, limit_s: float = 5.0) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return _gone(pid)


# --- the scenario every client runs ---------------------------------------------------------


async def scenario(call: Call, page_url: str) -> dict[str, Any]:
    """The same calls as coding_sdk_client.mjs: every tool, with effects on disk."""
    out: dict[str, Any] = {}
    await call("view", {"file_path": "hello.txt"})
    await call("read", {"file_path": "hello.txt", "offset": 2, "limit": 1})
    await call("write", {"file_path": "sdk/new.py", "content": "x = 1\n"})
    await call("view", {"file_path": "sdk/new.py"})
    await call("edit", {"file_path": "sdk/new.py", "old_string": "x = 1", "new_string": "x = 2"})
    await call("patch", {
        "diff": "--- a/sdk/new.py\n+++ b/sdk/new.py\n@@ -1 +1,2 @@\n x = 2\n+y = 3\n",
    })
    await call("glob", {"pattern": "**/*.py"})
    await call("grep", {"pattern": "y = 3"})
    await call("ls", {"path": "sdk"})
    if "diagnostics" in OPTIONAL_TOOLS:
        await call("diagnostics", {"file_path": "broken.py"})
    if "fetch" in OPTIONAL_TOOLS:
        await call("fetch", {"url": page_url, "format": "json"})
    if "agent" in OPTIONAL_TOOLS:  # the model (sampling_answer) asks for glob, then answers
        await call("agent", {"prompt": "List the Python files.", "description": "find py"})
    await call("bash", {"command": "echo hi; echo $((6 * 7)) > sdk/bash.txt"})

    started = await call("bash", {"command": "echo started; exec sleep 100",
                                  "run_in_background": True})
    job_id = (started["structured"] or {}).get("job_id")
    out["jobPid"] = (started["structured"] or {}).get("pid")
    seen = ""
    with anyio.move_on_after(5):
        while True:
            polled = await call("bash_output", {"job_id": job_id})
            seen += polled["text"]
            if polled["isError"] or "started" in seen:
                break
            await anyio.sleep(0.05)
    out["jobOutput"] = seen
    await call("bash_kill", {"job_id": job_id})
    await call("bash_output", {"job_id": job_id})
    # Left running on purpose: stopping the server must stop it too.
    leftover = await call("bash", {"command": "exec sleep 100", "run_in_background": True})
    out["leftoverPid"] = (leftover["structured"] or {}).get("pid")
    return out


def check_tools(tools: list[tuple[str, Any]]) -> None:
    names = [name for name, _ in tools]
    assert len(names) == len(set(names)), names
    assert set(names) >= CORE_TOOLS, f"missing: {CORE_TOOLS - set(names)}"
    assert set(names) - CORE_TOOLS <= OPTIONAL_TOOLS, f"untested: {set(names) - CORE_TOOLS}"
    for name, schema in tools:
        assert isinstance(schema, dict) and schema.get("type") == "object", (name, schema)
    schemas = dict(tools)
    assert "file_path" in schemas["view"]["properties"]
    assert {"file_path", "content"} <= set(schemas["write"]["properties"])
    assert {"file_path", "old_string", "new_string"} <= set(schemas["edit"]["properties"])
    assert "diff" in schemas["patch"]["properties"]
    assert {"command", "run_in_background"} <= set(schemas["bash"]["properties"])
    assert "job_id" in schemas["bash_output"]["properties"]
    assert "job_id" in schemas["bash_kill"]["properties"]


def by_tool(calls: list[Record], name: str) -> list[Record]:
    return [c for c in calls if c["name"] == name]


def check_outcome(calls: list[Record], out: dict[str, Any], ws: Path, page_url: str) -> None:
    """The records of `scenario` (or of the node script) and their effects in `ws`."""
    errors = [c for c in calls if c["isError"]]
    assert errors == [], errors
    by_name: dict[str, list[Record]] = {}
    for c in calls:
        by_name.setdefault(c["name"], []).append(c)
    assert set(by_name) == CORE_TOOLS | OPTIONAL_TOOLS  # every tool was called

    hello_view, new_view = by_name["view"]
    assert "1\talpha" in hello_view["text"] and "3\tgamma" in hello_view["text"]
    assert "2\tbeta" in by_name["read"][0]["text"] and "alpha" not in by_name["read"][0]["text"]
    assert "1\tx = 1" in new_view["text"]
    assert by_name["write"][0]["structured"]["created"] is True
    assert by_name["edit"][0]["structured"]["replacements"] == 1
    assert "+x = 2" in by_name["edit"][0]["text"]
    assert by_name["patch"][0]["structured"]["files"][0]["path"] == "sdk/new.py"
    assert (ws / "sdk" / "new.py").read_text() == "x = 2\ny = 3\n"
    assert (ws / "hello.txt").read_text() == "alpha\nbeta\ngamma\n"

    assert sorted(by_name["glob"][0]["structured"]["files"]) == ["broken.py", "sdk/new.py"]
    assert by_name["grep"][0]["structured"]["files"] == ["sdk/new.py"]
    assert "new.py" in by_name["ls"][0]["text"]

    if "diagnostics" in OPTIONAL_TOOLS:
        assert "broken.py:1:" in by_tool(calls, "diagnostics")[0]["text"]
        assert (ws / "broken.py").read_text() == "def f(:\n    pass\n"  # changes no source
    if "fetch" in OPTIONAL_TOOLS:
        fetched = by_tool(calls, "fetch")[0]
        assert fetched["structured"]["status"] == 200
        assert fetched["structured"]["url"] == page_url
        assert json.loads(fetched["text"].split("\n(")[0])["marker"] in page_url
    if "agent" in OPTIONAL_TOOLS:
        answer = by_tool(calls, "agent")[0]["text"]
        # The model asked for glob; the server ran it and sent back the result.
        assert answer.startswith(AGENT_SAYS), answer
        assert "sdk/new.py" in answer and "broken.py" in answer

    shell = by_name["bash"][0]
    assert shell["structured"]["exit_code"] == 0
    assert shell["text"].startswith("hi\n")
    assert (ws / "sdk" / "bash.txt").read_text() == "42\n"

    assert "started" in out["jobOutput"]
    killed = by_name["bash_kill"][0]["structured"]
    assert killed["killed"] is True and killed["running"] is False
    assert by_name["bash_output"][-1]["structured"]["running"] is False
    assert wait_gone(out["jobPid"], 2.0), "bash_kill left the job running"
    assert isinstance(out["leftoverPid"], int)


AGENT_SAYS = "The sub-agent's glob found:"


def sampling_answer(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The client's "model" for `agent`: first a glob tool_use, then a text quoting its result.

    `messages` are plain JSON; the answer is a plain JSON CreateMessageResult (with tools).
    """
    last = messages[-1]["content"]
    blocks = last if isinstance(last, list) else [last]
    results = [b for b in blocks if b.get("type") == "tool_result"]
    if not results:
        return {"role": "assistant", "model": "interop-model", "stopReason": "toolUse",
                "content": [{"type": "tool_use", "id": "use-1", "name": "glob",
                             "input": {"pattern": "**/*.py"}}]}
    found = "".join(c.get("text", "") for r in results for c in r.get("content", []))
    return {"role": "assistant", "model": "interop-model", "stopReason": "endTurn",
            "content": {"type": "text", "text": f"{AGENT_SAYS} {found}"}}


async def sdk_sampling(context: Any, params: types.CreateMessageRequestParams
                       ) -> types.CreateMessageResultWithTools:
    messages = [m.model_dump(by_alias=True, exclude_none=True) for m in params.messages]
    return types.CreateMessageResultWithTools.model_validate(sampling_answer(messages))


SAMPLING_WITH_TOOLS = types.SamplingCapability(tools=types.SamplingToolsCapability())


def record(name: str, args: dict[str, Any], result: Any) -> Record:
    """One call of an SDK client (mcp's `CallToolResult` or mcpkit's) as a plain record."""
    text = "".join(getattr(c, "text", "") for c in result.content)
    return {"name": name, "args": args, "isError": bool(result.is_error), "text": text,
            "structured": result.structured_content}


# --- the Python SDK -------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def sdk_session(transport: str, ws: Path, url: str | None) -> AsyncIterator[ClientSession]:
    """mcp's legacy `ClientSession` (initialize handshake) over stdio or Streamable HTTP."""
    if transport == "stdio":
        params = StdioServerParameters(
            command=sys.executable, args=_serve_args(ws, "--transport", "stdio"), cwd=ROOT)
        async with stdio_client(params) as (read, write), ClientSession(
            read, write, sampling_callback=sdk_sampling,
            sampling_capabilities=SAMPLING_WITH_TOOLS,
        ) as session:
            yield session
    else:
        assert url is not None
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with create_mcp_http_client(headers=headers) as http, streamable_http_client(
            f"{url}?task_id=sdk-session", http_client=http
        ) as (read, write), ClientSession(
            read, write, sampling_callback=sdk_sampling,
            sampling_capabilities=SAMPLING_WITH_TOOLS,
        ) as session:
            yield session


@contextlib.asynccontextmanager
async def sdk_client(transport: str, ws: Path, url: str | None) -> AsyncIterator[SdkClient]:
    """mcp's high-level `Client` (probes `server/discover`: the modern era)."""
    if transport == "stdio":
        params = StdioServerParameters(
            command=sys.executable, args=_serve_args(ws, "--transport", "stdio"), cwd=ROOT)
        async with SdkClient(params, sampling_callback=sdk_sampling,
                             sampling_capabilities=SAMPLING_WITH_TOOLS) as client:
            yield client
    else:
        assert url is not None
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with create_mcp_http_client(headers=headers) as http, SdkClient(
            streamable_http_client(f"{url}?task_id=sdk-client", http_client=http),
            sampling_callback=sdk_sampling, sampling_capabilities=SAMPLING_WITH_TOOLS,
        ) as client:
            yield client


async def _run_python_sdk(api: str, transport: str, ws: Path, url: str | None, page_url: str,
                          ) -> tuple[list[tuple[str, Any]], list[Record], dict[str, Any], str]:
    calls: list[Record] = []
    opener = sdk_session if api == "session" else sdk_client
    with anyio.fail_after(LIMIT_S):
        async with opener(transport, ws, url) as peer:
            if isinstance(peer, ClientSession):
                init = await peer.initialize()
                version, name = init.protocol_version, init.server_info.name
            else:
                version = peer.protocol_version
                assert peer.server_info is not None
                name = peer.server_info.name
            listed = (await peer.list_tools()).tools
            tools = [(t.name, t.input_schema) for t in listed]

            async def call(tool: str, args: dict[str, Any]) -> Record:
                result = await peer.call_tool(tool, args)
                assert isinstance(result, types.CallToolResult), result
                calls.append(record(tool, args, result))
                return calls[-1]

            out = await scenario(call, page_url)
    assert name == "mcpkit-coding"
    return tools, calls, out, str(version)


@pytest.mark.parametrize("api", ["session", "client"])
async def test_python_sdk_stdio(tmp_path: Path, page_url: str, api: str) -> None:
    ws = _workspace(tmp_path)
    tools, calls, out, version = await _run_python_sdk(api, "stdio", ws, None, page_url)
    check_tools(tools)
    check_outcome(calls, out, ws, page_url)
    assert version == ("2025-11-25" if api == "session" else "2026-07-28")
    # The client closed stdin: the server exited and took its background job with it.
    assert wait_gone(out["leftoverPid"]), "a background job outlived the stdio server"


@pytest.mark.parametrize("api", ["session", "client"])
async def test_python_sdk_streamable_http(tmp_path: Path, page_url: str, api: str) -> None:
    ws = _workspace(tmp_path)
    with serve_http(ws) as url:
        tools, calls, out, version = await _run_python_sdk(api, "http", ws, url, page_url)
        check_tools(tools)
        check_outcome(calls, out, ws, page_url)
        assert version == ("2025-11-25" if api == "session" else "2026-07-28")
        task = "sdk-session" if api == "session" else "sdk-client"
        output_path = by_tool(calls, "bash")[0]["structured"]["output_path"]
        assert f"/{task}/" in output_path  # ?task_id= scoped the output files
    reap(out["leftoverPid"])  # SIGTERM leaves it: test_stopping_the_http_server_stops_its_jobs


async def test_python_sdk_without_token_gets_401(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    statuses: list[int] = []

    async def on_response(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    with serve_http(ws) as url:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            statuses.clear()
            with anyio.fail_after(LIMIT_S):
                async with httpx2.AsyncClient(headers=headers,
                                              event_hooks={"response": [on_response]}) as http:
                    with pytest.raises(Exception) as caught:
                        async with streamable_http_client(
                            f"{url}?task_id=a", http_client=http
                        ) as (read, write), ClientSession(read, write) as session:
                            await session.initialize()
            assert statuses and set(statuses) == {401}, statuses
            assert "MCPError" in repr(caught.value) or "401" in repr(caught.value)
        assert not (ws / "sdk").exists()


@pytest.mark.parametrize("sig", [
    pytest.param(signal.SIGINT, id="SIGINT"),
    pytest.param(signal.SIGTERM, id="SIGTERM"),
])
async def test_stopping_the_http_server_stops_its_jobs(tmp_path: Path, sig: int) -> None:
    ws = _workspace(tmp_path)
    pid: int | None = None
    try:
        with serve_http_process(ws) as served:
            with anyio.fail_after(LIMIT_S):
                async with sdk_session("http", ws, served.url) as session:
                    await session.initialize()
                    started = await session.call_tool(
                        "bash", {"command": "exec sleep 100", "run_in_background": True})
                    assert started.structured_content is not None
                    pid = started.structured_content["pid"]
            assert not _gone(pid)
            os.kill(served.proc.pid, sig)
            served.proc.wait(timeout=5)
        assert wait_gone(pid, 2.0), f"job {pid} outlived `mcpkit serve` stopped by {sig!r}"
    finally:
        reap(pid)


# --- task isolation over HTTP ----------------------------------------------------------------


async def test_tasks_are_isolated_over_http(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    with serve_http(ws) as url, anyio.fail_after(LIMIT_S):
        async with Client(f"{url}?task_id=a", bearer_token=TOKEN) as a, Client(
            f"{url}?task_id=b", bearer_token=TOKEN
        ) as b:
            assert not (await a.call_tool("view", {"file_path": "hello.txt"})).is_error
            refused = await b.call_tool("write", {"file_path": "hello.txt", "content": "b\n"})
            assert refused.is_error
            assert "has not been read in this task" in record("write", {}, refused)["text"]
            refused = await b.call_tool(
                "edit", {"file_path": "hello.txt", "old_string": "alpha", "new_string": "b"})
            assert refused.is_error
            assert "has not been read in this task" in record("edit", {}, refused)["text"]
            assert (ws / "hello.txt").read_text() == "alpha\nbeta\ngamma\n"

            written = await a.call_tool("write", {"file_path": "hello.txt", "content": "a\n"})
            assert not written.is_error, record("write", {}, written)
            assert (ws / "hello.txt").read_text() == "a\n"

            # Task b may write once it has read the file itself.
            assert not (await b.call_tool("view", {"file_path": "hello.txt"})).is_error
            assert not (await b.call_tool(
                "write", {"file_path": "hello.txt", "content": "b\n"})).is_error
            assert (ws / "hello.txt").read_text() == "b\n"

            started = await a.call_tool(
                "bash", {"command": "exec sleep 100", "run_in_background": True})
            job_id = started.structured_content["job_id"]
            pid = started.structured_content["pid"]
            assert not (await a.call_tool("bash_output", {"job_id": job_id})).is_error
            for tool in ("bash_output", "bash_kill"):
                other = await b.call_tool(tool, {"job_id": job_id})
                assert other.is_error, (tool, record(tool, {}, other))
                assert "unknown job_id" in record(tool, {}, other)["text"]
            assert not _gone(pid)  # b could not stop it
            killed = await a.call_tool("bash_kill", {"job_id": job_id})
            assert killed.structured_content["killed"] is True
    assert wait_gone(pid, 2.0)


# --- the TypeScript SDK ----------------------------------------------------------------------

needs_node = pytest.mark.skipif(
    shutil.which("node") is None or not TS_SDK.exists(),
    reason="needs node on PATH and tests/js/node_modules (`bash scripts/install_js_peers.sh`)",
)


def run_node(*args: str, page_url: str = "") -> dict[str, Any]:
    """Run the node script in its own process group; its last stdout line is the summary."""
    node = shutil.which("node")
    assert node is not None
    proc = subprocess.Popen(
        [node, str(SCRIPT), *args], cwd=ROOT, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "MCPKIT_INTEROP_FETCH_URL": page_url},
    )
    try:
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        stop_process(proc, group=True)  # type: ignore[arg-type]
    lines = stdout.strip().splitlines()
    assert lines, f"no output (rc={proc.returncode}); stderr:\n{stderr}"
    out: dict[str, Any] = json.loads(lines[-1])
    assert out.get("ok"), f"{out.get('error')}\nstderr:\n{stderr}"
    assert proc.returncode == 0, stderr
    return out


def _check_ts(out: dict[str, Any], ws: Path, page_url: str) -> None:
    assert out["serverName"] == "mcpkit-coding"
    check_tools([(t["name"], t["inputSchema"]) for t in out["tools"]])
    check_outcome(out["calls"], out, ws, page_url)


@needs_node
def test_ts_sdk_stdio(tmp_path: Path, page_url: str) -> None:
    ws = _workspace(tmp_path)
    out = run_node("stdio", sys.executable, *_serve_args(ws, "--transport", "stdio"),
                   page_url=page_url)
    _check_ts(out, ws, page_url)
    assert wait_gone(out["leftoverPid"]), "a background job outlived the stdio server"


@needs_node
def test_ts_sdk_streamable_http(tmp_path: Path, page_url: str) -> None:
    ws = _workspace(tmp_path)
    with serve_http(ws) as url:
        out = run_node("http", f"{url}?task_id=ts-1", TOKEN, page_url=page_url)
        _check_ts(out, ws, page_url)
        assert out["protocolVersion"] == "2025-11-25"
        assert "/ts-1/" in by_tool(out["calls"], "bash")[0]["structured"]["output_path"]
    reap(out["leftoverPid"])  # SIGTERM leaves it: test_stopping_the_http_server_stops_its_jobs


@needs_node
def test_ts_sdk_without_token_gets_401(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    with serve_http(ws) as url:
        out = run_node("http-noauth", f"{url}?task_id=ts-1")
    assert out["connected"] is False
    assert out["connectCode"] == 401, out
    assert "bearer token" in out["connectError"]
