"""A small authorization server for the verifier tests, served for real on 127.0.0.1
(uvicorn in a thread, tests/procs.py): RFC 8414 metadata, a JWKS whose keys, size and speed a
test sets, and an RFC 7662 introspection endpoint that checks client_secret_basic. It counts
the requests each endpoint gets, so a test can tell how often a verifier asked."""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import anyio
from tests.auth.resource_tokens import Signer
from tests.procs import serve_in_thread

Scope = dict[str, Any]


@dataclass
class AuthServer:
    signers: list[Signer] = field(default_factory=list)
    jwks_body: bytes | None = None
    """When set, served as the JWKS instead of the signers' keys."""
    jwks_delay_s: float = 0.0
    introspection: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Token → the answer; any other token is `{"active": false}`."""
    introspection_delay_s: float = 0.0
    introspections_in_flight: int = 0
    most_introspections_in_flight: int = 0
    client: tuple[str, str] = ("rs", "rs-secret")
    hits: Counter[str] = field(default_factory=Counter)
    issuer: str = ""
    introspected_forms: list[dict[str, list[str]]] = field(default_factory=list)

    def jwks_uri(self) -> str:
        return f"{self.issuer}/jwks"

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        path = scope["path"]
        self.hits[path] += 1
        if path == "/.well-known/oauth-authorization-server":
            await self._json(send, 200, json.dumps({
                "issuer": self.issuer, "jwks_uri": self.jwks_uri(),
                "introspection_endpoint": f"{self.issuer}/introspect",
                "token_endpoint": f"{self.issuer}/token"}).encode())
        elif path == "/jwks":
            if self.jwks_delay_s:
                await anyio.sleep(self.jwks_delay_s)
            body = self.jwks_body or json.dumps(
                {"keys": [s.public_jwk() for s in self.signers]}).encode()
            await self._json(send, 200, body)
        elif path == "/introspect":
            await self._introspect(scope, receive, send)
        else:
            await self._json(send, 404, b"{}")

    async def _introspect(self, scope: Scope, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = dict(scope["headers"])
        expected = "Basic " + base64.b64encode(":".join(self.client).encode()).decode()
        if headers.get(b"authorization", b"").decode() != expected:
            await self._json(send, 401, b'{"error": "invalid_client"}')
            return
        self.introspections_in_flight += 1
        self.most_introspections_in_flight = max(self.most_introspections_in_flight,
                                                 self.introspections_in_flight)
        try:
            await anyio.sleep(self.introspection_delay_s)
        finally:
            self.introspections_in_flight -= 1
        form = parse_qs(body.decode())
        self.introspected_forms.append(form)
        answer = self.introspection.get(form["token"][0], {"active": False})
        await self._json(send, 200, json.dumps(answer).encode())

    @staticmethod
    async def _json(send: Any, status: int, body: bytes) -> None:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


@contextmanager
def running_auth_server(*signers: Signer) -> Iterator[AuthServer]:
    server = AuthServer(signers=list(signers))
    with serve_in_thread(server, name="test-as") as base:
        server.issuer = base
        yield server
