"""A small real OAuth authorization server and protected MCP server for the OAuth flow tests.

One ASGI app on 127.0.0.1 (served by tests.procs.serve_in_thread): RFC 9728 metadata, RFC 8414
metadata, DCR, /authorize (redirects at once), /token (PKCE S256 checked, resource checked,
refresh tokens rotated: a rotated one used again revokes its whole family, as RFC 9700
§4.14.2 has servers detect a stolen token), and /mcp: a mcpkit Server (Streamable HTTP,
HTTP+SSE, WebSocket) behind a bearer check (401 with a `WWW-Authenticate` challenge, on a
WebSocket handshake too; 403 insufficient_scope for the `write` tool without mcp:write).

Everything it issued or received is recorded so tests can look for leaks."""

from __future__ import annotations

import base64
import contextlib
import secrets
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import msgspec
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from mcpkit import Server


@dataclass
class Issued:
    scopes: list[str]
    expires_at: float
    jkt: str | None = None
    """The thumbprint of the DPoP key the token is bound to (None: a bearer token)."""


def dpop_jkt(proof: str | None) -> str | None:
    """The thumbprint of the key of a DPoP proof whose signature checks (RFC 9449 §4.3, the
    parts a binding test needs: a proof by that key), else None."""
    if not proof:
        return None
    from joserfc import jws
    from joserfc.jwk import ECKey

    try:
        header = jws.extract_compact(proof.encode()).protected
        key = ECKey.import_key(header["jwk"])
        jws.deserialize_compact(proof, key)
    except Exception:
        return None
    return str(key.thumbprint())


