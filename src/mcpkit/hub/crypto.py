"""Secrets of the hub: upstream credentials sealed at rest, API tokens hashed.

    SecretBox(keys)        seal(dict | str) -> str, open(token) -> dict | str (Fernet, rotation)
    SecretBox.from_env()   keys from $MCPKIT_HUB_SECRET_KEY (comma-separated; the first seals)
    load_secret_box(dir)   the env keys, else the key file in the data directory (made once)
    load_or_create_key(dir)  <data dir>/secret.key, created with mode 0600 on first use
    generate_key()         a new Fernet key
    new_api_token()        "mcphub_" + 32 random bytes, url-safe base64
    hash_token(secret)     sha256 hex: what the database stores of an API token
    tokens_equal(a, b)     constant-time comparison

Credentials (an upstream's headers and bearer token) are sealed with Fernet (AES-128-CBC and
HMAC-SHA256, a timestamp, a random IV) under a `MultiFernet`: the first key seals, every key
opens, so a key is rotated by putting the new one first, re-sealing (`SecretBox.rotate`), then
dropping the old one. Replicas must share the keys: set `MCPKIT_HUB_SECRET_KEY` to the same
value on every one (the generated key file is for a single hub on one machine).

API tokens are 256-bit random strings, not passwords: no one can guess one, so a fast,
unsalted sha256 is the right hash (a slow KDF adds nothing against a search space of 2**256 and
would cost every request). The lookup is by hash, so the stored value never leaves the
database, and `tokens_equal` compares in constant time wherever two secrets meet.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from mcpkit.errors import UsageError

SECRET_KEY_ENV = "MCPKIT_HUB_SECRET_KEY"
KEY_FILE_NAME = "secret.key"
API_TOKEN_PREFIX = "mcphub_"
API_TOKEN_BYTES = 32
DISPLAY_PREFIX_LENGTH = 12  # "mcphub_" and 5 characters of the secret, shown in listings

Sealable = str | dict[str, str]


class CredentialError(UsageError):
    """A key is missing or malformed, or a sealed value cannot be opened with the keys given."""


def generate_key() -> str:
    """A new random Fernet key (32 bytes, url-safe base64), for `MCPKIT_HUB_SECRET_KEY`."""
    return Fernet.generate_key().decode("ascii")


def new_api_token() -> str:
    """A new API token secret: `mcphub_` then 32 random bytes in url-safe base64 (43 chars)."""
    return API_TOKEN_PREFIX + secrets.token_urlsafe(API_TOKEN_BYTES)


def hash_token(secret: str) -> str:
    """The sha256 hex digest of an API token: what is stored and looked up."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def token_display_prefix(secret: str) -> str:
    """The first characters of a token, enough to tell tokens apart in a listing."""
    return secret[:DISPLAY_PREFIX_LENGTH]


def tokens_equal(a: str, b: str) -> bool:
    """Compare two secrets (or their hashes) in time independent of where they differ."""
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))


class SecretBox:
    """Seals and opens small secrets with one or more Fernet keys (the first one seals)."""

    def __init__(self, keys: Sequence[str | bytes]) -> None:
        if not keys:
            raise CredentialError("no secret key given")
        self._fernet = MultiFernet([_fernet(key, index) for index, key in enumerate(keys, 1)])
        first = keys[0]
        self._first_key = first.encode("ascii") if isinstance(first, str) else first

    def derive_key(self, purpose: str) -> bytes:
        """32 bytes for `purpose` (HKDF-SHA256 of the sealing key): replicas that share the
        secret key share these too - the key of sealed request states and session ids -
        without any of them being the credentials' key itself."""
        hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                    info=f"mcpkit-hub {purpose}".encode())
        return hkdf.derive(base64.urlsafe_b64decode(self._first_key))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SecretBox | None:
        """The box for `$MCPKIT_HUB_SECRET_KEY` (comma-separated keys), or None when unset."""
        value = (os.environ if environ is None else environ).get(SECRET_KEY_ENV, "")
        keys = [key.strip() for key in value.split(",") if key.strip()]
        if not keys:
            return None
        try:
            return cls(keys)
        except CredentialError as error:
            raise CredentialError(f"{SECRET_KEY_ENV}: {error}") from None

    def seal(self, value: Sealable) -> str:
        """Encrypt a string or a string-to-string mapping; the result is url-safe ASCII."""
        plain = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        return self._fernet.encrypt(plain.encode("utf-8")).decode("ascii")

    def open(self, token: str) -> Sealable:
        """Decrypt what `seal` made; `CredentialError` if no key opens it (or it was altered)."""
        try:
            plain = self._fernet.decrypt(token.encode("ascii"))
        except (InvalidToken, UnicodeEncodeError):
            raise CredentialError(
                "a stored credential cannot be decrypted: the secret key is not the one it was "
                f"sealed with (check {SECRET_KEY_ENV}) or the value was altered"
            ) from None
        value = json.loads(plain)
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            return value
        raise CredentialError("a stored credential does not hold a string or a mapping")

    def open_text(self, token: str) -> str:
        value = self.open(token)
        if not isinstance(value, str):
            raise CredentialError("a stored credential holds a mapping where a string was expected")
        return value

    def open_mapping(self, token: str) -> dict[str, str]:
        value = self.open(token)
        if not isinstance(value, dict):
            raise CredentialError("a stored credential holds a string where a mapping was expected")
        return value

    def rotate(self, token: str) -> str:
        """Re-seal `token` with the first key (after a new key was put first)."""
        try:
            return self._fernet.rotate(token.encode("ascii")).decode("ascii")
        except (InvalidToken, UnicodeEncodeError):
            raise CredentialError("a stored credential cannot be decrypted with any key") from None


def load_or_create_key(data_dir: Path) -> str:
    """The key in `<data_dir>/secret.key`, generating it (mode 0600) the first time.

    Safe when several processes start at once: the key is written to a private temporary file
    and linked into place, so exactly one key wins and nobody reads a half-written file.
    """
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = data_dir / KEY_FILE_NAME
    if not path.exists():
        _create_key_file(path)
    key = path.read_text(encoding="ascii").strip()
    _fernet(key, 1)  # refuses a damaged file with a clear message
    return key


def load_secret_box(data_dir: Path, environ: Mapping[str, str] | None = None) -> SecretBox:
    """The keys from `$MCPKIT_HUB_SECRET_KEY` when set, else the data directory's key file."""
    box = SecretBox.from_env(environ)
    if box is not None:
        return box
    return SecretBox([load_or_create_key(data_dir)])


def _create_key_file(path: Path) -> None:
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as file:
            file.write(generate_key() + "\n")
            file.flush()
            os.fsync(file.fileno())
        with contextlib.suppress(FileExistsError):  # another process made it first: use theirs
            os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _fernet(key: str | bytes, index: int) -> Fernet:
    raw = key.encode("ascii", "replace") if isinstance(key, str) else key
    try:
        if len(base64.urlsafe_b64decode(raw)) != 32:
            raise ValueError  # builtin: caught just below, with b64decode's, as a CredentialError
        return Fernet(raw)
    except (ValueError, TypeError):
        raise CredentialError(
            f"key {index} is not a Fernet key (32 bytes in url-safe base64; make one with "
            "`python -c 'from mcpkit.hub.crypto import generate_key; print(generate_key())'`)"
        ) from None
