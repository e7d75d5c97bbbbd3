"""DPoP (RFC 9449) on the wire: what the OAuth flows (`OAuth`, the machine grants) do with a
`DPoPKey` from `mcpkit.auth.dpop`.

    token requests     a fresh proof (htm POST, htu the token endpoint) in the `DPoP` header;
                       on `400 use_dpop_nonce` the request goes once more with the server's
                       nonce (RFC 9449 §8)
    resource requests  `Authorization: DPoP <token>` and a fresh proof for that method and URL,
                       with `ath` (the token's hash); a `401` with `WWW-Authenticate: DPoP
                       error="use_dpop_nonce"` makes the transport send the request again
                       with the server's nonce (RFC 9449 §9)

Nonces are kept per server role and origin (an authorization server's nonce is never sent to
a resource on the same origin, nor the other way round), at most `max_nonces` of them. A
nonce header that is missing, repeated, over `max_nonce_chars` or off the grammar is refused
with `InvalidDPoPNonce` (a PeerError). A token the server did not bind
(`token_type: Bearer`) goes out as a bearer token, without a proof.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal
from urllib.parse import urlsplit

from mcpkit.auth.dpop import (
    DEFAULT_MAX_NONCE_CHARS,
    DPoPKey,
    authorization_header,
    is_dpop_token_type,
    resource_nonce_challenge,
    token_endpoint_nonce_challenge,
)
from mcpkit.auth.tokens import TokenSet
from mcpkit.client.oauth_http import OAuthHttp, Reply
from mcpkit.errors import InvalidArgument

__all__ = ["DEFAULT_MAX_NONCES", "DPoP", "DPoPOption", "dpop_from_option", "header_values"]

DEFAULT_MAX_NONCES = 16
"""Nonces kept at once (one per server origin); the oldest is forgotten past this."""

Role = Literal["token", "resource"]
"""Which server a nonce came from: a token endpoint's, or a protected resource's."""

DPoPOption = bool | DPoPKey | None
"""What `dpop=` takes: False/None (no DPoP), True (a new key for this object's life), or a
`DPoPKey` (kept by the caller, e.g. beside persisted tokens bound to it)."""


def header_values(headers: Mapping[str, str], name: str) -> list[str]:
    """Every value of header `name` in `headers`, whatever the case of its key."""
    wanted = name.lower()
    return [value for key, value in headers.items() if key.lower() == wanted]


class DPoP:
    """A DPoP key and the nonces servers handed it. repr() shows the key's thumbprint only."""

    def __init__(self, key: DPoPKey | None = None, *, max_nonces: int = DEFAULT_MAX_NONCES,
                 max_nonce_chars: int = DEFAULT_MAX_NONCE_CHARS) -> None:
        if max_nonces < 1:
            raise InvalidArgument(f"max_nonces must be at least 1, not {max_nonces}")
        if max_nonce_chars < 1:
            raise InvalidArgument(f"max_nonce_chars must be at least 1, not {max_nonce_chars}")
        self.key = key if key is not None else DPoPKey.generate()
        self.max_nonces = max_nonces
        self.max_nonce_chars = max_nonce_chars
        self._nonces: dict[tuple[Role, str], str] = {}

    def __repr__(self) -> str:
        return f"DPoP(jkt={self.key.jkt!r}, nonces={len(self._nonces)})"

    def proof(self, method: str, url: str, access_token: str | None = None, *,
              role: Role = "resource") -> str:
        """A fresh proof for one request, with the nonce `url`'s server (in `role`) gave."""
        return self.key.proof(method, url, nonce=self._nonces.get((role, _origin(url))),
                              access_token=access_token)

    def remember_nonce(self, url: str, nonce: str, *, role: Role = "resource") -> None:
        key = (role, _origin(url))
        self._nonces.pop(key, None)
        while len(self._nonces) >= self.max_nonces:
            del self._nonces[next(iter(self._nonces))]  # the oldest
        self._nonces[key] = nonce

    # --- the token endpoint ------------------------------------------------------------------

    async def post_token(self, http: OAuthHttp, endpoint: str, body: str,
                         headers: Mapping[str, str]) -> Reply:
        """POST a token request with a proof; once more with the nonce when the server asks
        for one. The caller reads the reply (an error stays an error)."""
        reply = await self._post_with_proof(http, endpoint, body, headers)
        nonce = token_endpoint_nonce_challenge(
            reply.status, reply.body, header_values(reply.headers, "DPoP-Nonce"),
            max_nonce_chars=self.max_nonce_chars)
        if nonce is None:
            return reply
        self.remember_nonce(endpoint, nonce, role="token")
        return await self._post_with_proof(http, endpoint, body, headers)

    async def _post_with_proof(self, http: OAuthHttp, endpoint: str, body: str,
                               headers: Mapping[str, str]) -> Reply:
        return await http.post_form(endpoint, body,
                                    {**headers, "DPoP": self.proof("POST", endpoint,
                                                                   role="token")})

    # --- the resource ------------------------------------------------------------------------

    def resource_headers(self, method: str, url: str, tokens: TokenSet) -> dict[str, str]:
        """The headers presenting `tokens` on a request: DPoP-bound ones with a fresh proof,
        a `Bearer` one (the server did not bind it) as it is."""
        if not is_dpop_token_type(tokens.token_type):
            return {"Authorization": f"Bearer {tokens.access_token}"}
        return {"Authorization": authorization_header(tokens.access_token),
                "DPoP": self.proof(method, url, tokens.access_token)}

    def resource_challenge(self, url: str, status: int, headers: Mapping[str, str]) -> bool:
        """True when a 401 from `url` asks for a nonce (now remembered): send it again."""
        nonce = resource_nonce_challenge(
            status, header_values(headers, "WWW-Authenticate"),
            header_values(headers, "DPoP-Nonce"), max_nonce_chars=self.max_nonce_chars)
        if nonce is None:
            return False
        self.remember_nonce(url, nonce)
        return True


def dpop_from_option(option: DPoPOption) -> DPoP | None:
    if option is None or option is False:
        return None
    if option is True:
        return DPoP()
    if isinstance(option, DPoPKey):
        return DPoP(option)
    raise InvalidArgument("dpop= takes True, False or a DPoPKey")


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def presenting(dpop: DPoP | None, method: str, url: str, tokens: TokenSet) -> dict[str, str]:
    """The headers that present `tokens` on a resource request: through `dpop` when the
    client uses DPoP (a fresh proof for a bound token), else as a Bearer token."""
    if dpop is not None:
        return dpop.resource_headers(method, url, tokens)
    return {"Authorization": f"Bearer {tokens.access_token}"}
