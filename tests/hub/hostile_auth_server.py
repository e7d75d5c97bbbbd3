"""A hostile OAuth-protected upstream for the upstream-login tests, in the test's own event
loop: it answers 401 with a challenge, publishes protected-resource metadata naming itself as
the authorization server, and then misbehaves as `mode` says:

    "huge-metadata"      the AS metadata is over the hub's document limit
    "malformed-metadata" the AS metadata is not JSON
    "bad-registration"   DCR answers a body that is no registration
    "huge-token"         the token endpoint answers over the limit
    "malformed-token"    the token endpoint answers text that is not JSON
    "ok"                 well-formed answers (a token endpoint that refuses: invalid_grant)

`mode` may be changed while it runs (one server for all the cases)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiohttp import web
from tests.procs import free_port, serving

from mcpkit.auth.metadata import MAX_DOCUMENT_BYTES

OVERSIZED = b'{"x": "' + b"a" * (MAX_DOCUMENT_BYTES + 1024) + b'"}'


@dataclass
class Hostile:
    base: str
    mode: str = "ok"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"


def authorization_server_metadata(base: str) -> dict[str, object]:
    """RFC 8414 metadata of a small authorization server at `base` (code + PKCE, DCR, public
    clients)."""
    return {"issuer": base, "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": f"{base}/token", "registration_endpoint": f"{base}/register",
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "response_types_supported": ["code"]}


def add_protected_mcp(app: web.Application, base: str, *, scope: str | None = None,
                      methods: tuple[str, ...] = ("POST",)) -> None:
    """An OAuth-protected MCP endpoint at `base`/mcp that names `base` its authorization
    server: every request (by `methods`) is 401 with an RFC 9728 challenge (and `scope`),
    and its protected-resource metadata is at the well-known path."""
    prm_url = f"{base}/.well-known/oauth-protected-resource/mcp"
    challenge = f'Bearer resource_metadata="{prm_url}"' + (f', scope="{scope}"' if scope else "")

    async def mcp(_: web.Request) -> web.Response:
        return web.json_response({"error": "unauthorized"}, status=401,
                                 headers={"WWW-Authenticate": challenge})

    async def prm(_: web.Request) -> web.Response:
        return web.json_response({"resource": f"{base}/mcp", "authorization_servers": [base]})

    for method in methods:
        if method == "GET":
            app.router.add_get("/mcp", mcp)  # (answers HEAD too)
        else:
            app.router.add_route(method, "/mcp", mcp)
    app.router.add_get("/.well-known/oauth-protected-resource/mcp", prm)


@contextlib.asynccontextmanager
async def hostile_server() -> AsyncIterator[Hostile]:
    port = free_port()
    hostile = Hostile(f"http://127.0.0.1:{port}")

    async def as_metadata(_: web.Request) -> web.Response:
        if hostile.mode == "huge-metadata":
            return web.Response(body=OVERSIZED, content_type="application/json")
        if hostile.mode == "malformed-metadata":
            return web.Response(text="{this is not json", content_type="application/json")
        return web.json_response(authorization_server_metadata(hostile.base))

    async def register(_: web.Request) -> web.Response:
        if hostile.mode == "bad-registration":
            return web.Response(text=json.dumps(["no", "client"]), status=201,
                                content_type="application/json")
        return web.json_response({"client_id": "hostile-client",
                                  "token_endpoint_auth_method": "none"}, status=201)

    async def token(_: web.Request) -> web.Response:
        if hostile.mode == "huge-token":
            return web.Response(body=OVERSIZED, content_type="application/json")
        if hostile.mode == "malformed-token":
            return web.Response(text="<html>oops</html>", content_type="application/json")
        return web.json_response({"error": "invalid_grant"}, status=400)

    app = web.Application()
    add_protected_mcp(app, hostile.base, scope="read")
    app.router.add_get("/.well-known/oauth-authorization-server", as_metadata)
    app.router.add_post("/register", register)
    app.router.add_post("/token", token)
    async with serving(app, port):
        yield hostile
