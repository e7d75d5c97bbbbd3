"""DPoP (RFC 9449): a proof-of-possession key, the proof JWT sent in the `DPoP` header of a
token request and of every resource request, the `Authorization: DPoP <token>` value, and the
server-provided nonce, read from a token endpoint's 400 or a resource's 401, so the caller
retries once with it.

No IO: the caller sends the requests; this module builds and reads header values. Signing,
key generation and the RFC 7638 thumbprint come from joserfc, never hand-written.

Invariants a proof keeps (RFC 9449 §4.2): a fresh random `jti` every call, `iat` now, `htm`
the request method, `htu` the target URI without query or fragment (normalized as §4.3 and
RFC 3986 §6.2.2-6.2.3 say a server compares it), `ath` = base64url(SHA-256(access token))
when a token rides along, `nonce` when the server gave one; header `typ: dpop+jwt`, the
algorithm, and the *public* JWK only.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
import secrets
import time
from collections.abc import Iterable
from urllib.parse import SplitResult, urlsplit

from joserfc import jws
from joserfc.jwk import ECKey

from mcpkit.auth.challenges import DEFAULT_MAX_CHALLENGE_CHARS, parse_challenges
from mcpkit.errors import InvalidArgument, PeerError

__all__ = [
    "DEFAULT_MAX_ACCESS_TOKEN_CHARS",
    "DEFAULT_MAX_ERROR_BODY_BYTES",
    "DEFAULT_MAX_NONCE_CHARS",
    "DPOP_ALGORITHM",
    "DPoPKey",
    "InvalidDPoPNonce",
    "access_token_hash",
    "authorization_header",
    "is_dpop_token_type",
    "normalize_htu",
    "resource_nonce_challenge",
    "token_endpoint_nonce_challenge",
]

DPOP_ALGORITHM = "ES256"
"""The proof algorithm: ECDSA P-256 SHA-256, the one every DPoP server must accept."""

DEFAULT_MAX_NONCE_CHARS = 1024
"""The longest `DPoP-Nonce` taken from a server; a longer one is refused (RFC 9449 sets no
bound; real nonces are tens of characters)."""

DEFAULT_MAX_ACCESS_TOKEN_CHARS = 16384
"""The longest access token put into an `Authorization` header or hashed into `ath`."""

DEFAULT_MAX_ERROR_BODY_BYTES = 65536
"""The largest token-endpoint error body read when looking for `use_dpop_nonce`."""

USE_DPOP_NONCE = "use_dpop_nonce"

_SIGNING_REGISTRY = jws.JWSRegistry(algorithms=[DPOP_ALGORITHM])
"""joserfc's registry for signing proofs, built once instead of on every proof."""

_METHOD = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,32}")
# RFC 9449 §8.1: nonce = 1*NQCHAR; NQCHAR = %x21 / %x23-5B / %x5D-7E
_NONCE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
# A token in an Authorization header: visible ASCII, no spaces (so no header injection);
# RFC 6750's b64token is a subset.
_ACCESS_TOKEN = re.compile(r"[\x21-\x7e]+")
_URI_CHARS = re.compile(r"[\x21-\x7e]+")
_PERCENT_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class InvalidDPoPNonce(PeerError):
    """A server asked for a DPoP nonce (`use_dpop_nonce`) but sent no usable `DPoP-Nonce`
    header: none, several, an over-long one, or one with characters RFC 9449 does not allow."""


