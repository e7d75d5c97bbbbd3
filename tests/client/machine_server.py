"""A small real authorization server, enterprise IdP and protected MCP server for the machine
grant and DPoP tests (tests/client/test_oauth_machine.py).

One ASGI app on 127.0.0.1 (served by tests.procs.serve_in_thread):

    /.well-known/oauth-protected-resource[/mcp], /.well-known/oauth-authorization-server
    /authorize  the authorization-code flow (redirects at once; PKCE S256 checked at /token)
    /token      authorization_code and refresh_token (for `OAuth(dpop=True)`),
                client_credentials (client_secret_basic, client_secret_post, private_key_jwt
                verified with the client's public key: iss = sub = client id, aud = issuer)
                and jwt-bearer (a workload JWT signed by the workload issuer's key, or an
                ID-JAG signed by the IdP); with `dpop`, a proof is required (verified with
                joserfc: signature by its own jwk, typ, htm, htu, iat, a jti never seen
                before, the nonce when `as_nonce` is set) and the token is bound (token_type
                DPoP, its jkt kept)
    /idp/token  the IdP's RFC 8693 token exchange: an ID token in, an ID-JAG out
    /mcp        a mcpkit Server behind the token check: Bearer, or for a bound token
                `Authorization: DPoP` with a proof for this method and URL, `ath` the token's
                hash, the token's jkt, a fresh jti, and the nonce when `rs_nonce` is set

Everything issued or received is recorded, so tests can look for leaks and count requests.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from authlib.oauth2.rfc7636 import create_s256_code_challenge
from joserfc import jws, jwt
from joserfc.jwk import ECKey
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from tests.client.oauth_server import mcp_server

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"


def sign(key: ECKey, claims: dict[str, Any], typ: str = "JWT") -> str:
    return jwt.encode({"alg": "ES256", "typ": typ}, claims, key, algorithms=["ES256"])


def b64_sha256(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(
        b"=").decode()


@dataclass
class Bound:
    jkt: str | None
    expires_at: float


@dataclass
class MachineServer:
    base: str = ""
    auth_methods: list[str] = field(default_factory=lambda: ["client_secret_basic"])
    client_secrets: dict[str, str] = field(default_factory=dict)
    client_keys: dict[str, ECKey] = field(default_factory=dict)
    workload_key: ECKey = field(default_factory=lambda: ECKey.generate_key("P-256"))
    idp_key: ECKey = field(default_factory=lambda: ECKey.generate_key("P-256"))
    token_lifetime_s: int = 3600
    dpop: bool = False
    as_nonce: str | None = None
    rs_nonce: str | None = None
    nonce_header_override: str | None = None
    """Sent as the DPoP-Nonce of every nonce challenge instead of the nonce (hostile tests)."""
    token_body_override: bytes | None = None
    """Served as every successful token response's body (hostile tests)."""
    access: dict[str, Bound] = field(default_factory=dict)
    codes: dict[str, dict[str, str]] = field(default_factory=dict)
    refresh_tokens: dict[str, bool] = field(default_factory=dict)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    token_headers: list[dict[str, str]] = field(default_factory=list)
    idp_requests: list[dict[str, str]] = field(default_factory=list)
    proofs: list[dict[str, Any]] = field(default_factory=list)
    """The claims of every DPoP proof accepted, token endpoint and resource alike."""
    jtis: set[str] = field(default_factory=set)
    nonce_challenges: dict[str, int] = field(default_factory=lambda: {"as": 0, "rs": 0})
    resource_requests: list[tuple[str, str]] = field(default_factory=list)
    """(method, Authorization scheme) of every /mcp request that carried a token."""
    secrets_seen: set[str] = field(default_factory=set)

    resource_path: str = "/mcp"
    """The protected resource is base + this ("": the whole origin, e.g. for HTTP+SSE)."""

    @property
    def resource(self) -> str:
        return f"{self.base}{self.resource_path}"

    @property
    def token_endpoint(self) -> str:
        return f"{self.base}/token"

    def prm(self) -> dict[str, Any]:
        return {"resource": self.resource, "authorization_servers": [self.base]}

    def as_metadata(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "issuer": self.base,
            "authorization_endpoint": f"{self.base}/authorize",
            "token_endpoint": self.token_endpoint,
            "response_types_supported": ["code"],
            "grant_types_supported": ["client_credentials", JWT_BEARER, "authorization_code",
                                      "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": self.auth_methods,
            "token_endpoint_auth_signing_alg_values_supported": ["ES256"],
        }
        if self.dpop:
            doc["dpop_signing_alg_values_supported"] = ["ES256"]
        return doc

    def id_token(self, subject: str = "alice@example.com") -> str:
        """An ID token the IdP issued to the user (what EnterpriseGrant starts from)."""
        now = int(time.time())
        token = sign(self.idp_key, {"iss": f"{self.base}/idp", "sub": subject,
                                    "aud": "idp-client", "iat": now, "exp": now + 600})
        self.secrets_seen.add(token)
        return token

    def workload_jwt(self, audience: str | None = None, lifetime_s: int = 300) -> str:
        now = int(time.time())
        token = sign(self.workload_key, {
            "iss": "https://workload.example", "sub": "workload-1",
            "aud": self.base if audience is None else audience,
            "iat": now, "exp": now + lifetime_s, "jti": secrets.token_urlsafe(8)})
        self.secrets_seen.add(token)
        return token

    def revoke_all(self) -> None:
        self.access.clear()

    # --- DPoP --------------------------------------------------------------------------

    def check_proof(self, proof: str | None, method: str, url: str, nonce: str | None,
                    access_token: str | None = None) -> tuple[dict[str, Any], str] | str:
        """(claims, jkt) of a valid proof, else the reason it is not."""
        if not proof:
            return "no DPoP proof"
        try:
            header = jws.extract_compact(proof.encode()).protected
            if header.get("typ") != "dpop+jwt" or "d" in header.get("jwk", {}):
                return "bad proof header"
            key = ECKey.import_key(header["jwk"])
            claims = jwt.decode(proof, key, algorithms=["ES256"]).claims
        except Exception as exc:
            return f"bad proof: {type(exc).__name__}"
        if claims.get("htm") != method or claims.get("htu") != url:
            return "htm/htu mismatch"
        if abs(time.time() - int(claims.get("iat", 0))) > 60:
            return "iat out of window"
        if claims.get("jti") in self.jtis:
            return "jti replayed"
        if nonce is not None and claims.get("nonce") != nonce:
            return "use_dpop_nonce"
        if access_token is not None and claims.get("ath") != b64_sha256(access_token):
            return "ath mismatch"
        self.jtis.add(str(claims["jti"]))
        self.proofs.append(claims)
        return claims, key.thumbprint()

    def nonce_header(self, nonce: str) -> str:
        return self.nonce_header_override if self.nonce_header_override is not None else nonce

    # --- the token endpoint ------------------------------------------------------------

    async def token(self, request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        self.token_requests.append(form)
        self.token_headers.append(dict(request.headers))
        jkt = None
        if self.dpop:
            checked = self.check_proof(request.headers.get("dpop"), "POST",
                                       self.token_endpoint, self.as_nonce)
            if checked == "use_dpop_nonce":
                self.nonce_challenges["as"] += 1
                assert self.as_nonce is not None
                return JSONResponse({"error": "use_dpop_nonce"}, status_code=400, headers={
                    "DPoP-Nonce": self.nonce_header(self.as_nonce)})
            if isinstance(checked, str):
                return JSONResponse({"error": "invalid_dpop_proof",
                                     "error_description": checked}, status_code=400)
            jkt = checked[1]
        client = self._client(request, form)
        if form.get("resource") != self.resource:
            return JSONResponse({"error": "invalid_target"}, status_code=400)
        if form.get("grant_type") == "client_credentials":
            if client is None:
                return JSONResponse({"error": "invalid_client"}, status_code=401)
        elif form.get("grant_type") == JWT_BEARER:
            if not self._assertion_ok(form.get("assertion", ""), client):
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
        elif form.get("grant_type") == "authorization_code":
            asked = self.codes.pop(form.get("code", ""), None)
            verifier = form.get("code_verifier", "")
            self.secrets_seen.add(verifier)
            if (client is None or asked is None
                    or create_s256_code_challenge(verifier) != asked["code_challenge"]):
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
        elif form.get("grant_type") == "refresh_token":
            if client is None or self.refresh_tokens.pop(form.get("refresh_token", ""),
                                                         None) is None:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
        else:
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self.secrets_seen |= {access, refresh}
        self.refresh_tokens[refresh] = True
        self.access[access] = Bound(jkt, time.time() + self.token_lifetime_s)
        body = self.token_body_override
        if body is not None:
            return Response(body, media_type="application/json")
        return JSONResponse({"access_token": access, "expires_in": self.token_lifetime_s,
                             "token_type": "DPoP" if jkt else "Bearer",
                             **({"refresh_token": refresh} if form["grant_type"] in (
                                 "authorization_code", "refresh_token") else {})},
                            headers={"Cache-Control": "no-store"})

    def _client(self, request: Request, form: dict[str, str]) -> str | None:
        """The authenticated client id (None: none or a wrong one)."""
        header = request.headers.get("authorization", "")
        if header.startswith("Basic "):
            raw_id, _, raw_secret = base64.b64decode(header[6:]).decode().partition(":")
            client_id = urllib.parse.unquote_plus(raw_id)
            secret = urllib.parse.unquote_plus(raw_secret)
            return client_id if self.client_secrets.get(client_id) == secret else None
        if "client_secret" in form:
            client_id = form.get("client_id", "")
            return client_id if self.client_secrets.get(client_id) == form[
                "client_secret"] else None
        if "client_assertion" in form:
            assertion = form["client_assertion"]
            try:
                unverified = jws.extract_compact(assertion.encode()).payload
                import json
                client_id = json.loads(unverified)["iss"]
                claims = jwt.decode(assertion, self.client_keys[client_id],
                                    algorithms=["ES256"]).claims
            except Exception:
                return None
            ok = (claims["sub"] == client_id and claims["aud"] == self.base
                  and claims["exp"] > time.time())
            return client_id if ok else None
        return form.get("client_id")  # a public client names itself

    def _assertion_ok(self, assertion: str, client: str | None) -> bool:
        try:
            header = jws.extract_compact(assertion.encode()).protected
            if header.get("typ") == "oauth-id-jag+jwt":  # enterprise: the IdP's ID-JAG
                claims = jwt.decode(assertion, self.idp_key, algorithms=["ES256"]).claims
                return (claims["aud"] == self.base and claims["client_id"] == client
                        and claims["resource"] == self.resource)
            claims = jwt.decode(assertion, self.workload_key, algorithms=["ES256"]).claims
        except Exception:
            return False
        return claims["aud"] == self.base and claims["exp"] > time.time()

    async def authorize(self, request: Request) -> Response:
        """The authorization-code flow's endpoint, redirecting at once (no user here)."""
        q = dict(request.query_params)
        assert q["code_challenge_method"] == "S256" and q["resource"] == self.resource
        code = secrets.token_urlsafe(16)
        self.secrets_seen.add(code)
        self.codes[code] = q
        back = urllib.parse.urlencode({"code": code, "state": q["state"], "iss": self.base})
        return RedirectResponse(f"{q['redirect_uri']}?{back}", 302)

    async def idp_token(self, request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        self.idp_requests.append(form)
        try:
            claims = jwt.decode(form["subject_token"], self.idp_key,
                                algorithms=["ES256"]).claims
        except Exception:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        if (form.get("grant_type") != TOKEN_EXCHANGE or form.get("requested_token_type") != ID_JAG
                or form.get("audience") != self.base):
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        now = int(time.time())
        id_jag = sign(self.idp_key, {
            "iss": f"{self.base}/idp", "sub": claims["sub"], "aud": form["audience"],
            "resource": form["resource"], "client_id": "xaa-client", "iat": now,
            "exp": now + 300, "jti": secrets.token_urlsafe(8)}, typ="oauth-id-jag+jwt")
        self.secrets_seen.add(id_jag)
        return JSONResponse({"access_token": id_jag, "issued_token_type": ID_JAG,
                             "token_type": "N_A", "expires_in": 300})

    # --- the protected resource --------------------------------------------------------

    def check(self, method: str, url: str, headers: dict[str, str]) -> Response | None:
        authorization = headers.get("authorization", "")
        scheme, _, token = authorization.partition(" ")
        bound = self.access.get(token)
        if bound is None or bound.expires_at <= time.time():
            return self._challenge("invalid_token" if token else None)
        self.resource_requests.append((method, scheme))
        if bound.jkt is None:
            return None if scheme == "Bearer" else self._challenge("invalid_token")
        if scheme != "DPoP":
            return self._challenge("invalid_token")
        checked = self.check_proof(headers.get("dpop"), method, url, self.rs_nonce,
                                   access_token=token)
        if checked == "use_dpop_nonce":
            self.nonce_challenges["rs"] += 1
            assert self.rs_nonce is not None
            return JSONResponse({"error": "use_dpop_nonce"}, status_code=401, headers={
                "WWW-Authenticate": 'DPoP error="use_dpop_nonce"',
                "DPoP-Nonce": self.nonce_header(self.rs_nonce)})
        if isinstance(checked, str) or checked[1] != bound.jkt:
            return self._challenge("invalid_dpop_proof")
        return None

    def _challenge(self, error: str | None) -> Response:
        params = [f'error="{error}"'] if error else []
        params.append(f'resource_metadata="{self.base}/.well-known/oauth-protected-resource'
                      f'{self.resource_path}"')
        scheme = "DPoP" if self.dpop else "Bearer"
        return JSONResponse({"error": error or "unauthorized"}, status_code=401,
                            headers={"WWW-Authenticate": f"{scheme} " + ", ".join(params)})


def app(server: MachineServer) -> Any:
    """The ASGI app: OAuth endpoints, the IdP, metadata, and /mcp behind the token check."""
    mcp = mcp_server().asgi_app()
    routes = {
        ("GET", "/.well-known/oauth-protected-resource/mcp"): lambda r: JSONResponse(
            server.prm()),
        ("GET", "/.well-known/oauth-protected-resource"): lambda r: JSONResponse(server.prm()),
        ("GET", "/.well-known/oauth-authorization-server"): lambda r: JSONResponse(
            server.as_metadata()),
        ("POST", "/token"): server.token,
        ("GET", "/authorize"): server.authorize,
        ("POST", "/idp/token"): server.idp_token,
    }

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path.startswith(("/mcp", "/sse", "/messages")):  # Streamable HTTP, HTTP+SSE
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            refusal = server.check(scope["method"], f"{server.base}{path}", headers)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
            await mcp(scope, receive, send)
            return
        handler = routes.get((scope["method"], path))
        request = Request(scope, receive)
        if handler is None:
            response: Response = Response(status_code=404)
        else:
            result = handler(request)
            response = await result if hasattr(result, "__await__") else result
        await response(scope, receive, send)

    return asgi
