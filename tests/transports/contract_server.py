"""The server the client-transport contract (test_client_transport_contract.py) runs against:

    python tests/transports/contract_server.py stdio
    python tests/transports/contract_server.py http PORT   # /mcp: Streamable HTTP and
                                                           # WebSocket; /sse: HTTP+SSE

and in-process (`build()`) for the in-memory transport. Tools:

- `echo(text)`: the text back;
- `progress(steps)`: `steps` progress notifications (the request's progress token), then done;
- `blob(size)`: `size` bytes of text (a message over the client's limit);
- `hang()`: one progress notification ("started"), then waits until cancelled (60 s at most);
- `cancelled()`: how many `hang` calls this process has seen cancelled.
"""

from __future__ import annotations

import sys

import anyio

from mcpkit import Server
from mcpkit.server.context import Context

MAX_BLOB_BYTES = 64 * 1024 * 1024
"""The most `blob` answers (a bound on the test tool itself)."""
HANG_LIMIT_S = 60.0
"""`hang` ends by itself after this long, cancelled or not."""
_cancelled_hangs = [0]


def build() -> Server:
    server = Server("contract", "1.0.0")

    @server.tool()
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    async def progress(ctx: Context, steps: int) -> str:
        """Report `steps` steps of progress, then answer."""
        for step in range(1, min(steps, 100) + 1):
            await ctx.report_progress(step, steps)
        return f"{steps} steps"

    @server.tool()
    async def blob(size: int) -> str:
        """Return `size` bytes of text."""
        if not 0 <= size <= MAX_BLOB_BYTES:
            raise ValueError(f"size must stay within {MAX_BLOB_BYTES} bytes")
        return "b" * size

    @server.tool()
    async def hang(ctx: Context) -> str:
        """Say it started, then wait until cancelled."""
        await ctx.report_progress(0, message="started")
        try:
            await anyio.sleep(HANG_LIMIT_S)
        except anyio.get_cancelled_exc_class():
            _cancelled_hangs[0] += 1
            raise
        return "not cancelled"

    @server.tool()
    async def cancelled() -> str:
        """How many `hang` calls were cancelled so far."""
        return str(_cancelled_hangs[0])

    return server


def main(argv: list[str]) -> None:
    if argv[:1] == ["stdio"]:
        build().run_stdio()
    elif len(argv) == 2 and argv[0] == "http":
        build().run_http(host="127.0.0.1", port=int(argv[1]), log_level="warning")
    else:
        sys.exit("usage: contract_server.py stdio | http PORT")


if __name__ == "__main__":
    main(sys.argv[1:])
