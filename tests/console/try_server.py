"""An upstream MCP server for the console's "Try a tool" tests, run as a real process:

    python tests/console/try_server.py PORT

Tools: `count` (reports progress `steps` times, `delay` seconds apart, then says how far it
counted; records a cancellation for `was_cancelled`), `describe` (arguments of every form
control type, echoed back as structured content), `pixel` (a 2x2 PNG image and a caption),
`broken` (an isError result), `was_cancelled`.
"""

from __future__ import annotations

import argparse
import struct
import zlib
from typing import Literal

import anyio

from mcpkit import Server
from mcpkit.server.content import image, text
from mcpkit.server.context import Context
from mcpkit.server.tools import ToolResult
from mcpkit.transports.server.http.serve import run_http

cancelled: list[str] = []


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A valid PNG of one colour (zlib and the PNG chunk layout; no image library)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\x00" + bytes(rgb) * width
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(row * height)) + chunk(b"IEND", b""))


def build() -> Server:
    server = Server("try-upstream", "1.0.0")

    @server.tool()
    async def count(ctx: Context, steps: int = 3, delay: float = 0.3) -> str:
        """Count to `steps`, reporting each step."""
        try:
            for step in range(steps):
                await anyio.sleep(delay)
                await ctx.report_progress(step + 1, steps, f"counted {step + 1}")
        except anyio.get_cancelled_exc_class():
            cancelled.append("count")
            raise
        return f"counted to {steps}"

    @server.tool()
    async def describe(name: str, times: int, ratio: float = 0.5, loud: bool = False,
                       mood: Literal["calm", "glad"] = "calm",
                       tags: list[str] | None = None) -> ToolResult:
        """Echo the arguments back as structured content."""
        echoed = {"name": name, "times": times, "ratio": ratio, "loud": loud, "mood": mood,
                  "tags": tags or []}
        return ToolResult(content=[text(f"{name} x{times}")], structured_content=echoed)

    @server.tool()
    async def pixel() -> ToolResult:
        """A small red image."""
        return ToolResult(content=[image(png(2, 2, (220, 20, 60)), "image/png"),
                                   text("a red square")])

    @server.tool()
    async def broken() -> ToolResult:
        """Always reports an error."""
        return ToolResult(content=[text("this tool is broken on purpose")], is_error=True)

    @server.tool()
    async def was_cancelled() -> str:
        """Which calls were cancelled."""
        return ",".join(cancelled) or "none"

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    args = parser.parse_args()
    run_http(build(), port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
