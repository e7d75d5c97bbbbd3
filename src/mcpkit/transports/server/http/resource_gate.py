"""`ResourceGate`: the OAuth resource server in front of a protected app's MCP endpoints.

Each request to an MCP path (Streamable HTTP, HTTP+SSE, the WebSocket handshake) passes
`check` before anything else reads it (only the Host/Origin check comes first: the URL a
token is checked against is built from the Host header, so that header must be one the
app accepts):

    no Authorization, or a scheme other than Bearer / DPoP
        → 401 WWW-Authenticate: Bearer resource_metadata="…", scope="…"  (RFC 9728 §5.1)
    a malformed header (not `<scheme> <token68>`, over `max_authorization_bytes`, two
    Authorization or DPoP headers, a DPoP proof over `max_dpop_proof_bytes`)
        → 400 error="invalid_request"                                    (RFC 6750 §3.1)
    the verifier refuses the token  → 401 error="invalid_token", error_description
    the verifier wants a DPoP nonce → 401 DPoP error="use_dpop_nonce" + DPoP-Nonce
    the token lacks `required_scopes` → 403 error="insufficient_scope"
    else the caller: `principal_of(auth)` and the AuthInfo, put in the ASGI scope.

With `dpop_algs` set every challenge offers `DPoP algs="…"` beside Bearer (RFC 9449 §7.1);
errors only DPoP has (use_dpop_nonce, invalid_dpop_proof) come in the DPoP challenge alone.
A verifier that cannot reach its authorization server (`VerifierUnavailable`) → 503 with
Retry-After: the caller is not at fault. The challenges and the document are built by
`mcpkit.auth.resource` (`challenge_header`, `protected_resource_metadata`).
Bodies are JSON-RPC errors. Refused tokens and malformed headers spend the client address's
budget (`AuthFailures`): once spent, 429 with Retry-After before any token is looked at.
A token is never logged nor echoed; descriptions come from the verifier (safe by contract).

`metadata(method)` answers GET of the RFC 9728 document, without authorization and open to
any origin (CORS), as discovery needs.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcpkit.auth.errors import AuthorizationError
from mcpkit.auth.resource import (
    AuthInfo,
    DPoPNonceRequired,
    InvalidToken,
    Scheme,
    TokenRequest,
    VerifierUnavailable,
    challenge_header,
)
from mcpkit.errors import Timeout as McpkitTimeout
from mcpkit.errors import TransportError
from mcpkit.protocol import errors, jsonrpc
from mcpkit.server.resource_auth import (
    INSUFFICIENT_SCOPE,
    SCOPE_NAME,
    ResourceAuth,
    StepUpRequired,
)
from mcpkit.server.resource_auth import principal_of as _principal_of
from mcpkit.transports.server.http.asgi import Scope
from mcpkit.transports.server.http.auth_failures import AuthFailures
from mcpkit.transports.server.http.peers import peer_key

log = logging.getLogger(__name__)

UNAUTHORIZED = -32001
"""The JSON-RPC error code in the body of a 401 (as the hub's gate answers)."""
VERIFIER_RETRY_AFTER_S = 5
"""Retry-After of a 503 when the verifier could not reach what it checks against."""
MAX_DESCRIPTION_CHARS = 200
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_UNSAFE_IN_QUOTES = re.compile(r'[^\x20\x21\x23-\x5b\x5d-\x7e]')
_SCHEMES: dict[str, Scheme] = {"bearer": "Bearer", "dpop": "DPoP"}


@dataclass(frozen=True, slots=True)
class Admitted:
    principal: str
    auth: AuthInfo


@dataclass(frozen=True, slots=True)
class Refused:
    status: int
    headers: dict[str, str]
    body: bytes


class ResourceGate:
    def __init__(self, settings: ResourceAuth) -> None:
        self.settings = settings
        self.failures = AuthFailures(
            burst=settings.failure_burst, per_minute=settings.failures_per_minute)
        self.initial_scope: Sequence[str] = (
            settings.required_scopes or settings.scopes_supported or ())
        """The `scope` of a 401: what a client should ask for first."""
        self.document = json.dumps(settings.metadata()).encode()

    # --- requests ----------------------------------------------------------------------

    async def check(self, scope: Scope, hdrs: Mapping[str, str]) -> Admitted | Refused:
        """The verified caller of this request, or the answer refusing it."""
        peer = peer_key(scope)
        wait = self.failures.blocked(peer)
        if wait is not None:
            return _refused(429, "too many requests with a missing or refused token from this "
                            "address; retry later", UNAUTHORIZED,
                            {"retry-after": str(max(1, math.ceil(wait)))})
        header = hdrs.get("authorization")
        if not header:
            return self.unauthorized()
        limit = self.settings.max_authorization_bytes
        if len(header) > limit:
            return self._malformed(peer, f"the Authorization header is longer than {limit} bytes")
        scheme_name, _, token = header.partition(" ")
        scheme = _SCHEMES.get(scheme_name.lower())
        if scheme is None:
            return self.unauthorized()  # not a scheme of ours: as if no token came
        token = token.strip(" ")
        if not token or _TOKEN68.fullmatch(token) is None:
            return self._malformed(peer, f"the Authorization header is not '{scheme} <token>'")
        proof = hdrs.get("dpop")
        proof_limit = self.settings.max_dpop_proof_bytes
        if proof is not None and (len(proof) > proof_limit or "," in proof):
            return self._malformed(
                peer, f"the DPoP header must be one proof of at most {proof_limit} bytes")
        request = TokenRequest(scheme=scheme, token=token, method=_method(scope),
                               url=request_url(scope, hdrs), dpop_proof=proof or None)
        return await self._verify(request, peer)

    async def _verify(self, request: TokenRequest, peer: str) -> Admitted | Refused:
        try:
            auth = await self.settings.verifier.verify(request)
        except DPoPNonceRequired as need:
            return self._nonce_required(need.nonce)
        except VerifierUnavailable as down:  # the AS did not answer: not the caller's fault
            return self._unavailable(type(down).__name__)
        except InvalidToken as refused:
            self.failures.failed(peer)
            return self.invalid_token(refused.description, refused.error)
        except AuthorizationError as refused:  # a verifier's other refusals: messages are safe
            self.failures.failed(peer)
            return self.invalid_token(str(refused))
        except (TransportError, McpkitTimeout, OSError) as exc:
            return self._unavailable(type(exc).__name__)
        except Exception as exc:
            # A verifier's bug: the request is refused (never let in, never a 500); only the
            # exception's type is logged, since its message might quote the token.
            log.error("the token verifier failed (%s): refusing the token", type(exc).__name__)
            self.failures.failed(peer)
            return self.invalid_token("the token could not be verified")
        required = frozenset(self.settings.required_scopes)
        if not required <= auth.scopes:
            return self.insufficient_scope(StepUpRequired(required, auth.scopes))
        return Admitted(_principal_of(auth), auth)

    # --- answers -----------------------------------------------------------------------

    def challenge(self, *, scope: Iterable[str], error: str | None = None,
                  description: str | None = None, dpop_only: bool = False) -> str:
        """The WWW-Authenticate value: a Bearer challenge, and a DPoP one (RFC 9449 §7.1)
        when DPoP is on; only the DPoP one for an error only DPoP has (`dpop_only`:
        use_dpop_nonce, invalid_dpop_proof). Scopes off RFC 6749's grammar (a token's odd
        claim) are left out rather than break the header."""
        names = sorted(s for s in scope if SCOPE_NAME.fullmatch(s))
        common: dict[str, Any] = {"resource_metadata": self.settings.metadata_url,
                                  "scope": names, "error": error, "description": description}
        found = [] if dpop_only else [challenge_header("Bearer", **common)]
        if self.settings.dpop_algs or dpop_only:
            found.append(challenge_header("DPoP", algs=self.settings.dpop_algs, **common))
        return ", ".join(found)

    def unauthorized(self) -> Refused:
        return _refused(401, "authorization required: send an access token for "
                        f"{self.settings.resource} (see {self.settings.metadata_url})",
                        UNAUTHORIZED, {"www-authenticate": self.challenge(
                            scope=self.initial_scope)})

    def invalid_token(self, description: str, error: str = "invalid_token") -> Refused:
        return _refused(401, f"invalid token: {_safe(description)}", UNAUTHORIZED, {
            "www-authenticate": self.challenge(
                scope=self.initial_scope, error=error, description=description,
                dpop_only=error == "invalid_dpop_proof")})

    def _unavailable(self, what: str) -> Refused:
        log.warning("the token verifier could not check a token: %s", what)
        return _refused(503, "the token could not be checked now; retry later",
                        errors.INTERNAL_ERROR, {"retry-after": str(VERIFIER_RETRY_AFTER_S)})

    def insufficient_scope(self, refused: StepUpRequired) -> Refused:
        """403 with the step-up challenge: the scopes needed, plus those the token has (so
        the client's new token keeps them)."""
        needed = " ".join(sorted(refused.needed))
        return _refused(403, f"insufficient scope: this needs {needed!r}", INSUFFICIENT_SCOPE, {
            "www-authenticate": self.challenge(
                scope=refused.needed | refused.granted, error="insufficient_scope",
                description=f"this needs the scopes: {needed}")})

    def _nonce_required(self, nonce: str) -> Refused:
        return _refused(401, "a DPoP proof with the server's nonce is required", UNAUTHORIZED, {
            "www-authenticate": self.challenge(
                scope=self.initial_scope, error="use_dpop_nonce", dpop_only=True,
                description="resend the proof with the DPoP-Nonce given"),
            "dpop-nonce": nonce})

    def _malformed(self, peer: str, description: str) -> Refused:
        self.failures.failed(peer)
        return _refused(400, description, errors.INVALID_REQUEST, {
            "www-authenticate": self.challenge(
                scope=self.initial_scope, error="invalid_request", description=description)})

    # --- RFC 9728 metadata -------------------------------------------------------------

    def metadata(self, method: str) -> Refused:
        """The answer to a request for the metadata document (it is public)."""
        cors = {"access-control-allow-origin": "*",
                "access-control-allow-methods": "GET, OPTIONS",
                "access-control-allow-headers": "*, Authorization, MCP-Protocol-Version"}
        if method in ("GET", "HEAD"):
            body = self.document if method == "GET" else b""
            return Refused(200, {**cors, "content-type": "application/json",
                                 "cache-control": "max-age=300"}, body)
        if method == "OPTIONS":
            return Refused(204, {**cors, "access-control-max-age": "86400"}, b"")
        return Refused(405, {"allow": "GET, HEAD, OPTIONS"}, b"")


def request_url(scope: Scope, hdrs: Mapping[str, str]) -> str:
    """The URL the client addressed (no query: RFC 9449's `htu`): the scheme of the
    connection (ws → http), the Host header (already checked against the allowed hosts),
    the mount point and the path."""
    scheme = str(scope.get("scheme", "http"))
    scheme = {"ws": "http", "wss": "https"}.get(scheme, scheme)
    host = hdrs.get("host")
    if not host:
        server = scope.get("server") or ("localhost", None)
        host = server[0] if server[1] is None else f"{server[0]}:{server[1]}"
    path = str(scope.get("path", "/"))
    root = str(scope.get("root_path", ""))
    if root and not path.startswith(root):
        path = root + path
    return f"{scheme}://{host}{path}"


def _method(scope: Scope) -> str:
    return "GET" if scope["type"] == "websocket" else str(scope.get("method", "GET"))


def _safe(text: str) -> str:
    """`text` as RFC 6750 allows inside error_description (no quote, no backslash, printable
    ASCII), bounded."""
    return _UNSAFE_IN_QUOTES.sub("?", text[:MAX_DESCRIPTION_CHARS])


def _refused(status: int, message: str, code: int, headers: dict[str, str]) -> Refused:
    body = jsonrpc.encode_error(None, errors.McpError(code, message))
    return Refused(status, {**headers, "content-type": "application/json"}, body)
