"""`Client` against a stdio server (a real child process) whose messages carry values that
cannot be decoded: each bad answer fails its own call with a clean `McpError`, hostile
notifications are dropped, and the connection goes on answering."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from mcpkit import McpError
from mcpkit.client import Client, Timeouts

from .support import RawServer

pytestmark = pytest.mark.anyio

# Each tools/call answers according to its argument `n`; the raw lines are written as bytes
# since json.dumps can produce none of them.
HOSTILE = r'''
def write_bytes(data):
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.flush()


def on_call(message):
    n = message["params"]["arguments"].get("n")
    head = b'{"jsonrpc":"2.0","id":' + json.dumps(message["id"]).encode()
    text = b'{"content":[{"type":"text","text":'
    if n == "range":
        write_bytes(head + b',"result":{"content":[],"big":1e400}}')
    elif n == "utf8":
        write_bytes(head + b',"result":' + text + b'"\xff\xfe"}]}}')
    elif n == "digits":
        write_bytes(head + b',"result":{"content":[],"n":' + b"9" * 5000 + b"}}")
    elif n == "error-data":
        write_bytes(head + b',"error":{"code":-32000,"message":"bad","data":{"x":1e400}}}')
    elif n == "noise":
        # hostile notifications and a server request first, then the real answer
        for params in (b'{"requestId":[1,2]}', b'{"requestId":{"a":1}}', b'{"requestId":1e400}'):
            write_bytes(b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":'
                        + params + b"}")
        write_bytes(b'{"jsonrpc":"2.0","method":"notifications/progress",'
                    b'"params":{"progressToken":"\xff","progress":1e400}}')
        write_bytes(b'{"jsonrpc":"2.0","method":"notifications/message",'
                    b'"params":{"level":["info"],"data":"' + b"[" * 3000 + b'"}}')
        write_bytes(b'{"jsonrpc":"2.0","id":"s1","method":"roots/list","params":{"x":1e400}}')
        result(message, {"content": [{"type": "text", "text": "survived"}]})
    else:
        result(message, {"content": [{"type": "text", "text": "done"}]})
'''


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_undecodable_answers_fail_their_call_only(tmp_path: Path, era: str) -> None:
    server = RawServer(tmp_path, HOSTILE, era)
    async with Client(server.command, era=era, timeouts=Timeouts(timeout=10)) as client:
        with anyio.fail_after(20):
            for bad in ("range", "utf8", "digits"):
                with pytest.raises(McpError) as failed:
                    await client.call_tool("work", {"n": bad})
                assert failed.value.code == -32700, (bad, failed.value)
                assert "undecodable" in str(failed.value)
                assert (await client.call_tool("work", {"n": "ok"})).content[0].text == "done"
            # an error response whose data cannot be decoded still fails its call at once
            with pytest.raises(McpError) as refused:
                await client.call_tool("work", {"n": "error-data"})
            assert refused.value.code == -32700 and "undecodable" in str(refused.value)
            survived = await client.call_tool("work", {"n": "noise"})
            assert survived.content[0].text == "survived"
            await client.ping()
            # the server's request with undecodable params was answered -32602, not ignored
            answer = await server.wait_for(
                lambda got: [m for m in got if m.get("id") == "s1" and "method" not in m])
            assert answer[0]["error"]["code"] == -32602
