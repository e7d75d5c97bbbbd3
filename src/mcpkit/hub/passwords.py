"""Hub account passwords: argon2id through argon2-cffi's `PasswordHasher` (its defaults: the
RFC 9106 low-memory profile), never a hand-made KDF.

    hash_password(text)            the PHC string the database keeps
    password_matches(stored, text) whether `text` is the password (constant-time compare
                                   inside argon2); `stored` None still costs one hash, so an
                                   unknown user and a wrong password take the same time
    check_password(text)           the bounds: MIN_PASSWORD_CHARS .. MAX_PASSWORD_BYTES

A password is bounded in bytes before it is hashed: argon2 takes any length, and a megabyte
password would make every sign-in attempt a memory and CPU cost chosen by the caller.
"""

from __future__ import annotations

from functools import lru_cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from mcpkit.errors import InvalidArgument

MIN_PASSWORD_CHARS = 8
MAX_PASSWORD_BYTES = 1024
"""The longest password (UTF-8 bytes) the hub hashes or checks; longer ones are refused."""


class PasswordRefused(InvalidArgument):
    """A password outside the bounds (too short to set, too long to set or check)."""


@lru_cache(maxsize=1)
def _hasher() -> PasswordHasher:
    return PasswordHasher()


@lru_cache(maxsize=1)
def _decoy_hash() -> str:
    """What an unknown user's (or a password-less user's) attempt is checked against."""
    return _hasher().hash("mcpkit-hub decoy password")


def check_password(text: str) -> str:
    """`text` if it may be set as a password, else PasswordRefused saying why."""
    if len(text) < MIN_PASSWORD_CHARS:
        raise PasswordRefused(f"a password needs at least {MIN_PASSWORD_CHARS} characters")
    if len(text.encode("utf-8")) > MAX_PASSWORD_BYTES:
        raise PasswordRefused(f"a password is at most {MAX_PASSWORD_BYTES} bytes")
    return text


def hash_password(text: str) -> str:
    return _hasher().hash(check_password(text))


def password_matches(stored: str | None, text: str) -> bool:
    """Whether `text` is the password `stored` was made from. An over-long `text` is refused
    at once (no hash is computed for it); a missing `stored` is checked against a decoy so the
    answer takes as long as a real check."""
    if len(text.encode("utf-8", "replace")) > MAX_PASSWORD_BYTES:
        return False
    try:
        matched = _hasher().verify(stored or _decoy_hash(), text)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False
    return matched and stored is not None
