"""A stand-in for a browser (`$BROWSER` for Python's webbrowser): GET the authorization URL,
and follow its redirect to the loopback listener, as a browser does once the user has
logged in (tests/client/oauth_server.py's /authorize redirects at once). Loopback only."""

from __future__ import annotations

import http.client
import sys
import urllib.parse

MAX_REDIRECTS = 3
TIMEOUT_S = 10


def get(url: str) -> tuple[int, str]:
    parts = urllib.parse.urlsplit(url)
    if parts.hostname not in ("127.0.0.1", "::1", "localhost"):
        raise SystemExit(f"fake browser: not a loopback URL: {url}")
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=TIMEOUT_S)
    try:
        connection.request("GET", f"{parts.path}?{parts.query}")
        reply = connection.getresponse()
        reply.read()
        return reply.status, reply.getheader("Location") or ""
    finally:
        connection.close()


def main() -> None:
    url = sys.argv[1]
    for _ in range(MAX_REDIRECTS):
        status, location = get(url)
        if status not in (301, 302, 303, 307, 308):
            return
        url = location


if __name__ == "__main__":
    main()
