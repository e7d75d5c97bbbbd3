"""A protected server for the resource-gate tests: a token verifier that knows a few tokens
(and simulates DPoP nonces), and a `Server` with tools, resources and prompts of several
scopes whose `whoami` tool reports `ctx.auth`."""

from __future__ import annotations

import time
from typing import Any

from mcpkit import Server
from mcpkit.auth.resource import (
    AuthInfo,
    DPoPNonceRequired,
    InvalidToken,
    TokenRequest,
    TokenVerifier,
)
from mcpkit.server.context import Context
from mcpkit.server.resource_auth import ResourceAuth

RESOURCE = "https://mcp.example.test/mcp"
METADATA_URL = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"
ISSUER = "https://issuer.example.test"
NONCE = "n-0001"
BRIEF_S = 1.0
"""The life of the token "tok-brief", from when it is verified."""

ALICE = AuthInfo(subject="alice", client_id="app-1", scopes=frozenset({"mcp"}),
                 claims={"iss": ISSUER, "sub": "alice", "email": "alice@example.test"})
ADMIN = AuthInfo(subject="root", client_id="app-2", scopes=frozenset({"mcp", "admin"}),
                 claims={"iss": ISSUER, "sub": "root"})
BOB = AuthInfo(subject="bob", client_id="app-1", scopes=frozenset({"mcp"}),
               claims={"iss": ISSUER, "sub": "bob"})
NO_MCP = AuthInfo(subject="carol", scopes=frozenset({"other"}), claims={"iss": ISSUER})
BOUND = AuthInfo(subject="dave", scopes=frozenset({"mcp"}), claims={"iss": ISSUER},
                 jkt="thumbprint")
TOKENS = {"tok-alice": ALICE, "tok-admin": ADMIN, "tok-bob": BOB, "tok-carol": NO_MCP,
          "tok-dpop": BOUND}


class KnownTokens:
    """A `TokenVerifier` over a dict of tokens. A DPoP-bound token (`jkt`) needs the DPoP
    scheme and a proof; the proof "proof-<NONCE>" passes, any other asks for the nonce.
    Records what each request presented (scheme, method, URL), never the token."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []

    async def verify(self, request: TokenRequest) -> AuthInfo:
        self.seen.append((request.scheme, request.method, request.url))
        if request.token == "tok-brief":  # a token that expires a second from now
            return AuthInfo(subject="erin", scopes=frozenset({"mcp"}), claims={"iss": ISSUER},
                            expires_at=time.time() + BRIEF_S)
        info = TOKENS.get(request.token)
        if info is None:
            raise InvalidToken("the token is not active")
        if info.jkt is not None:
            if request.scheme != "DPoP" or request.dpop_proof is None:
                raise InvalidToken("a DPoP-bound token needs the DPoP scheme and a proof")
            if request.dpop_proof != f"proof-{NONCE}":
                raise DPoPNonceRequired(NONCE)
        return info


def protection(verifier: TokenVerifier, **options: Any) -> ResourceAuth:
    settings: dict[str, Any] = {
        "resource": RESOURCE, "authorization_servers": [ISSUER],
        "scopes_supported": ["mcp", "admin"], "required_scopes": ["mcp"],
        "resource_name": "Guarded test server", "dpop_algs": ["ES256"],
    }
    return ResourceAuth(verifier, **{**settings, **options})


def build_guarded_server() -> Server:
    server = Server("guarded", "1.0.0")

    @server.tool()
    def whoami(ctx: Context) -> dict[str, Any]:
        """Who the server thinks is calling."""
        auth = ctx.auth
        assert auth is not None
        return {"subject": auth.subject, "client_id": auth.client_id,
                "scopes": sorted(auth.scopes), "email": auth.claims.get("email"),
                "principal": ctx.call.principal}

    @server.tool(scopes=["admin"])
    def wipe() -> str:
        """Only for admins."""
        return "wiped"

    @server.resource("res://public")
    def public() -> str:
        return "for everyone"

    @server.resource("res://secret", scopes=["admin"])
    def secret() -> str:
        return "for admins"

    @server.resource("vault://{item}", scopes=["admin"])
    def vault(item: str) -> str:
        return f"vault {item}"

    @server.prompt()
    def hello() -> str:
        return "hello"

    @server.prompt(scopes=["admin"])
    def audit() -> str:
        return "audit everything"

    @server.completion()
    def complete(argument: str, value: str, context: dict[str, str]) -> list[str]:
        return [value + "1"]

    return server
