"""The resource server's side of MCP authorization: what a verified token says, what a
verifier is asked, and how it refuses. No IO here (the verifiers that fetch JWKS or
introspect live in `mcpkit.server.authorization`; the HTTP gate in the server transports).

    AuthInfo        who is calling: subject, client id, scopes, claims, expiry, DPoP binding
    TokenRequest    what a request presented: the scheme, the token, a DPoP proof, where to
    TokenVerifier   `await verifier.verify(request) -> AuthInfo`, or one of the errors below
    InvalidToken    401 error="invalid_token" (expired, wrong audience, bad signature, …)
    DPoPNonceRequired  401 error="use_dpop_nonce" with the nonce to send (RFC 9449 §9)
    InvalidDPoPProof   an InvalidToken with error="invalid_dpop_proof" (RFC 9449 §7.1)
    VerifierUnavailable  the AS's keys or introspection could not be had: a TransportError
                       (503 with Retry-After at the gate: the caller is not at fault)
    presented_token    an HTTP request's `Authorization` and `DPoP` headers → TokenRequest
    challenge_header   the `WWW-Authenticate` value of a 401/403 (RFC 6750 §3, RFC 9728 §5.1,
                       RFC 9449 §7.1)
    protected_resource_metadata   the RFC 9728 §2 document a resource publishes

The checks themselves, one concept per module: `access_token` (RFC 9068 JWT claims),
`introspection` (RFC 7662 answers), `dpop_proof` (RFC 9449 §4.3 proofs at a resource)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from mcpkit.auth.errors import AuthorizationError
from mcpkit.errors import InvalidArgument, TransportError

Scheme = Literal["Bearer", "DPoP"]


@dataclass(frozen=True, slots=True)
class AuthInfo:
    """A verified caller, as handlers see it in `ctx.auth`."""

    subject: str
    client_id: str | None = None
    scopes: frozenset[str] = frozenset()
    claims: Mapping[str, Any] = field(default_factory=dict)
    """The token's claims (a JWT's payload, an introspection answer); never the token."""
    expires_at: float | None = None
    jkt: str | None = None
    """The JWK thumbprint a DPoP-bound token is bound to (`cnf.jkt`); None for Bearer."""


@dataclass(frozen=True, slots=True, repr=False)
class TokenRequest:
    """What one HTTP request presented for verification."""

    scheme: Scheme
    token: str
    method: str
    url: str
    """The request's URL as the client addressed it (the DPoP `htu` is checked against it)."""
    dpop_proof: str | None = None

    def __repr__(self) -> str:
        return (f"TokenRequest(scheme={self.scheme!r}, token='***', method={self.method!r}, "
                f"url={self.url!r}, dpop_proof={'***' if self.dpop_proof else None})")


class TokenVerifier(Protocol):
    async def verify(self, request: TokenRequest) -> AuthInfo:
        """The caller the token names, or InvalidToken / DPoPNonceRequired."""
        ...


class InvalidToken(AuthorizationError):
    """The token cannot be accepted: 401 with error="invalid_token". `description` is safe to
    send back (it names the check that failed, never the token). `error` is the OAuth error
    code for the challenge (a subclass may name another)."""

    error = "invalid_token"

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class DPoPNonceRequired(AuthorizationError):
    """The DPoP proof must carry the server's nonce: 401 with error="use_dpop_nonce" and a
    `DPoP-Nonce: <nonce>` header (RFC 9449 §9)."""

    def __init__(self, nonce: str) -> None:
        super().__init__("a DPoP proof with the server's nonce is required")
        self.nonce = nonce


class InvalidDPoPProof(InvalidToken):
    """The DPoP proof is missing, malformed, for another request or key, stale, or replayed:
    401 with error="invalid_dpop_proof" under the `DPoP` scheme (RFC 9449 §7.1, §12.2)."""

    error = "invalid_dpop_proof"


