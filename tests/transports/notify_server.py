"""A server for the slow-listener tests, run as a real process:

    python tests/transports/notify_server.py --port PORT

It has one resource with a 2 KB URI (`LONG_URI`) and the tool `bump(count)`, which sends
`count` `notifications/resources/updated` for it and answers how long that took.
"""

from __future__ import annotations

import argparse
import time

from mcpkit import Server

LONG_URI = "mem://" + "u" * 2000
MAX_BUMPS = 100_000


def build() -> Server:
    server = Server("notify", "1.0.0")
    server.add_resource("contents", LONG_URI, name="long")

    @server.tool()
    async def bump(count: int) -> float:
        """Notify `count` times that the resource changed; the seconds it took."""
        started = time.monotonic()
        for _ in range(min(max(count, 0), MAX_BUMPS)):
            await server.notify_resource_updated(LONG_URI)
        return time.monotonic() - started

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    build().run_http(host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
