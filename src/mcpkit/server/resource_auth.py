"""A protected server's settings (`ResourceAuth`) and the scope decisions the engine makes.

    auth = ResourceAuth(verifier, resource="https://mcp.example.com/mcp",
                        authorization_servers=["https://auth.example.com"],
                        required_scopes=["mcp"])
    server.run_http(port=8000, authorization=auth)

One of the Engine's seam modules (engine.py): the HTTP transport reads these settings to
gate requests (401/403 challenges, RFC 9728 metadata), and the engine raises
`StepUpRequired` from `admit` when a call names a tool, resource or prompt whose scopes
the caller's token lacks - before anything of the response is sent, so HTTP answers 403
with the step-up challenge. Without HTTP (a WebSocket message, an HTTP+SSE POST, a batch
member) it is a JSON-RPC error: code `INSUFFICIENT_SCOPE` (-32003), data
`{"error": "insufficient_scope", "scope": "<scopes needed>"}`.

The audience is fixed: `resource` is this server's canonical URL (RFC 8707, RFC 9728
`resource`), never derived from a request's Host header, so a token is checked against
what the operator configured and the metadata cannot be steered by a client.

No IO and no IO library here (`import mcpkit.server` stays light).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from mcpkit.auth.resource import AuthInfo, TokenVerifier, protected_resource_metadata
from mcpkit.errors import UsageError
from mcpkit.protocol import errors

WELL_KNOWN = "/.well-known/oauth-protected-resource"
SCOPE_NAME = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
"""What a scope name may hold (RFC 6749 §3.3: visible ASCII but `"` and `\\`)."""
INSUFFICIENT_SCOPE = -32003
"""The JSON-RPC error of a call whose scopes the caller lacks, where no HTTP status can say
it (implementation-defined range, -32000..-32099)."""
DEFAULT_MAX_AUTHORIZATION_BYTES = 16 * 1024
"""The longest `Authorization` header read (bytes); longer → 400 invalid_request."""
DEFAULT_MAX_DPOP_PROOF_BYTES = 8 * 1024
"""The longest `DPoP` header read (bytes); longer → 400 invalid_request."""
DEFAULT_AUTH_FAILURE_BURST = 20
DEFAULT_AUTH_FAILURES_PER_MINUTE = 30
"""Refused tokens per client address: a burst, then a rate (then 429 with Retry-After)."""


@dataclass(frozen=True, slots=True)
class ResourceAuth:
    """How an HTTP-served `Server` is protected (`Server.asgi_app(authorization=…)`)."""

    verifier: TokenVerifier
    """Checks each request's token (signature or introspection, audience = `resource`,
    expiry, DPoP proof): `mcpkit.server.authorization`, or any `TokenVerifier`."""
    resource: str
    """This server's canonical URL, e.g. "https://mcp.example.com/mcp": the audience tokens
    must name, the RFC 9728 `resource`. Required (see the module docstring)."""
    authorization_servers: Sequence[str]
    """The issuers whose tokens this server takes (at least one: MCP clients find the
    authorization server through them)."""
    scopes_supported: Sequence[str] | None = None
    required_scopes: Sequence[str] = ()
    """Scopes every request needs (403 insufficient_scope otherwise)."""
    resource_name: str | None = None
    dpop_algs: Sequence[str] | None = None
    """DPoP proof algorithms accepted (RFC 9449); when set, challenges offer `DPoP` too and
    the metadata lists them. None: Bearer only (the verifier may still accept DPoP)."""
    max_authorization_bytes: int = DEFAULT_MAX_AUTHORIZATION_BYTES
    max_dpop_proof_bytes: int = DEFAULT_MAX_DPOP_PROOF_BYTES
    failure_burst: int = DEFAULT_AUTH_FAILURE_BURST
    failures_per_minute: int = DEFAULT_AUTH_FAILURES_PER_MINUTE
    extra_metadata: dict[str, Any] = field(default_factory=dict)
    """More RFC 9728 fields for the document (e.g. "resource_documentation")."""

    def __post_init__(self) -> None:
        parts = urlsplit(self.resource)
        if parts.scheme not in ("https", "http") or not parts.netloc or parts.fragment:
            raise UsageError(
                f"ResourceAuth.resource must be an absolute http(s) URL without a fragment "
                f"(this server's canonical URL), not {self.resource!r}")
        if isinstance(self.authorization_servers, str) or not self.authorization_servers:
            raise UsageError("ResourceAuth.authorization_servers must list at least one issuer")
        for scopes in (self.required_scopes, self.scopes_supported or ()):
            check_scope_names(scopes)
        if min(self.max_authorization_bytes, self.max_dpop_proof_bytes, self.failure_burst,
               self.failures_per_minute) < 1:
            raise UsageError("ResourceAuth limits must be whole numbers above 0")

    @property
    def metadata_url(self) -> str:
        """Where the RFC 9728 document is (§3.1: the well-known path goes between the host
        and the resource's path): "https://mcp.example.com/.well-known/oauth-protected-
        resource/mcp"."""
        parts = urlsplit(self.resource)
        path = WELL_KNOWN + (parts.path.rstrip("/") if parts.path != "/" else "")
        return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))

    def metadata(self) -> dict[str, Any]:
        """The RFC 9728 protected-resource metadata document."""
        document = protected_resource_metadata(
            self.resource, self.authorization_servers, self.scopes_supported,
            resource_name=self.resource_name,
            dpop_signing_alg_values_supported=self.dpop_algs or None)
        return {**self.extra_metadata, **document}


