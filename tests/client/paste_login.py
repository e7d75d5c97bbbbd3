"""A process that logs in with `--no-browser` paste: `python paste_login.py URL PORT [WAIT_S]`.

Runs `OAuth(redirect=LoopbackRedirect(paste=True, …)).login(URL)` with the real stdin and
stderr (the URL is printed on stderr, the final redirect URL read from stdin); prints
`logged-in` and the scopes on stdout when it worked."""

from __future__ import annotations

import sys

import anyio

from mcpkit.client.oauth import OAuth
from mcpkit.client.oauth_loopback import LoopbackRedirect


async def main(url: str, port: int, wait_s: float) -> None:
    redirect = LoopbackRedirect(paste=True, open_browser=False, ports=[port], timeout_s=wait_s)
    tokens = await OAuth(redirect=redirect).login(url)
    print("logged-in", tokens.scope or "", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) if sys.argv[3:] else 30.0)
