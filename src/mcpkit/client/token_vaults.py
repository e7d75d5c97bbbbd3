"""Where a persistent token store's records live: named byte strings (token_records.py says
what is in them), read and written synchronously (the store calls them from a worker thread).

    FileVault     every record in one JSON file, `tokens.json`, mode 0600 in a 0700
                  directory; each change is read-modify-write under the directory's lock file
                  and lands by atomic replace (private_files.py)
    KeyringVault  one keyring entry per record (service `mcpkit-oauth`, user = the record
                  name, password = the record); since a keyring cannot list its entries, the
                  record names are kept in `keyring-index.json` in the directory - names only
                  (hashes of the keys), never a secret
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import msgspec

from mcpkit.client.private_files import (
    LOCK_TIMEOUT_S,
    read_private,
    remove_stale_temps,
    store_lock,
    write_private,
)
from mcpkit.client.token_records import TokenStoreError

KEYRING_SERVICE = "mcpkit-oauth"
"""The keyring service name every mcpkit OAuth entry is stored under."""

MAX_RECORDS = 1000
"""Bound on the records of one store (a file or an index over it is refused beyond it)."""

MAX_FILE_BYTES = 16 * 1024 * 1024
"""Bound on the token file (a grant with its metadata is a few KiB)."""

FILE_NAME = "tokens.json"
INDEX_NAME = "keyring-index.json"
LOCK_NAME = "store.lock"
FORMAT_VERSION = 1


class Vault(Protocol):
    kind: str
    location: str
    directory: Path
    lock_timeout_s: float

    def read(self, name: str) -> bytes | None: ...
    def write(self, name: str, data: bytes) -> None: ...
    def remove(self, name: str) -> None: ...
    def names(self) -> list[str]: ...


class _FileDoc(msgspec.Struct):
    version: int
    records: dict[str, msgspec.Raw] = {}


class _IndexDoc(msgspec.Struct):
    version: int
    names: list[str] = []


def _decode_doc(data: bytes | None, kind: type[Any], path: Path) -> Any:
    if data is None:
        return kind(FORMAT_VERSION)
    try:
        doc = msgspec.json.decode(data, type=kind)
    except msgspec.ValidationError as exc:
        raise TokenStoreError(f"{path} is not an mcpkit token file: {exc}; move it away "
                              "(its logins are lost) or restore it") from None
    except msgspec.DecodeError:
        raise TokenStoreError(f"{path} is corrupt (not JSON); move it away (its logins are "
                              "lost) or restore it") from None
    if doc.version != FORMAT_VERSION:
        raise TokenStoreError(f"{path} has format version {doc.version}, not "
                              f"{FORMAT_VERSION} (written by another mcpkit version?)")
    return doc


class FileVault:
    kind = "file"

    def __init__(self, directory: Path, *, lock_timeout_s: float = LOCK_TIMEOUT_S,
                 max_records: int = MAX_RECORDS, max_bytes: int = MAX_FILE_BYTES) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.path = directory / FILE_NAME
        self.location = str(self.path)
        self.lock_timeout_s = lock_timeout_s
        self.max_records = max_records

    def _load(self) -> _FileDoc:
        data = read_private(self.path, self.max_bytes)
        doc: _FileDoc = _decode_doc(data, _FileDoc, self.path)
        return doc

    def _change(self, name: str, record: bytes | None) -> None:
        with store_lock(self.directory / LOCK_NAME, self.lock_timeout_s):
            doc = self._load()  # read again under the lock: another process may have written
            if record is None:
                if doc.records.pop(name, None) is None:
                    return
            else:
                if name not in doc.records and len(doc.records) >= self.max_records:
                    raise TokenStoreError(
                        f"{self.path} holds {len(doc.records)} records, the limit "
                        f"(max_records): log out of servers no longer used")
                doc.records[name] = msgspec.Raw(record)
            data = msgspec.json.encode(doc)
            if len(data) > self.max_bytes:  # written, it could not be read back
                raise TokenStoreError(f"{self.path} would grow over its {self.max_bytes}-byte "
                                      "limit: log out of servers no longer used")
            remove_stale_temps(self.path)
            write_private(self.path, data)

    def read(self, name: str) -> bytes | None:
        raw = self._load().records.get(name)
        return bytes(raw) if raw is not None else None

    def write(self, name: str, data: bytes) -> None:
        self._change(name, data)

    def remove(self, name: str) -> None:
        self._change(name, None)

    def names(self) -> list[str]:
        return sorted(self._load().records)


class KeyringVault:
    kind = "keyring"

    def __init__(self, backend: Any, directory: Path, *,
                 lock_timeout_s: float = LOCK_TIMEOUT_S, max_records: int = MAX_RECORDS,
                 service: str = KEYRING_SERVICE) -> None:
        """`backend`: a `keyring.backend.KeyringBackend` (see open_token_store)."""
        self.backend = backend
        self.directory = directory
        self.index_path = directory / INDEX_NAME
        self.service = service
        self.location = f"{_backend_name(backend)} (service {service!r}; index {self.index_path})"
        self.lock_timeout_s = lock_timeout_s
        self.max_records = max_records

    def _index(self) -> list[str]:
        data = read_private(self.index_path, 128 * self.max_records + 1024)
        doc: _IndexDoc = _decode_doc(data, _IndexDoc, self.index_path)
        return doc.names

    def _save_index(self, names: list[str]) -> None:
        remove_stale_temps(self.index_path)
        write_private(self.index_path, msgspec.json.encode(_IndexDoc(FORMAT_VERSION,
                                                                     sorted(set(names)))))

    def read(self, name: str) -> bytes | None:
        value = self._call("read", self.backend.get_password, self.service, name)
        return value.encode() if isinstance(value, str) else None

    def write(self, name: str, data: bytes) -> None:
        with store_lock(self.directory / LOCK_NAME, self.lock_timeout_s):
            names = self._index()
            if name not in names and len(names) >= self.max_records:
                raise TokenStoreError(f"{self.index_path} names {len(names)} records, the "
                                      "limit (max_records): log out of servers no longer used")
            self._call("write", self.backend.set_password, self.service, name, data.decode())
            if name not in names:
                self._save_index([*names, name])

    def remove(self, name: str) -> None:
        from keyring.errors import PasswordDeleteError

        with store_lock(self.directory / LOCK_NAME, self.lock_timeout_s):
            try:
                self._call("remove", self.backend.delete_password, self.service, name)
            except TokenStoreError as exc:
                if not isinstance(exc.__cause__, PasswordDeleteError):
                    raise  # PasswordDeleteError: not there (anymore) - nothing to remove
            names = self._index()
            if name in names:
                self._save_index([n for n in names if n != name])

    def names(self) -> list[str]:
        return self._index()

    def _call(self, what: str, method: Any, *args: str) -> Any:
        from keyring.errors import KeyringError

        try:
            return method(*args)
        except KeyringError as exc:
            # the exception's text comes from the keyring backend, never from the value
            raise TokenStoreError(f"the keyring ({self.location}) refused to {what} an entry:"
                                  f" {type(exc).__name__}: {exc}") from exc


def _backend_name(backend: Any) -> str:
    cls = type(backend)
    return f"keyring {cls.__module__.removeprefix('keyring.backends.')}.{cls.__name__}"
