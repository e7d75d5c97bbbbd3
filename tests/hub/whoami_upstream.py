"""A protected MCP server for the hub's upstream-login tests: mcpkit's own resource server
(`ResourceAuth` + `JwtVerifier`) trusting one issuer, with a `whoami` tool that returns the
subject of the access token it was called with - so a test sees, at the upstream, whose
upstream login a call through the hub carried - and `token_claims`: that token's iss, aud,
client_id and sub as JSON (which issuer minted it, for whom: never the hub's own token).

    python tests/hub/whoami_upstream.py --issuer URL --port PORT

Serves http://127.0.0.1:PORT/mcp (the resource its tokens must name); scope `mcp:read`."""

from __future__ import annotations

import argparse
import json

from mcpkit import Server
from mcpkit.server.authorization import JwtVerifier
from mcpkit.server.context import Context
from mcpkit.server.resource_auth import ResourceAuth

SCOPE = "mcp:read"


def build() -> Server:
    server = Server("whoami", "1.0.0")

    @server.tool()
    def whoami(ctx: Context) -> str:
        """The subject of the caller's access token."""
        return ctx.auth.subject if ctx.auth is not None else "anonymous"

    @server.tool()
    def token_claims(ctx: Context) -> str:
        """The iss, aud, client_id and sub of the caller's access token, as JSON."""
        claims = ctx.auth.claims if ctx.auth is not None else {}
        return json.dumps({name: claims.get(name) for name in ("iss", "aud", "client_id", "sub")})

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--issuer", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    resource = f"http://127.0.0.1:{args.port}/mcp"
    auth = ResourceAuth(JwtVerifier(args.issuer, resource), resource=resource,
                        authorization_servers=[args.issuer], scopes_supported=[SCOPE],
                        required_scopes=[SCOPE])
    build().run_http(port=args.port, authorization=auth, log_level="warning")


if __name__ == "__main__":
    main()