class StepUpRequired(errors.McpError):
    """The caller's token lacks scopes this call needs (`needed`, plus the server's required
    ones). HTTP answers 403 `insufficient_scope` with the scopes needed and those the token
    has (so that re-authorizing keeps them); elsewhere this JSON-RPC error."""

    def __init__(self, needed: Iterable[str], granted: Iterable[str]) -> None:
        self.needed = frozenset(needed)
        self.granted = frozenset(granted)
        scope = " ".join(sorted(self.needed))
        super().__init__(
            INSUFFICIENT_SCOPE,
            f"insufficient scope: this call needs the scopes {scope!r}",
            {"error": "insufficient_scope", "scope": scope},
        )


def check_scope_names(scopes: Iterable[str]) -> frozenset[str]:
    """`scopes` as a set, or UsageError: a bare string (it would be read as its letters),
    or a name that is empty or holds a space, a quote or a backslash (RFC 6749 §3.3)."""
    if isinstance(scopes, str):
        raise UsageError(f"scopes must be a list of scope names, not the string {scopes!r}")
    found = frozenset(scopes)
    bad = sorted(repr(s) for s in found if not isinstance(s, str) or not SCOPE_NAME.fullmatch(s))
    if bad:
        raise UsageError(f"scope names are visible ASCII without quotes or backslashes: "
                         f"{', '.join(bad)}")
    return found


def allowed(scopes: frozenset[str], auth: AuthInfo | None) -> bool:
    """Whether a caller may see and use an item that needs `scopes`. A caller without
    `AuthInfo` (a server without `ResourceAuth`, stdio) may use everything."""
    return auth is None or scopes <= auth.scopes


def check(scopes: frozenset[str], auth: AuthInfo | None) -> None:
    """`StepUpRequired` unless the caller has every scope in `scopes`."""
    if auth is not None and not scopes <= auth.scopes:
        raise StepUpRequired(scopes, auth.scopes)


def principal_of(auth: AuthInfo) -> str:
    """The caller's stable identity: the issuer-qualified subject ("<iss>#<sub>"), so one
    user's legacy sessions, quotas and request states stay theirs whichever client or token
    they use, and two issuers' equal subjects are not one user."""
    issuer = auth.claims.get("iss")
    prefix = issuer if isinstance(issuer, str) and issuer else "oauth"
    return f"{prefix}#{auth.subject}"