class DPoPKey:
    """An ES256 key pair that DPoP-bound tokens are tied to (through `jkt`, its RFC 7638
    thumbprint). Keep it as long as the tokens: `private_pem()` / `from_pem()` persist it.
    repr() shows the thumbprint only."""

    def __init__(self, key: ECKey) -> None:
        if key.curve_name != "P-256" or not key.is_private:
            raise InvalidArgument("a DPoP key must be a private P-256 EC key (ES256)")
        self._key = key
        self.public_jwk: dict[str, str] = {
            name: str(value) for name, value in key.as_dict(private=False).items()}
        self.jkt: str = key.thumbprint()
        self._header = {"typ": "dpop+jwt", "alg": DPOP_ALGORITHM, "jwk": self.public_jwk}
        """Every proof's JOSE header (RFC 9449 §4.2): the same for each proof of this key."""

    @classmethod
    def generate(cls) -> DPoPKey:
        """A new random key pair."""
        return cls(ECKey.generate_key("P-256", private=True))

    @classmethod
    def from_pem(cls, pem: str | bytes) -> DPoPKey:
        """The key pair saved by `private_pem()`."""
        try:
            key = ECKey.import_key(pem)
        except Exception:
            # The library's message may quote the input: the cause is dropped on purpose so
            # no private key material reaches a log through the exception chain.
            raise InvalidArgument("the DPoP key is not a PEM-encoded P-256 EC key") from None
        return cls(key)

    def private_pem(self) -> bytes:
        """The private key as PKCS#8 PEM, for a token store to keep beside the tokens."""
        return self._key.as_pem(private=True)

    def proof(self, method: str, url: str, *, nonce: str | None = None,
              access_token: str | None = None, issued_at: int | None = None) -> str:
        """A fresh DPoP proof JWT for one request (`method` as sent, `url` its target)."""
        if not _METHOD.fullmatch(method):
            raise InvalidArgument("a DPoP proof needs an HTTP method token (such as POST)")
        claims: dict[str, object] = {
            "jti": secrets.token_urlsafe(24),
            "htm": method,
            "htu": normalize_htu(url),
            "iat": int(time.time()) if issued_at is None else issued_at,
        }
        if nonce is not None:
            claims["nonce"] = _checked_nonce(nonce, DEFAULT_MAX_NONCE_CHARS, InvalidArgument)
        if access_token is not None:
            claims["ath"] = access_token_hash(access_token)
        payload = json.dumps(claims, ensure_ascii=False, separators=(",", ":"))
        return jws.serialize_compact({**self._header}, payload.encode("utf-8"), self._key,
                                     registry=_SIGNING_REGISTRY)

    def __repr__(self) -> str:
        return f"DPoPKey(jkt={self.jkt!r})"


def normalize_htu(url: str) -> str:
    """`url` as a proof's `htu`: scheme and host lowercased, the default port dropped, an
    empty path made `/`, percent-escapes uppercased and unreserved ones decoded; query and
    fragment removed (RFC 9449 §4.2). Only absolute http(s) URLs without userinfo, in URI
    characters (visible ASCII: a caller percent-encodes a path and punycodes a host).
    InvalidArgument otherwise. Remembered for URLs up to HTU_CACHE_MAX_CHARS (see there)."""
    if len(url) <= HTU_CACHE_MAX_CHARS:
        return _normalize_htu_remembered(url)
    return _normalize_htu(url)


HTU_CACHE_ENTRIES = 64
"""URLs whose normalized `htu` is kept: a client signs every request to the same few URLs, and
a resource server compares every proof's `htu` with the one URL it serves, so both would
otherwise parse the same strings on every request. A URL that does not normalize raises and
is not remembered."""

HTU_CACHE_MAX_CHARS = 2048
"""The longest URL remembered (longer ones are normalized every time), so the cache holds at
most HTU_CACHE_ENTRIES x 2 x HTU_CACHE_MAX_CHARS characters (256 KB): key and value."""


@functools.lru_cache(maxsize=HTU_CACHE_ENTRIES)
def _normalize_htu_remembered(url: str) -> str:
    return _normalize_htu(url)


