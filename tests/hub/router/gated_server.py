"""An upstream that, like the reference "everything" server, lists some tools only to a client
that declared what they need, run as a real process:

    python tests/hub/router/gated_server.py [--legacy-only] PORT

Tools: `needs_sampling` (listed only to a client that declared sampling; asks the caller's
model), `needs_elicitation` (only with elicitation; asks the user), `regional` (its argument
annotated `x-mcp-header`: a modern call must mirror it in `Mcp-Param-Region`),
`spam_list_changed` (a burst of tools list_changed notifications), `ask_many` (that many
questions at once), and `seen`,
which answers what the server saw of its clients - for `tools/list` and for `tools/call`, the
capabilities, client info and protocol version of each request, and the credential headers of
every HTTP request - so a test can hold the hub's catalog fetch and its calls to the same
client.

The capabilities come from the request (`Call.client_capabilities`): in a legacy session
those `initialize` declared, in the modern era the request's `_meta` clientCapabilities. A
gated tool called without its capability answers "Unknown tool", as if it did not exist.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from mcpkit import Server
from mcpkit.protocol import errors
from mcpkit.server.call import Call
from mcpkit.server.context import Context
from mcpkit.transports.server.http.serve import run_http

GATED = {"needs_sampling": "sampling", "needs_elicitation": "elicitation"}
"""tool → the client capability it is listed for."""
RECORDED_HEADERS = (b"authorization", b"x-upstream-key")

seen: dict[str, list[dict[str, Any]]] = {"tools/list": [], "tools/call": []}
headers_seen: set[tuple[str, ...]] = set()


def recording_headers(app: Any) -> Any:
    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers", ()))
            headers_seen.add(tuple(
                headers.get(name, b"").decode("latin-1") for name in RECORDED_HEADERS))
        await app(scope, receive, send)

    wrapped.shutdown = app.shutdown  # type: ignore[attr-defined]  # run_http's on_stop
    return wrapped


def _record(call: Call) -> None:
    seen[call.method].append({
        "capabilities": call.client_capabilities,
        "client_info": call.client_info,
        "protocol_version": call.protocol_version,
        "modern": call.modern,
    })


def _allowed(tool: str, call: Call) -> bool:
    needed = GATED.get(tool)
    return needed is None or needed in call.client_capabilities


def build(legacy_only: bool) -> Server:
    server = Server("upstream-gated", "1.0.0")
    if legacy_only:  # like a server from before 2026-07-28: no server/discover
        del server.engine.methods["server/discover"]

    @server.tool()
    async def needs_sampling(ctx: Context, question: str) -> str:
        """Ask the caller's model (listed only to a client that can sample)."""
        result = await ctx.sample(
            [{"role": "user", "content": {"type": "text", "text": question}}], max_tokens=20)
        return f"model said: {result['content']['text']}"

    @server.tool()
    async def needs_elicitation(ctx: Context) -> str:
        """Ask the user (listed only to a client that can elicit)."""
        answer = await ctx.elicit("Your name?", {
            "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
        return f"user said: {answer.get('content', {}).get('name')} ({answer.get('action')})"

    async def regional(region: str) -> str:
        """Mirrors its region into the Mcp-Param-Region header (2026-07-28)."""
        return f"region {region}"

    server.add_tool(regional, input_schema={
        "type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
        "required": ["region"]})

    @server.tool()
    async def spam_list_changed(count: int) -> str:
        """Say `count` times that the tool list changed (a hostile burst)."""
        for _ in range(count):
            await server.notify_list_changed("tools")
        return f"sent {count}"

    @server.tool()
    async def ask_many(ctx: Context, count: int) -> str:
        """Ask `count` questions at once (a hostile flood of input requests)."""
        form = {"type": "object", "properties": {"n": {"type": "string"}}}
        answers = await ctx.ask_many({
            f"q{i}": ("elicitation/create", {"mode": "form", "message": f"question {i}",
                                             "requestedSchema": form})
            for i in range(count)})
        return f"{len(answers)} answers"

    @server.tool("seen")
    async def seen_by_server() -> str:
        """What the server saw of its clients (JSON)."""
        return json.dumps({**seen, "headers": sorted(headers_seen)})

    _gate(server)
    return server


def _gate(server: Server) -> None:
    """Wrap tools/list and tools/call: record the client, hide the tools it may not use."""
    list_handler, list_eras, list_capability = server.engine.methods["tools/list"]
    call_handler, call_eras, call_capability = server.engine.methods["tools/call"]

    async def gated_list(srv: Server, call: Call) -> dict[str, Any]:
        _record(call)
        result = await list_handler(srv, call)
        result["tools"] = [tool for tool in result["tools"] if _allowed(tool["name"], call)]
        return result

    async def gated_call(srv: Server, call: Call) -> dict[str, Any]:
        _record(call)
        name = call.params.get("name")
        if isinstance(name, str) and not _allowed(name, call):
            raise errors.invalid_params(f"Unknown tool: {name}", {"name": name})
        return await call_handler(srv, call)

    server.engine.methods["tools/list"] = (gated_list, list_eras, list_capability)
    server.engine.methods["tools/call"] = (gated_call, call_eras, call_capability)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--legacy-only", action="store_true")
    parser.add_argument("port", type=int)
    args = parser.parse_args()
    # mcpkit's own runner: on SIGTERM it ends the SSE streams the hub holds open, so the
    # process stops at once (plain uvicorn.run waited on them until the SIGKILL).
    run_http(build(args.legacy_only), port=args.port, log_level="warning",
             wrap=recording_headers)


if __name__ == "__main__":
    main()
