"""Client authentication at the token endpoint: which method to use, and the form fields and
headers each one adds to a token request.

    none                 `client_id` in the form (a public client; RFC 6749 §2.2)
    client_secret_basic  `Authorization: Basic base64(urlenc(id) ":" urlenc(secret))`, with
                         the form-urlencoding RFC 6749 §2.3.1 / Appendix B require first
    client_secret_post   `client_id` and `client_secret` in the form (RFC 6749 §2.3.1)
    private_key_jwt      a signed client assertion (RFC 7523 §2.2, OIDC Core §9):
                         iss = sub = client_id, aud, a random jti, iat and a short exp

The default when the server advertises nothing is `client_secret_basic` (RFC 8414 §2). JWT
signing and key loading come from joserfc. Secrets (the client secret, the private key, the
assertion) never show in a repr or an exception message.
"""

from __future__ import annotations

import base64
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal
from urllib.parse import quote_plus

from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey

from mcpkit.auth.forms import SecretFields
from mcpkit.errors import InvalidArgument

__all__ = [
    "CLIENT_ASSERTION_TYPE",
    "DEFAULT_ASSERTION_LIFETIME_S",
    "DEFAULT_MAX_CLIENT_ID_CHARS",
    "ClientAuthMethod",
    "ClientCredentials",
    "NoUsableClientAuthMethod",
    "SigningKey",
    "basic_authorization",
    "choose_auth_method",
    "client_assertion",
    "client_authentication",
]

CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

DEFAULT_ASSERTION_LIFETIME_S = 60
"""How long a private_key_jwt client assertion is valid (`exp - iat`): one request's worth;
RFC 7523 §3 asks for a short lifetime."""

DEFAULT_MAX_CLIENT_ID_CHARS = 2048
"""The longest client id accepted (a Client ID Metadata Document URL is the long case)."""

SigningAlgorithm = Literal["ES256", "RS256"]
_MIN_RSA_BITS = 2048


class ClientAuthMethod(StrEnum):
    """A `token_endpoint_auth_method` value (RFC 7591 §2) that mcpkit can perform."""

    NONE = "none"
    CLIENT_SECRET_BASIC = "client_secret_basic"
    CLIENT_SECRET_POST = "client_secret_post"
    PRIVATE_KEY_JWT = "private_key_jwt"


class NoUsableClientAuthMethod(InvalidArgument):
    """None of the methods the authorization server accepts fits the credentials configured
    for this client (say: the server takes only private_key_jwt and no key is set)."""


class SigningKey:
    """A private key that signs client assertions, loaded from PEM, with its JWS algorithm:
    ES256 (a P-256 EC key) or RS256 (an RSA key of 2048 bits or more). repr() shows the
    algorithm and the public key's RFC 7638 thumbprint, never key material."""

    def __init__(self, pem: str | bytes, algorithm: SigningAlgorithm = "ES256", *,
                 key_id: str | None = None) -> None:
        self.algorithm: SigningAlgorithm = algorithm
        self.key_id = key_id
        self._key = _load_private_key(pem, algorithm)
        self.thumbprint: str = self._key.thumbprint()

    def sign(self, claims: dict[str, object]) -> str:
        header: dict[str, object] = {"alg": self.algorithm, "typ": "JWT"}
        if self.key_id is not None:
            header["kid"] = self.key_id
        return jwt.encode(header, claims, self._key, algorithms=[self.algorithm])

    def __repr__(self) -> str:
        return f"SigningKey(algorithm={self.algorithm!r}, thumbprint={self.thumbprint!r})"


def _load_private_key(pem: str | bytes, algorithm: str) -> ECKey | RSAKey:
    key: ECKey | RSAKey
    try:
        if algorithm == "ES256":
            key = ECKey.import_key(pem)
        elif algorithm == "RS256":
            key = RSAKey.import_key(pem)
        else:
            raise InvalidArgument(f"unsupported client assertion algorithm {algorithm!r}; "
                                  "use ES256 or RS256")
    except InvalidArgument:
        raise
    except Exception:
        # The library's message may quote the input: the cause is dropped on purpose so no
        # key material reaches a log through the exception chain.
        raise InvalidArgument(f"the client assertion key is not a PEM private key for "
                              f"{algorithm}") from None
    if not key.is_private:
        raise InvalidArgument("the client assertion key is a public key; a private key signs")
    if isinstance(key, ECKey) and key.curve_name != "P-256":
        raise InvalidArgument(f"ES256 needs a P-256 key, not {key.curve_name}")
    if isinstance(key, RSAKey) and key.raw_value.key_size < _MIN_RSA_BITS:
        raise InvalidArgument(f"RS256 needs an RSA key of at least {_MIN_RSA_BITS} bits")
    return key


