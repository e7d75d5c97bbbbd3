"""A server for the task-memory tests, run as a real process:

    python tests/server/task_flood_server.py --transport stdio|http [--port PORT]

It offers the tasks extension and two task-supporting tools: `blob(size)` returns `size`
bytes of text (a big stored task result from a small request) and `echo(text)` returns its
input (a big stored result from a big request); `ask()` asks the client a question and waits
for the answer (`tasks/update`).
"""

from __future__ import annotations

import argparse

from mcpkit import Server
from mcpkit.serve_arguments import add_transport_arguments
from mcpkit.server import tasks
from mcpkit.server.context import Context

MAX_BLOB_BYTES = 64 * 1024 * 1024
"""The largest `blob` (a bound on the test tool itself)."""


def build() -> Server:
    server = Server("task-flood", "1.0.0")
    server.extensions[tasks.EXTENSION] = {}

    @server.tool(task_support="optional")
    async def blob(size: int) -> str:
        """Return `size` bytes of text."""
        if not 0 <= size <= MAX_BLOB_BYTES:
            raise ValueError(f"size must stay within {MAX_BLOB_BYTES} bytes")
        return "b" * size

    @server.tool(task_support="optional")
    async def ask(ctx: Context) -> str:
        """Ask the client one question (the task waits in `input_required`)."""
        answer = await ctx.elicit("Anything?", {"type": "object", "properties": {}},
                                  key="question")
        return str(answer.get("action"))

    @server.tool(task_support="optional")
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_transport_arguments(parser, default_transport="stdio")
    args = parser.parse_args()
    if args.transport == "stdio":
        build().run_stdio()
    else:
        build().run_http(host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
