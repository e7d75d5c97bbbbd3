"""RFC 7662 token introspection answers, read by a resource server: what the authorization
server says about an opaque token, held to the same rules as a JWT's claims (the audience
names this resource, not expired, the expected issuer).

    IntrospectionPolicy   issuer, audience(s), leeway, whether `aud` may be absent, size bound
    introspection_info    the answer's body → AuthInfo, or InvalidToken

No IO (the request is `mcpkit.server.authorization`'s). The body is hostile input: bounded,
decoded strictly (a JSON object), every member used type-checked."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import msgspec

from mcpkit.auth.access_token import (
    DEFAULT_LEEWAY_S,
    check_audience,
    check_times,
    client_id_of,
    jkt_of,
    scopes_of,
)
from mcpkit.auth.metadata import MAX_DOCUMENT_BYTES
from mcpkit.auth.resource import AuthInfo, InvalidToken, VerifierUnavailable

__all__ = ["IntrospectionPolicy", "introspection_info"]


@dataclass(frozen=True, slots=True)
class IntrospectionPolicy:
    audience: str | Collection[str]
    """This resource's identifier(s); an answer's `aud` must name one of them."""
    issuer: str | None = None
    """When set, an answer's `iss` (if present) must equal it."""
    leeway_s: float = DEFAULT_LEEWAY_S
    require_audience: bool = True
    """Refuse an active token whose answer has no `aud` (the resource cannot tell whom the
    token is for). Off only for an AS that never sends `aud` and issues tokens for this
    resource alone."""
    max_bytes: int = MAX_DOCUMENT_BYTES

    def audiences(self) -> frozenset[str]:
        return frozenset([self.audience] if isinstance(self.audience, str) else self.audience)


def introspection_info(body: bytes, policy: IntrospectionPolicy, now: float) -> AuthInfo:
    """The caller an introspection answer describes (RFC 7662 §2.2). `active: false` (or
    anything but `true`) is an invalid token; a body that is not a bounded JSON object means
    the AS misbehaved (VerifierUnavailable)."""
    answer = _decoded(body, policy.max_bytes)
    if answer.get("active") is not True:
        raise InvalidToken("the access token is not active (introspection)")
    issuer = answer.get("iss")
    if policy.issuer is not None and issuer is not None and issuer != policy.issuer:
        raise InvalidToken("the access token was issued by another authorization server")
    if "aud" in answer or policy.require_audience:
        check_audience(answer.get("aud"), policy.audiences())
    expires_at = check_times(answer, policy.leeway_s, now, exp_required=False)
    subject = answer.get("sub")
    client_id = client_id_of(answer)
    if subject is not None and not isinstance(subject, str):
        raise InvalidToken("the introspection answer's sub is not a string")
    # RFC 7662 makes sub optional; a client-credentials token may name only its client.
    who = subject or client_id
    if not who:
        raise InvalidToken("the introspection answer names no subject or client")
    return AuthInfo(subject=who, client_id=client_id, scopes=scopes_of(answer),
                    claims=answer, expires_at=expires_at, jkt=jkt_of(answer))


def _decoded(body: bytes, max_bytes: int) -> dict[str, Any]:
    if len(body) > max_bytes:
        raise VerifierUnavailable(f"the introspection answer is over {max_bytes} bytes")
    try:
        answer = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):
        raise VerifierUnavailable("the introspection answer is not JSON") from None
    if not isinstance(answer, dict):
        raise VerifierUnavailable("the introspection answer is not a JSON object")
    return answer
