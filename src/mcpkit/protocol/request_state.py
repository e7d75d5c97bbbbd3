"""Integrity-protected `requestState` for multi round-trip requests (MRTR).

The state a server hands the client in an `InputRequiredResult` comes back on the retry;
the client is untrusted, so the state is sealed: a JSON payload plus an HMAC-SHA256 tag.
The payload binds the state to the request it was issued for (method and a digest of the
salient params), to the principal, and to an expiry. Anything that fails verification is
refused with -32602.

Wire form: base64url(payload) "." base64url(tag), with no padding.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from typing import Any

import msgspec

from mcpkit.protocol import errors

_DEFAULT_TTL_S = 600.0
MAX_STATE_BYTES = 256 * 1024


class _Payload(msgspec.Struct, omit_defaults=True):
    m: str  # method
    d: str  # digest of the salient params
    e: float  # expiry, unix seconds
    p: str = ""  # principal
    s: Any = None  # the handler's own state
    a: dict[str, Any] = msgspec.field(default_factory=dict)  # input responses gathered so far


class OpenedState(msgspec.Struct):
    """A verified state: the handler's own value and the answers of earlier rounds."""

    state: Any
    answers: dict[str, Any]


_payload_decoder = msgspec.json.Decoder(_Payload)
_encoder = msgspec.json.Encoder(order="sorted")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text.encode("ascii") + b"=" * (-len(text) % 4))


def params_digest(params: dict[str, Any]) -> str:
    """A digest of the params that identify a request, without the MRTR and `_meta` fields."""
    salient = {
        k: v for k, v in params.items() if k not in ("_meta", "inputResponses", "requestState")
    }
    return _b64(hashlib.sha256(_encoder.encode(salient)).digest()[:16])


class RequestStateCodec:
    """Seals and opens request state with one HMAC key.

    Replicas that serve the same clients must share the key; by default each process
    draws its own at random.
    """

    def __init__(self, key: bytes | None = None, ttl_s: float = _DEFAULT_TTL_S) -> None:
        self._key = key or secrets.token_bytes(32)
        self._ttl_s = ttl_s

    def seal(
        self,
        method: str,
        params: dict[str, Any],
        *,
        state: Any = None,
        answers: dict[str, Any] | None = None,
        principal: str = "",
        now: float | None = None,
    ) -> str:
        expiry = (time.time() if now is None else now) + self._ttl_s
        payload = _Payload(
            m=method,
            d=params_digest(params),
            e=expiry,
            p=principal,
            s=state,
            a=answers or {},
        )
        body = _encoder.encode(payload)
        tag = hmac.new(self._key, body, hashlib.sha256).digest()
        return f"{_b64(body)}.{_b64(tag)}"

    def open(
        self,
        token: Any,
        method: str,
        params: dict[str, Any],
        *,
        principal: str = "",
        now: float | None = None,
    ) -> OpenedState:
        """Verify a state token issued for this request and principal."""
        payload = self._verify(token)
        if payload.m != method or payload.d != params_digest(params):
            raise errors.invalid_params("requestState was issued for a different request")
        if payload.p != principal:
            raise errors.invalid_params("requestState was issued to a different principal")
        if (time.time() if now is None else now) > payload.e:
            raise errors.invalid_params("requestState has expired")
        return OpenedState(payload.s, payload.a)

    def _verify(self, token: Any) -> _Payload:
        if not isinstance(token, str) or len(token) > MAX_STATE_BYTES or "." not in token:
            raise errors.invalid_params("requestState is malformed")
        body_text, _, tag_text = token.partition(".")
        try:
            body, tag = _unb64(body_text), _unb64(tag_text)
        except (ValueError, UnicodeError):
            raise errors.invalid_params("requestState is malformed") from None
        expected = hmac.new(self._key, body, hashlib.sha256).digest()
        if not hmac.compare_digest(tag, expected):
            raise errors.invalid_params("requestState failed its integrity check")
        try:
            return _payload_decoder.decode(body)
        except msgspec.MsgspecError:
            raise errors.invalid_params("requestState is malformed") from None
