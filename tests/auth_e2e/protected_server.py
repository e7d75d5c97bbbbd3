"""A protected MCP server for the OAuth end-to-end tests (test-only: the server side of MCP
authorization is a later issue, so none of this is in src/).

    python -m tests.auth_e2e.protected_server --port PORT --issuer URL

An mcpkit `Server` over Streamable HTTP (both eras) at http://127.0.0.1:PORT/mcp, behind an
ASGI middleware that accepts only the issuer's RFC 9068 JWT access tokens for this resource,
as bearer tokens or DPoP-bound (mcpkit's `JwtVerifier`: the issuer's JWKS found through its
metadata and cached). Otherwise it answers like an MCP resource server:

    no or bad token      401  WWW-Authenticate: Bearer scope="mcp:read", resource_metadata="…"
    `write`, no mcp:write 403  Bearer error="insufficient_scope", scope="mcp:read mcp:write", …

and serves its RFC 9728 protected-resource metadata (naming the issuer). Prints one line,
`serving on URL`, when it answers."""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from tests.client.oauth_server import mcp_server  # the same read/write tools

from mcpkit.auth.resource import (
    DPoPNonceRequired,
    InvalidToken,
    VerifierUnavailable,
    presented_token,
)
from mcpkit.server.authorization import JwtVerifier

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

READ_SCOPE = "mcp:read"
WRITE_SCOPE = "mcp:write"
METADATA_PATH = "/.well-known/oauth-protected-resource"
MAX_BODY_BYTES = 1 << 20
"""The middleware reads a request body to see which tool it calls: at most this much."""


class Protected:
    """The ASGI middleware in front of the MCP app (see the module docstring)."""

    def __init__(self, app: Any, verifier: JwtVerifier, base: str, issuer: str) -> None:
        self.app = app
        self.verifier = verifier
        self.issuer = issuer
        self.resource = f"{base}/mcp"
        self.metadata_url = f"{base}{METADATA_PATH}/mcp"

    async def shutdown(self) -> None:  # run_http's wrap contract: forward it
        await self.app.shutdown()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if path in (METADATA_PATH, f"{METADATA_PATH}/mcp"):
            await respond(send, 200, {"resource": self.resource,
                                      "authorization_servers": [self.issuer],
                                      "scopes_supported": [READ_SCOPE, WRITE_SCOPE],
                                      "bearer_methods_supported": ["header"]})
            return
        if not path.startswith("/mcp"):
            await respond(send, 404, {"error": "not found"})
            return
        messages, body = await read_all(receive)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        authorization = headers.get("authorization", "")
        granted = await self.granted_scopes(
            scope["method"], f"http://{headers.get('host', '')}{path}", authorization,
            headers.get("dpop"))
        dpop = authorization.lower().startswith("dpop ")
        if granted is None:
            error = "invalid_token" if authorization else None
            await self.refuse(send, 401, error, READ_SCOPE, dpop=dpop)
            return
        if calls_tool(body, "write") and WRITE_SCOPE not in granted:
            await self.refuse(send, 403, "insufficient_scope", f"{READ_SCOPE} {WRITE_SCOPE}",
                              dpop=dpop)
            return
        pending = iter(messages)

        async def replay() -> Message:
            return next(pending, None) or await receive()

        await self.app(scope, replay, send)

    async def granted_scopes(self, method: str, url: str, authorization: str,
                             proof: str | None) -> frozenset[str] | None:
        """The token's scopes, or None when it is missing, refused, or presented wrongly."""
        try:
            request = presented_token(method, url, [authorization] if authorization else [],
                                      [proof] if proof else [])
            return None if request is None else (await self.verifier.verify(request)).scopes
        except (InvalidToken, DPoPNonceRequired, VerifierUnavailable):
            return None

    async def refuse(self, send: Send, status: int, error: str | None, scopes: str, *,
                     dpop: bool = False) -> None:
        """A challenge in the scheme the request used (RFC 9449 §7.1 for DPoP)."""
        params = ([f'error="{error}"'] if error else []) + [
            f'scope="{scopes}"', f'resource_metadata="{self.metadata_url}"']
        if dpop:
            params.append('algs="ES256"')
        challenge = ("DPoP " if dpop else "Bearer ") + ", ".join(params)
        await respond(send, status, {"error": error or "unauthorized"},
                      [(b"www-authenticate", challenge.encode())])


async def read_all(receive: Receive) -> tuple[list[Message], bytes]:
    messages, body = [], b""
    while len(body) <= MAX_BODY_BYTES:
        message = await receive()
        messages.append(message)
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    return messages, body


def calls_tool(body: bytes, name: str) -> bool:
    try:
        message = json.loads(body) if body else None
    except ValueError:
        return False
    return (isinstance(message, dict) and message.get("method") == "tools/call"
            and isinstance(message.get("params"), dict) and message["params"].get("name") == name)


async def respond(send: Send, status: int, doc: dict[str, Any],
                  headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps(doc).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--issuer", required=True)
    args = parser.parse_args()
    base = f"http://127.0.0.1:{args.port}"
    verifier = JwtVerifier(args.issuer, f"{base}/mcp")

    mcp_server().run_http(port=args.port, log_level="warning",
                          wrap=lambda app: Protected(app, verifier, base, args.issuer),
                          on_ready=lambda url: print(f"serving on {url}", flush=True))


if __name__ == "__main__":
    main()