@dataclass
class AuthServer:
    base: str = ""
    token_lifetime_s: int = 3600
    iss_in_redirect: str | None = "correct"  # "correct", "wrong" or None (omitted)
    advertise_iss: bool | None = None
    """Whether the metadata advertises the iss parameter (None: when it is sent)."""
    reject_client_once: bool = False
    resource_path: str = "/mcp"
    """The protected resource is base + this ("": the whole origin, e.g. for HTTP+SSE)."""
    withheld: set[str] = field(default_factory=set)
    """Scopes the AS never grants, whatever is asked (a step-up that cannot succeed)."""
    clients: dict[str, str] = field(default_factory=dict)  # id -> secret
    redirect_uris: dict[str, list[str]] = field(default_factory=dict)  # id -> registered
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Client ID Metadata Documents by URL, as if fetched (any: CIMD is advertised)."""
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    access: dict[str, Issued] = field(default_factory=dict)
    refresh: dict[str, list[str]] = field(default_factory=dict)
    authorize_requests: list[dict[str, str]] = field(default_factory=list)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    registrations: int = 0
    refreshes: int = 0
    """Refresh-token grants answered with new tokens."""
    refresh_delay_s: float = 0.0
    """How long each refresh takes (widens the window in which other refreshers would race)."""
    refresh_failures: list[int] = field(default_factory=list)
    """HTTP statuses the next refresh requests are answered with, one each (500: a server
    fault that says nothing about the refresh token)."""
    refresh_jkt: dict[str, str] = field(default_factory=dict)
    """DPoP-bound refresh tokens (as RFC 9449 §5 has for public clients): token -> key."""
    families: dict[str, int] = field(default_factory=dict)
    """Refresh token (current or rotated away) -> its family (one per authorization)."""
    rotated: set[str] = field(default_factory=set)
    reuse_detected: int = 0
    metadata_requests: int = 0
    """GETs of a well-known metadata document (discovery)."""
    websocket_handshakes: int = 0
    registration_requests: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    secrets_seen: set[str] = field(default_factory=set)
    """Every token, code, verifier and client secret: none may appear in logs or errors."""

    @property
    def resource(self) -> str:
        return f"{self.base}{self.resource_path}"

    # --- metadata ------------------------------------------------------------------------

    def prm(self) -> dict[str, Any]:
        return {"resource": self.resource, "authorization_servers": [self.base],
                "scopes_supported": ["mcp:read"]}

    def as_metadata(self) -> dict[str, Any]:
        return {
            "issuer": self.base,
            "authorization_endpoint": f"{self.base}/authorize",
            "token_endpoint": f"{self.base}/token",
            "registration_endpoint": f"{self.base}/register",
            "scopes_supported": ["mcp:read", "mcp:write", "offline_access"],
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic"] + (
                ["none"] if self.documents else []),
            "client_id_metadata_document_supported": bool(self.documents),
            "authorization_response_iss_parameter_supported": (
                self.iss_in_redirect is not None if self.advertise_iss is None
                else self.advertise_iss),
        }

    # --- endpoints -----------------------------------------------------------------------

    async def register(self, request: Request) -> Response:
        body = msgspec.json.decode(await request.body())
        assert body["application_type"] == "native"
        assert "refresh_token" in body["grant_types"]
        self.registration_requests.append(body)
        self.registrations += 1
        client_id, secret = f"client-{self.registrations}", secrets.token_urlsafe(16)
        self.clients[client_id] = secret
        self.redirect_uris[client_id] = list(body["redirect_uris"])
        self.secrets_seen.add(secret)
        return JSONResponse({"client_id": client_id, "client_secret": secret,
                             "token_endpoint_auth_method": "client_secret_basic",
                             "redirect_uris": body["redirect_uris"]}, status_code=201)

    async def authorize(self, request: Request) -> Response:
        q = dict(request.query_params)
        self.authorize_requests.append(q)
        assert q["response_type"] == "code" and q["code_challenge_method"] == "S256"
        assert q["resource"] == self.resource
        document = self.documents.get(q["client_id"])
        allowed = document["redirect_uris"] if document else self.redirect_uris[q["client_id"]]
        if q["redirect_uri"] not in allowed:  # exact match
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        code = secrets.token_urlsafe(16)
        self.secrets_seen.add(code)
        self.codes[code] = q
        back = {"code": code, "state": q["state"]}
        if self.iss_in_redirect == "correct":
            back["iss"] = self.base
        elif self.iss_in_redirect == "wrong":
            back["iss"] = "https://evil.example"
        return RedirectResponse(f"{q['redirect_uri']}?{urllib.parse.urlencode(back)}", 302)

    async def token(self, request: Request) -> Response:
        form = dict((await request.form()).items())
        self.token_requests.append({k: str(v) for k, v in form.items()})
        jkt = dpop_jkt(request.headers.get("dpop"))
        client_id = self._client(request, form)
        if client_id is None or self.reject_client_once:
            self.reject_client_once = False
            self.clients.clear()
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        if form.get("resource") != self.resource:
            return JSONResponse({"error": "invalid_target"}, status_code=400)
        if form["grant_type"] == "authorization_code":
            asked = self.codes.pop(str(form["code"]), None)
            verifier = str(form["code_verifier"])
            self.secrets_seen.add(verifier)
            if asked is None or create_s256_code_challenge(verifier) != asked["code_challenge"] \
                    or form.get("redirect_uri") != asked["redirect_uri"]:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            scopes = [s for s in asked.get("scope", "").split() if s not in self.withheld]
        elif form["grant_type"] == "refresh_token":
            presented = str(form["refresh_token"])
            await anyio.sleep(self.refresh_delay_s)
            if self.refresh_failures:
                return JSONResponse({"error": "server_error"},
                                    status_code=self.refresh_failures.pop(0))
            if self.refresh_jkt.get(presented, jkt) != jkt:  # bound to another key
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            with self._lock:
                if presented in self.rotated:  # reuse of a rotated token: revoke the family
                    self.reuse_detected += 1
                    family = self.families[presented]
                    for token in [t for t, f in self.families.items() if f == family]:
                        self.refresh.pop(token, None)
                    return JSONResponse({"error": "invalid_grant"}, status_code=400)
                old = self.refresh.pop(presented, None)  # rotated: single use
                if old is None:
                    return JSONResponse({"error": "invalid_grant"}, status_code=400)
                self.rotated.add(presented)
                self.refreshes += 1
            scopes = old
        else:
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self.secrets_seen |= {access, refresh}
        self.access[access] = Issued(scopes, time.time() + self.token_lifetime_s, jkt)
        self.refresh[refresh] = scopes
        if jkt is not None:
            self.refresh_jkt[refresh] = jkt
        previous = str(form.get("refresh_token", ""))
        self.families[refresh] = self.families.get(previous, len(self.families) + 1)
        return JSONResponse({"access_token": access, "token_type": "DPoP" if jkt else "Bearer",
                             "expires_in": self.token_lifetime_s, "refresh_token": refresh,
                             "scope": " ".join(scopes)},
                            headers={"Cache-Control": "no-store"})

    def _client(self, request: Request, form: dict[str, Any]) -> str | None:
        header = request.headers.get("authorization", "")
        if not header.startswith("Basic "):
            form_id = str(form.get("client_id", ""))
            return form_id if form_id in self.documents else None  # a public CIMD client
        client_id, _, secret = base64.b64decode(header[6:]).decode().partition(":")
        return client_id if self.clients.get(client_id) == secret else None

    # --- the protected resource ----------------------------------------------------------

    def challenge(self, status: int, error: str, scope: str | None = None) -> Response:
        params = [f'error="{error}"'] if error else []
        if scope:
            params.append(f'scope="{scope}"')
        params.append(
            f'resource_metadata="{self.base}/.well-known/oauth-protected-resource'
            f'{self.resource_path}"')
        return JSONResponse({"error": error or "unauthorized"}, status_code=status,
                            headers={"WWW-Authenticate": "Bearer " + ", ".join(params)})

    def check(self, authorization: str, body: bytes, proof: str | None = None) -> Response | None:
        scheme, _, token = authorization.partition(" ")
        issued = self.access.get(token)
        if issued is None or issued.expires_at <= time.time():
            return self.challenge(401, "invalid_token" if token else "")
        if issued.jkt is not None and (scheme != "DPoP" or dpop_jkt(proof) != issued.jkt):
            return self.challenge(401, "invalid_token")  # a bound token without its key's proof
        if issued.jkt is None and scheme != "Bearer":
            return self.challenge(401, "invalid_token")
        try:
            message = msgspec.json.decode(body) if body else {}
        except msgspec.DecodeError:
            message = {}
        wants_write = (isinstance(message, dict) and message.get("method") == "tools/call"
                       and message.get("params", {}).get("name") == "write")
        if wants_write and "mcp:write" not in issued.scopes:
            return self.challenge(403, "insufficient_scope", "mcp:write")
        return None


def mcp_server() -> Server:
    server = Server("protected")

    @server.tool()
    def read() -> str:
        """Needs mcp:read (any valid token)."""
        return "read ok"

    @server.tool()
    def write() -> str:
        """Needs mcp:write."""
        return "write ok"

    return server


def app(auth: AuthServer) -> Any:
    """The ASGI app: OAuth endpoints, metadata, and /mcp behind the bearer check."""
    mcp = mcp_server().asgi_app()
    routes = {
        ("GET", "/.well-known/oauth-protected-resource/mcp"): lambda r: _json(auth.prm()),
        ("GET", "/.well-known/oauth-protected-resource"): lambda r: _json(auth.prm()),
        ("GET", "/.well-known/oauth-authorization-server"): lambda r: _json(auth.as_metadata()),
        ("POST", "/register"): auth.register,
        ("GET", "/authorize"): auth.authorize,
        ("POST", "/token"): auth.token,
    }

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":  # WebSocket /mcp: the bearer check on the handshake
            await _websocket(auth, mcp, scope, receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path.startswith(("/mcp", "/sse", "/messages")):  # Streamable HTTP, HTTP+SSE
            messages, body = [], b""
            while True:
                message = await receive()
                messages.append(message)
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            refusal = auth.check(headers.get("authorization", ""), body, headers.get("dpop"))
            if refusal is not None:
                await refusal(scope, receive, send)
                return
            pending = iter(messages)

            async def replay() -> Any:
                return next(pending, None) or await receive()

            await mcp(scope, replay, send)
            return
        if path.startswith("/.well-known/"):
            auth.metadata_requests += 1
        handler = routes.get((scope["method"], path))
        request = Request(scope, receive)
        response = Response(status_code=404) if handler is None else await _call(handler, request)
        await response(scope, receive, send)

    return asgi


async def _websocket(auth: AuthServer, mcp: Any, scope: dict[str, Any], receive: Any,
                     send: Any) -> None:
    """A refused handshake is answered with the HTTP 401 and its challenge (the ASGI
    `websocket.http.response` extension); an accepted one goes to the MCP app."""
    auth.websocket_handshakes += 1
    headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
    refusal = auth.check(headers.get("authorization", ""), b"")
    if refusal is None:
        await mcp(scope, receive, send)
        return
    await receive()  # websocket.connect
    await send({"type": "websocket.http.response.start", "status": refusal.status_code,
                "headers": refusal.raw_headers})
    await send({"type": "websocket.http.response.body", "body": refusal.body})


async def _call(handler: Any, request: Request) -> Response:
    result = handler(request)
    return await result if hasattr(result, "__await__") else result  # type: ignore[no-any-return]


def _json(doc: dict[str, Any]) -> Response:
    return JSONResponse(doc)


@contextlib.contextmanager
def running(**serve: Any) -> Iterator[AuthServer]:
    """A fresh `AuthServer` served on 127.0.0.1 for the block (`serve`: serve_in_thread's
    options, e.g. `ws=` for the WebSocket tests), its `base` set."""
    from tests.procs import serve_in_thread

    auth = AuthServer()
    with serve_in_thread(app(auth), **{"name": "oauth", **serve}) as base:
        auth.base = base
        yield auth
