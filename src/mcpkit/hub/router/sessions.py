"""`SealedSessions`: the hub's `SessionCodec` - a legacy `Mcp-Session-Id` that any replica can
open, because it is the session itself, encrypted and authenticated.

The id is Fernet (AES-128-CBC + HMAC-SHA256) over the session's JSON, with a key derived
from the hub's secret key (`SecretBox.derive_key`): every replica that shares the secret
key opens every other's ids, nobody else can read or forge one, and the key is not the
credentials' key. An id older than `max_age_s` no longer opens.

Ending a session (DELETE) revokes its id: remembered here for `max_age_s`, and - with a
`RevocationList` shared through Redis - at every replica (`revoked` is checked by the
router before a request reaches the app, since that needs I/O).
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from mcpkit.hub.crypto import SecretBox

DEFAULT_MAX_AGE_S = 24 * 3600.0
MAX_LOCAL_REVOKED = 10_000


def session_digest(session_id: str) -> str:
    """A short, fixed-size name for a session id (for revocation lists and logs)."""
    return hashlib.sha256(session_id.encode("ascii", "replace")).hexdigest()[:32]


class SealedSessions:
    def __init__(self, box: SecretBox, *, max_age_s: float = DEFAULT_MAX_AGE_S) -> None:
        key = base64.urlsafe_b64encode(box.derive_key("session ids"))
        self._fernet = Fernet(key)
        self.max_age_s = max_age_s
        self._revoked: dict[str, float] = {}
        self.revocations: list[str] = []
        """Digests revoked here and not yet shared (the router pushes them to Redis)."""

    def seal(self, state: dict[str, Any]) -> str:
        plain = json.dumps(state, separators=(",", ":")).encode()
        return self._fernet.encrypt(plain).decode("ascii")

    def open(self, session_id: str) -> dict[str, Any] | None:
        if session_digest(session_id) in self._revoked:
            return None
        try:
            plain = self._fernet.decrypt(session_id.encode("ascii"), ttl=int(self.max_age_s))
        except (InvalidToken, UnicodeEncodeError, ValueError):
            return None
        try:
            state = json.loads(plain)
        except ValueError:
            return None
        return state if isinstance(state, dict) else None

    def revoke(self, session_id: str) -> None:
        digest = session_digest(session_id)
        self.remember_revoked(digest)
        self.revocations.append(digest)

    def remember_revoked(self, digest: str) -> None:
        now = time.monotonic()
        self._revoked[digest] = now
        if len(self._revoked) > MAX_LOCAL_REVOKED:
            cutoff = now - self.max_age_s
            for known, at in list(self._revoked.items()):
                if at < cutoff or len(self._revoked) > MAX_LOCAL_REVOKED:
                    del self._revoked[known]

    def is_revoked(self, session_id: str) -> bool:
        return session_digest(session_id) in self._revoked