@dataclass(frozen=True)
class ClientCredentials:
    """What this client has to authenticate with: its id, and a secret or a signing key (or
    neither, for a public client). The secret is kept out of repr()."""

    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    signing_key: SigningKey | None = None

    def __post_init__(self) -> None:
        if not self.client_id:
            raise InvalidArgument("a client id must not be empty")
        if len(self.client_id) > DEFAULT_MAX_CLIENT_ID_CHARS:
            raise InvalidArgument(f"a client id over {DEFAULT_MAX_CLIENT_ID_CHARS} characters")
        if any(ord(char) < 0x20 or ord(char) == 0x7F for char in self.client_id):
            raise InvalidArgument("a client id must not contain control characters")
        if self.client_secret == "":
            raise InvalidArgument("a client secret must not be empty (leave it unset)")
        _require_utf8(self.client_id, "client id")
        if self.client_secret is not None:
            _require_utf8(self.client_secret, "client secret")

    def methods(self) -> list[ClientAuthMethod]:
        """The methods these credentials allow, most preferred first: a key beats a secret
        (the secret never leaves the machine), Basic beats post (RFC 6749 §2.3.1: servers
        MUST support Basic), and `none` only for a client with neither."""
        if self.signing_key is not None:
            return [ClientAuthMethod.PRIVATE_KEY_JWT]
        if self.client_secret is not None:
            return [ClientAuthMethod.CLIENT_SECRET_BASIC, ClientAuthMethod.CLIENT_SECRET_POST]
        return [ClientAuthMethod.NONE]


def choose_auth_method(credentials: ClientCredentials,
                       advertised: Sequence[str] | None = None, *,
                       signing_algs_advertised: Sequence[str] | None = None,
                       ) -> ClientAuthMethod:
    """The method to authenticate with: the client's most preferred one among those the
    server advertises (`token_endpoint_auth_methods_supported`; absent means
    `client_secret_basic`, RFC 8414 §2). For private_key_jwt the key's algorithm must be in
    `token_endpoint_auth_signing_alg_values_supported` when the server lists it."""
    offered = ["client_secret_basic"] if advertised is None else list(advertised)
    for method in credentials.methods():
        if method not in offered:
            continue
        key = credentials.signing_key
        if (method is ClientAuthMethod.PRIVATE_KEY_JWT and key is not None
                and signing_algs_advertised is not None
                and key.algorithm not in signing_algs_advertised):
            continue
        return method
    raise NoUsableClientAuthMethod(
        f"the authorization server accepts {offered!r} at its token endpoint; this client "
        f"can do {[str(method) for method in credentials.methods()]!r} with what is "
        "configured (set a client secret or a private key that fits)")


def client_authentication(method: ClientAuthMethod, credentials: ClientCredentials, *,
                          audience: str, now: int | None = None,
                          assertion_lifetime_s: int = DEFAULT_ASSERTION_LIFETIME_S,
                          ) -> tuple[SecretFields, SecretFields]:
    """(form fields, headers) to add to a token request to authenticate with `method`.
    `audience` is the private_key_jwt assertion's `aud`: the authorization server's issuer
    identifier (what RFC 7523bis and the MCP conformance mock expect) or its token endpoint
    URL (RFC 7523 §3's older reading); the caller picks."""
    form, headers = SecretFields(), SecretFields()
    if method is ClientAuthMethod.NONE:
        form["client_id"] = credentials.client_id
    elif method is ClientAuthMethod.CLIENT_SECRET_BASIC:
        headers["Authorization"] = basic_authorization(credentials.client_id,
                                                       _secret(credentials, method))
    elif method is ClientAuthMethod.CLIENT_SECRET_POST:
        form["client_id"] = credentials.client_id
        form["client_secret"] = _secret(credentials, method)
    else:
        form["client_assertion_type"] = CLIENT_ASSERTION_TYPE
        form["client_assertion"] = client_assertion(credentials, audience=audience, now=now,
                                                    lifetime_s=assertion_lifetime_s)
    return form, headers


def basic_authorization(client_id: str, client_secret: str) -> str:
    """`Basic …` for client_secret_basic: id and secret form-urlencoded (RFC 6749 Appendix B:
    space as `+`, everything but unreserved characters percent-encoded as UTF-8), joined by a
    colon, then Base64."""
    _require_utf8(client_id, "client id")
    _require_utf8(client_secret, "client secret")
    pair = f"{quote_plus(client_id, safe='')}:{quote_plus(client_secret, safe='')}"
    return "Basic " + base64.b64encode(pair.encode("ascii")).decode("ascii")


def client_assertion(credentials: ClientCredentials, *, audience: str, now: int | None = None,
                     lifetime_s: int = DEFAULT_ASSERTION_LIFETIME_S) -> str:
    """A signed private_key_jwt assertion (RFC 7523 §3): iss = sub = client id."""
    key = credentials.signing_key
    if key is None:
        raise InvalidArgument("private_key_jwt needs a signing key in the client credentials")
    if not audience:
        raise InvalidArgument("a client assertion needs an audience")
    if lifetime_s <= 0:
        raise InvalidArgument("a client assertion lifetime must be positive")
    issued_at = int(time.time()) if now is None else now
    return key.sign({
        "iss": credentials.client_id,
        "sub": credentials.client_id,
        "aud": audience,
        "jti": secrets.token_urlsafe(24),
        "iat": issued_at,
        "exp": issued_at + lifetime_s,
    })


def _secret(credentials: ClientCredentials, method: ClientAuthMethod) -> str:
    if credentials.client_secret is None:
        raise InvalidArgument(f"{method} needs a client secret in the client credentials")
    return credentials.client_secret


def _require_utf8(value: str, what: str) -> None:
    """Refuse text UTF-8 cannot encode (a lone surrogate): form-urlencoding and JSON both need
    UTF-8, and the codec's own error would quote the value."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"the {what} is not valid Unicode text (a lone surrogate)") from None
