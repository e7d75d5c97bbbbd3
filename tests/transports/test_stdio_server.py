"""The stdio server transport, over real pipes to a server subprocess."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "0"},
}
INIT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"elicitation": {}},
    "clientInfo": {"name": "tests", "version": "0"},
}


def test_legacy_session(stdio_peer: Any) -> None:
    peer = stdio_peer()
    init = peer.request("initialize", INIT)
    assert init["result"]["protocolVersion"] == "2025-11-25"
    assert init["result"]["serverInfo"]["name"]
    peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    tools = peer.request("tools/list")["result"]["tools"]
    assert "test_simple_text" in {t["name"] for t in tools}
    call = peer.request("tools/call", {"name": "test_simple_text", "arguments": {}})
    assert call["result"]["content"][0]["type"] == "text"
    assert peer.request("ping", id="p")["result"] == {}
    assert peer.close() == 0


def test_modern_requests(stdio_peer: Any) -> None:
    peer = stdio_peer()
    discover = peer.request("server/discover", {"_meta": META})["result"]
    assert "2026-07-28" in discover["supportedVersions"]
    call = peer.request("tools/call", {"name": "test_simple_text", "arguments": {}, "_meta": META})
    assert call["result"]["resultType"] == "complete"
    bad = peer.request(
        "tools/list", {"_meta": {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}}
    )
    assert bad["error"]["code"] == -32022
    assert bad["error"]["data"]["requested"] == "2099-01-01"
    assert peer.request("ping", {"_meta": META})["error"]["code"] == -32601
    assert peer.request("tools/list")["error"]["code"] == -32602  # no _meta, no session


def test_modern_mrtr_round_trip(stdio_peer: Any) -> None:
    peer = stdio_peer()
    name = "test_input_required_result_elicitation"
    first = peer.request("tools/call", {"name": name, "arguments": {}, "_meta": META})["result"]
    assert first["resultType"] == "input_required"
    (key,) = first["inputRequests"]
    retry = {
        "name": name,
        "arguments": {},
        "_meta": META,
        "requestState": first["requestState"],
        "inputResponses": {key: {"action": "accept", "content": {"name": "Zed"}}},
    }
    done = peer.request("tools/call", retry)["result"]
    assert done["resultType"] == "complete" and "Zed" in done["content"][0]["text"]


def test_legacy_elicitation_round_trip(stdio_peer: Any) -> None:
    peer = stdio_peer()
    peer.request("initialize", INIT)
    peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    peer.send(
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "test_elicitation", "arguments": {"message": "Who?"}},
        }
    )
    ask = peer.read()
    assert ask["method"] == "elicitation/create" and "id" in ask
    peer.send(
        {
            "jsonrpc": "2.0",
            "id": ask["id"],
            "result": {"action": "accept", "content": {"username": "u"}},
        }
    )
    result = peer.response(5)["result"]
    assert "accept" in result["content"][0]["text"]


def test_progress_notifications(stdio_peer: Any) -> None:
    peer = stdio_peer()
    params = {
        "name": "test_tool_with_progress",
        "arguments": {},
        "_meta": {**META, "progressToken": "pt"},
    }
    result = peer.request("tools/call", params)
    assert result["result"]["resultType"] == "complete"
    progress = [m for m in peer.seen if m.get("method") == "notifications/progress"]
    assert [m["params"]["progress"] for m in progress] == [0, 50, 100]
    assert all(m["params"]["progressToken"] == "pt" for m in progress)


def test_cancellation(stdio_peer: Any) -> None:
    peer = stdio_peer()
    peer.send(
        {
            "jsonrpc": "2.0",
            "id": "slow",
            "method": "tools/call",
            "params": {"name": "test_reconnection", "arguments": {}, "_meta": META},
        }
    )
    time.sleep(0.05)
    peer.send(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow"}}
    )
    assert peer.request("ping", {"_meta": META}, id="after")["id"] == "after"
    time.sleep(0.8)  # the tool would have finished by now
    assert peer.request("tools/list", {"_meta": META}, id="later")["id"] == "later"
    assert all(m.get("id") != "slow" for m in peer.seen)


def test_stdout_carries_only_protocol_and_logs_go_to_stderr(stdio_peer: Any) -> None:
    peer = stdio_peer()
    peer.request("initialize", INIT)
    peer.request("tools/call", {"name": "test_tool_with_logging", "arguments": {}})
    peer.send(b"{broken")
    peer.read()
    assert peer.close() == 0
    for line in peer.raw_lines:
        assert json.loads(line)["jsonrpc"] == "2.0"


def test_stray_print_does_not_corrupt_stdout(stdio_peer: Any, tmp_path: Path) -> None:
    script = tmp_path / "noisy_server.py"
    script.write_text(
        textwrap.dedent("""
        import logging, os, subprocess, sys
        from mcpkit.server.server import Server

        server = Server("noisy")

        @server.tool()
        def noisy() -> str:
            print("print to stdout")
            sys.stdout.write("sys.stdout write\\n")
            os.write(1, b"raw write to fd 1\\n")
            subprocess.run([sys.executable, "-c", "print('child process output')"], check=True)
            logging.getLogger("noisy").warning("a log line")
            return "quiet"

        logging.basicConfig()
        server.run_stdio()
    """)
    )
    peer = stdio_peer([sys.executable, str(script)])
    call = peer.request("tools/call", {"name": "noisy", "arguments": {}, "_meta": META})
    assert call["result"]["content"][0]["text"] == "quiet"
    assert peer.close() == 0
    for line in peer.raw_lines:
        assert json.loads(line)["jsonrpc"] == "2.0"
    stderr = peer.stderr
    for text in (
        b"print to stdout",
        b"sys.stdout write",
        b"raw write to fd 1",
        b"child process output",
        b"a log line",
    ):
        assert text in stderr
    assert len(peer.raw_lines) == 1


def test_exits_on_stdin_eof(stdio_peer: Any) -> None:
    peer = stdio_peer()
    assert peer.request("ping")["result"] == {}
    start = time.monotonic()
    assert peer.close(limit_s=5) == 0
    assert time.monotonic() - start < 5


def test_exits_on_eof_with_a_request_in_flight(stdio_peer: Any) -> None:
    peer = stdio_peer()
    peer.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "test_tool_with_progress", "arguments": {}, "_meta": META},
        }
    )
    start = time.monotonic()
    assert peer.close(limit_s=8) == 0
    assert time.monotonic() - start < 8


@pytest.mark.parametrize(
    "chunks",
    [
        [b'{"jsonrpc":"2.0",', b'"id":1,"method":"ping"}\n'],
        [b'{"jsonrpc":"2.0","id":1,"method":"ping"}\r\n'],
    ],
)
def test_split_and_crlf_lines(stdio_peer: Any, chunks: list[bytes]) -> None:
    peer = stdio_peer()
    for chunk in chunks:
        peer.write(chunk)
        time.sleep(0.02)
    assert peer.response(1)["result"] == {}


@pytest.mark.parametrize("stdin_null", [True, False])
def test_dev_null_streams_do_not_crash(stdin_null: bool, tmp_path: Path) -> None:
    """/dev/null as stdin or stdout is a character device that is not a terminal: the server
    must fall back to plain reads/writes, not hand it to the event loop (uvloop aborts)."""
    import subprocess

    cmd = [sys.executable, "-m", "mcpkit.testing.echo_server", "--transport", "stdio"]
    if stdin_null:
        out = tmp_path / "out.txt"
        with open(out, "wb") as sink:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=sink, timeout=20)
        assert out.read_bytes() == b""
    else:
        ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}) + "\n"
        proc = subprocess.run(
            cmd, input=ping.encode(), stdout=subprocess.DEVNULL, timeout=20, check=False
        )
    assert proc.returncode == 0
