"""A stdio server for the CLI tests: tool results of every shape `mcpkit call` prints.

    python tests/manager/cli_server.py

- `shapes`: an image and a resource link (placeholders), no text;
- `data`: structured content only; `typed`: echoes its typed arguments as JSON;
- `refuse`: a tool error (`isError`); `slow`: sleeps, reporting progress.
"""

from __future__ import annotations

import base64
import json

import anyio

from mcpkit import Context, Server, ToolResult


def build() -> Server:
    server = Server("cli-shapes", "2.0.0")

    def shapes() -> ToolResult:
        """An image and a link."""
        return ToolResult(content=[
            {"type": "image", "data": base64.b64encode(b"\x89PNG1234").decode(),
             "mimeType": "image/png"},
            {"type": "resource_link", "uri": "file:///tmp/report.txt", "name": "report"}])

    def data() -> ToolResult:
        """Structured content, no text."""
        return ToolResult(content=[], structured_content={"answer": 42, "unit": "none"})

    def typed(n: int, flag: bool, tags: list[str], text: str, extra: dict[str, int] | None = None
              ) -> str:
        """Echo the arguments with their JSON types.

        More lines that `mcpkit tools` leaves out."""
        return json.dumps({"n": n, "flag": flag, "tags": tags, "text": text, "extra": extra})

    def refuse(reason: str) -> ToolResult:
        """Always fails."""
        return ToolResult(content=[{"type": "text", "text": f"refused: {reason}"}],
                          is_error=True)

    async def slow(seconds: float, ctx: Context) -> str:
        """Sleep, reporting progress."""
        await ctx.report_progress(0, 2, "started")
        await anyio.sleep(seconds)
        return "done"

    for fn in (shapes, data, typed, refuse, slow):
        server.add_tool(fn)
    return server


if __name__ == "__main__":
    build().run_stdio()
