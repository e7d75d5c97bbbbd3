"""A server whose `notifications/roots/list_changed` handling awaits, run as a real process:

    python tests/transports/roots_callback_server.py --port PORT

Its roots callback sleeps 30 s (standing in for one that asks the client `roots/list` and
waits for the answer); the `held` tool tells how many callbacks run now and at most so far.
"""

from __future__ import annotations

import argparse

import anyio

from mcpkit import Server
from mcpkit.server.connection import Connection

CALLBACK_S = 30.0


def build() -> Server:
    server = Server("roots-callback", "1.0.0")
    running = {"now": 0, "peak": 0}

    async def slow_roots_changed(connection: Connection) -> None:
        running["now"] += 1
        running["peak"] = max(running["peak"], running["now"])
        try:
            await anyio.sleep(CALLBACK_S)
        finally:
            running["now"] -= 1

    server.roots_changed_callbacks.append(slow_roots_changed)

    @server.tool()
    async def held() -> dict[str, int]:
        """How many roots callbacks run now, and the most that ran at once."""
        return dict(running)

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    build().run_http(host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