class VerifierUnavailable(TransportError):
    """The token could not be checked because the authorization server (its metadata, JWKS
    or introspection endpoint) did not answer usefully: unreachable, slow, an error status,
    an oversized or malformed document. Not the caller's fault, so not an InvalidToken: the
    gate answers 503 with Retry-After. `description` names the URL and the problem only."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


# --- reading a request ---------------------------------------------------------------------

DEFAULT_MAX_AUTHORIZATION_CHARS = 16384 + 16
"""The longest `Authorization` value read (a 16 KiB token and its scheme)."""

# RFC 6750 §2.1 b64token: the characters a token may have (no spaces, so nothing after it).
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_SCHEMES: dict[str, Scheme] = {"bearer": "Bearer", "dpop": "DPoP"}


def presented_token(method: str, url: str, authorization: Iterable[str],
                    dpop: Iterable[str] = (), *,
                    max_chars: int = DEFAULT_MAX_AUTHORIZATION_CHARS) -> TokenRequest | None:
    """What a request presents, from all its `Authorization` and `DPoP` header values: None
    when it carries no `Bearer` or `DPoP` credentials (answer 401 with a bare challenge).
    Refused (InvalidToken) are several `Authorization` headers, an over-long one, and a
    token off RFC 6750's b64token grammar; several `DPoP` headers are an InvalidDPoPProof
    (RFC 9449 §4.3: at most one proof). The scheme is case-insensitive (RFC 9110 §11.1)."""
    values = list(authorization)
    if not values:
        return None
    if len(values) > 1:
        raise InvalidToken("the request has more than one Authorization header")
    value = values[0]
    if len(value) > max_chars:
        raise InvalidToken(f"the Authorization header is over {max_chars} characters")
    scheme_name, _, token = value.strip(" \t").partition(" ")
    scheme = _SCHEMES.get(scheme_name.lower())
    if scheme is None:
        return None
    token = token.strip(" \t")
    if not _B64TOKEN.fullmatch(token):
        raise InvalidToken(f"the {scheme} credentials are not a token (RFC 6750 b64token)")
    proofs = list(dpop)
    if len(proofs) > 1:
        raise InvalidDPoPProof("the request has more than one DPoP header")
    return TokenRequest(scheme, token, method, url,
                        dpop_proof=proofs[0].strip(" \t") if proofs else None)


# --- WWW-Authenticate ----------------------------------------------------------------------

# RFC 6750 §3: error and error_description values are %x20-21 / %x23-5B / %x5D-7E; scope
# tokens %x21 / %x23-5B / %x5D-7E. An error code is a short token.
_ERROR_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
_DESCRIPTION_UNSAFE = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")
_URI_CHARS = re.compile(r"[\x21-\x7e]+")
_ALG = re.compile(r"[A-Za-z0-9_.+\-]{1,32}")
MAX_DESCRIPTION_CHARS = 256
"""An `error_description` is cut to this many characters (it names a check, not a story)."""


def challenge_header(scheme: Scheme, *, resource_metadata: str | None,
                     scope: Iterable[str] | str | None = None, error: str | None = None,
                     description: str | None = None,
                     algs: Iterable[str] | None = None) -> str:
    """One `WWW-Authenticate` challenge: `Bearer resource_metadata="…", scope="…",
    error="…", error_description="…"` (RFC 6750 §3, RFC 9728 §5.1), or the same under the
    `DPoP` scheme with `algs` (RFC 9449 §7.1). Every value is a quoted-string. A description
    keeps only the characters RFC 6750 allows (others become `?`) and is cut to
    MAX_DESCRIPTION_CHARS; a scope, error code, algorithm or URL off its grammar is an
    InvalidArgument (they come from the server's configuration, never from a request)."""
    if scheme not in ("Bearer", "DPoP"):
        raise InvalidArgument(f"a challenge scheme is Bearer or DPoP, not {scheme!r}")
    params: list[tuple[str, str]] = []
    if resource_metadata is not None:
        if not _URI_CHARS.fullmatch(resource_metadata):
            raise InvalidArgument("resource_metadata must be a URL of visible ASCII characters")
        params.append(("resource_metadata", resource_metadata))
    if algs is not None and scheme == "DPoP":
        names = list(algs)
        if not names or not all(_ALG.fullmatch(name) for name in names):
            raise InvalidArgument("DPoP algs must be algorithm names such as ES256")
        params.append(("algs", " ".join(names)))
    scopes = scope.split() if isinstance(scope, str) else list(scope or ())
    if scopes:
        if not all(_SCOPE_TOKEN.fullmatch(one) for one in scopes):
            raise InvalidArgument("a scope must be visible ASCII without quotes or backslashes")
        params.append(("scope", " ".join(scopes)))
    if error is not None:
        if not _ERROR_CODE.fullmatch(error):
            raise InvalidArgument(f"an OAuth error code must be a short token, not {error!r}")
        params.append(("error", error))
    if description:
        safe = _DESCRIPTION_UNSAFE.sub("?", description[:MAX_DESCRIPTION_CHARS])
        params.append(("error_description", safe))
    # Every value above is free of `"` and `\\` except a URL's; _quoted escapes both.
    rendered = ", ".join(f'{name}="{_quoted(value)}"' for name, value in params)
    return f"{scheme} {rendered}" if rendered else scheme


def _quoted(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


# --- RFC 9728 -------------------------------------------------------------------------------


def protected_resource_metadata(
        resource: str, authorization_servers: Iterable[str],
        scopes_supported: Iterable[str] | None = None, *,
        bearer_methods_supported: Iterable[str] = ("header",),
        resource_name: str | None = None, resource_documentation: str | None = None,
        dpop_signing_alg_values_supported: Iterable[str] | None = None,
        dpop_bound_access_tokens_required: bool | None = None) -> dict[str, Any]:
    """The protected-resource metadata document (RFC 9728 §2) for `resource` (its URL, the
    value tokens must carry in `aud`). Only header bearer tokens by default: a token in a
    query string or a form body leaks into logs (RFC 6750 §2.2-2.3, OAuth 2.1 forbid the
    query)."""
    servers = list(authorization_servers)
    if not resource or not servers:
        raise InvalidArgument("protected-resource metadata needs the resource and at least "
                              "one authorization server")
    document: dict[str, Any] = {
        "resource": resource,
        "authorization_servers": servers,
        "bearer_methods_supported": list(bearer_methods_supported),
    }
    if scopes_supported is not None:
        document["scopes_supported"] = list(scopes_supported)
    if resource_name is not None:
        document["resource_name"] = resource_name
    if resource_documentation is not None:
        document["resource_documentation"] = resource_documentation
    if dpop_signing_alg_values_supported is not None:
        document["dpop_signing_alg_values_supported"] = list(dpop_signing_alg_values_supported)
    if dpop_bound_access_tokens_required is not None:
        document["dpop_bound_access_tokens_required"] = dpop_bound_access_tokens_required
    return document