def _normalize_htu(url: str) -> str:
    if not _URI_CHARS.fullmatch(url):
        raise InvalidArgument("a DPoP target URL must be a URI of visible ASCII characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise InvalidArgument("a DPoP target URL that does not parse") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise InvalidArgument("a DPoP target URL must be an absolute http or https URL")
    if parts.username is not None or parts.password is not None:
        raise InvalidArgument("a DPoP target URL must not carry userinfo")
    return SplitResult(scheme, _authority(parts.hostname, port, scheme),
                       _normalize_path(parts.path or "/"), "", "").geturl()


def _authority(hostname: str, port: int | None, scheme: str) -> str:
    host = f"[{hostname}]" if ":" in hostname else hostname  # an IPv6 literal keeps brackets
    return host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"


def _normalize_path(path: str) -> str:
    def one_escape(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else "%" + match.group(1).upper()
    return _PERCENT_ESCAPE.sub(one_escape, path)


def access_token_hash(access_token: str) -> str:
    """The `ath` claim: base64url (no padding) of SHA-256 over the token's ASCII bytes."""
    digest = hashlib.sha256(_checked_access_token(access_token).encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def authorization_header(access_token: str) -> str:
    """The `Authorization` value for a DPoP-bound token (RFC 9449 §7.1): `DPoP <token>`."""
    return "DPoP " + _checked_access_token(access_token)


def is_dpop_token_type(token_type: str) -> bool:
    """Whether a token response's `token_type` says the token is DPoP-bound (RFC 9449 §5:
    `DPoP`, compared case-insensitively as RFC 6749 §7.1 token types are), so it goes out as
    `Authorization: DPoP …` with a proof; `Bearer` means the server did not bind it."""
    return token_type.lower() == "dpop"


def _checked_access_token(access_token: str) -> str:
    if len(access_token) > DEFAULT_MAX_ACCESS_TOKEN_CHARS:
        raise InvalidArgument(f"an access token over {DEFAULT_MAX_ACCESS_TOKEN_CHARS} "
                              "characters")
    if not _ACCESS_TOKEN.fullmatch(access_token):
        raise InvalidArgument("an access token must be non-empty visible ASCII without spaces")
    return access_token


def token_endpoint_nonce_challenge(status: int, body: bytes, nonce_headers: Iterable[str], *,
                                   max_nonce_chars: int = DEFAULT_MAX_NONCE_CHARS,
                                   max_body_bytes: int = DEFAULT_MAX_ERROR_BODY_BYTES,
                                   ) -> str | None:
    """The nonce to retry a token request with, when the authorization server answered
    `400 {"error": "use_dpop_nonce"}` (RFC 9449 §8); None for any other answer (the caller
    handles it as the token error it is). `nonce_headers` are the response's `DPoP-Nonce`
    values (all of them, so a duplicated header is caught). Raises `InvalidDPoPNonce` when the
    server asks for a nonce without giving a usable one."""
    if status != 400 or len(body) > max_body_bytes:
        return None
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):  # not JSON (or absurdly nested): not this error
        return None
    if not isinstance(document, dict) or document.get("error") != USE_DPOP_NONCE:
        return None
    return _the_nonce(nonce_headers, max_nonce_chars)


def resource_nonce_challenge(status: int, www_authenticate: Iterable[str],
                             nonce_headers: Iterable[str], *,
                             max_nonce_chars: int = DEFAULT_MAX_NONCE_CHARS,
                             max_challenge_chars: int = DEFAULT_MAX_CHALLENGE_CHARS,
                             ) -> str | None:
    """The nonce to retry a resource request with, when the resource server answered 401
    with `WWW-Authenticate: DPoP error="use_dpop_nonce"` (RFC 9449 §9); None otherwise.
    Raises `MalformedChallenge` for a header off the grammar and `InvalidDPoPNonce` when the
    nonce is missing or unusable."""
    if status != 401:
        return None
    challenges = parse_challenges(list(www_authenticate), max_chars=max_challenge_chars)
    if not any(scheme == "dpop" and params.get("error") == USE_DPOP_NONCE
               for scheme, params in challenges):
        return None
    return _the_nonce(nonce_headers, max_nonce_chars)


def _the_nonce(nonce_headers: Iterable[str], max_chars: int) -> str:
    values = list(nonce_headers)
    if len(values) != 1:
        raise InvalidDPoPNonce(f"the server asked for a DPoP nonce and sent {len(values)} "
                               "DPoP-Nonce headers instead of one")
    return _checked_nonce(values[0].strip(" \t"), max_chars, InvalidDPoPNonce)


def _checked_nonce(nonce: str, max_chars: int,
                   error: type[InvalidArgument] | type[InvalidDPoPNonce]) -> str:
    if len(nonce) > max_chars:
        raise error(f"a DPoP nonce of {len(nonce)} characters, over the limit of {max_chars}")
    if not _NONCE.fullmatch(nonce):
        raise error("a DPoP nonce that is empty or has characters RFC 9449 does not allow")
    return nonce
