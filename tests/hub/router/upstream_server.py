"""An upstream MCP server for the hub router's tests, run as a real process:

    python tests/hub/router/upstream_server.py --name NAME [--legacy-only] PORT

Tools: `echo`, `add`, `slow` (reports progress, sleeps; records a cancellation in
`cancelled`), `ask_model` (samples the caller's model), `ask_user` (elicits), `chatty`
(logs at info and debug), `whoami` (the Authorization header the hub sent, to prove the
caller's token is not forwarded), `grow` (adds a tool and says the list changed), `fail`
(raises: an isError result); a prompt `greet`, a resource `note://NAME/readme` and a template
`note://NAME/{topic}`. `--legacy-only` refuses the 2026-07-28 era, as an older server would.
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio

from mcpkit import Server
from mcpkit.server.context import Context
from mcpkit.transports.server.http.serve import run_http

cancelled: list[str] = []
seen_authorization: set[str] = set()


def recording_authorization(app: Any) -> Any:
    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            for key, value in scope.get("headers", ()):
                if key.lower() == b"authorization":
                    seen_authorization.add(value.decode("latin-1"))
        await app(scope, receive, send)

    wrapped.shutdown = app.shutdown  # type: ignore[attr-defined]  # run_http's on_stop
    return wrapped


def build(name: str, legacy_only: bool) -> Server:
    server = Server(f"upstream-{name}", "1.0.0")
    if legacy_only:  # like a server from before 2026-07-28: no server/discover
        del server.engine.methods["server/discover"]

    @server.tool()
    async def echo(text: str) -> str:
        """Echo the text back."""
        return f"{name}: {text}"

    @server.tool()
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @server.tool()
    async def slow(ctx: Context, seconds: float = 5.0, steps: int = 5) -> str:
        """Report progress while sleeping."""
        try:
            for step in range(steps):
                await ctx.report_progress(step + 1, steps, f"step {step + 1}")
                await anyio.sleep(seconds / steps)
        except BaseException:
            cancelled.append("slow")
            raise
        return "slept"

    @server.tool()
    async def was_cancelled() -> str:
        """Which calls were cancelled."""
        return ",".join(cancelled) or "none"

    @server.tool()
    async def ask_model(ctx: Context, question: str) -> str:
        """Ask the caller's model."""
        result = await ctx.sample(
            [{"role": "user", "content": {"type": "text", "text": question}}], max_tokens=20)
        return f"model said: {result['content']['text']}"

    @server.tool()
    async def ask_user(ctx: Context) -> str:
        """Ask the user for a name."""
        answer = await ctx.elicit("Your name?", {
            "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]})
        return f"user said: {answer.get('content', {}).get('name')} ({answer.get('action')})"

    @server.tool()
    async def chatty(ctx: Context) -> str:
        """Log twice."""
        await ctx.info(f"{name} is working")
        await ctx.debug("details")
        return "done"

    @server.tool()
    async def whoami() -> str:
        """The Authorization headers the server has seen (the hub must send none of its
        callers' tokens, only the upstream's own)."""
        return ",".join(sorted(seen_authorization)) or "none"

    @server.tool()
    async def grow() -> str:
        """Add the tool `extra` and say so."""

        async def extra() -> str:
            """A tool added at run time."""
            return "extra!"

        server.add_tool(extra)
        await server.notify_list_changed("tools")
        return "grown"

    @server.tool()
    async def fail() -> str:
        """Always fails."""
        raise RuntimeError("this tool always fails")

    @server.prompt()
    async def greet(who: str) -> str:
        """A greeting."""
        return f"Hello {who}, from {name}"

    @server.resource(f"note://{name}/readme", mime_type="text/plain")
    async def readme() -> str:
        return f"readme of {name}"

    @server.resource(f"note://{name}/{{topic}}", mime_type="text/plain")
    async def topic(topic: str) -> str:
        return f"{name} on {topic}"

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="up")
    parser.add_argument("--legacy-only", action="store_true")
    parser.add_argument("port", type=int)
    args = parser.parse_args()
    # mcpkit's own runner: on SIGTERM it ends the SSE streams the hub holds open, so the
    # process stops at once (plain uvicorn.run waited on them until the SIGKILL).
    run_http(build(args.name, args.legacy_only), port=args.port, log_level="warning",
             wrap=recording_authorization)


if __name__ == "__main__":
    main()
