"""Files only this user may read, written so that no reader ever sees half of one.

    private_directory(path)   create it 0700 (parents too); refuse one others can enter
    write_private(path, data) temp file 0600 in the same directory + fsync + os.replace +
                              fsync of the directory: a crash leaves the old file or the new
                              one, never a mix (POSIX rename is atomic); temp files a crashed
                              writer left are removed by the next write (under the lock)
    read_private(path, …)     the bytes (None when absent), bounded; refuse a file others can
                              read, or a symlink (it could point anywhere)
    store_lock(path, …)       a cross-process lock file beside the data (filelock), with a
                              bounded wait

Errors are TokenStoreError naming the path and the fault."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import filelock

from mcpkit.client.token_records import TokenStoreError
from mcpkit.errors import Timeout

LOCK_TIMEOUT_S = 30.0
"""Default bound on waiting for a store's or a refresh's cross-process lock."""


class LockTimeout(TokenStoreError, Timeout):
    """Another process held a token store lock past the bound (`lock_timeout_s`)."""


def private_directory(path: Path) -> None:
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.lstat()
    except OSError as exc:
        raise TokenStoreError(f"cannot create the token directory {path}: {exc.strerror}") \
            from exc
    if not stat.S_ISDIR(info.st_mode):
        raise TokenStoreError(f"the token directory {path} is not a directory")
    if info.st_mode & 0o077:
        raise TokenStoreError(
            f"the token directory {path} is open to other users (mode "
            f"{stat.S_IMODE(info.st_mode):04o}): run `chmod 700 {path}` or choose another")


def write_private(path: Path, data: bytes) -> None:
    try:
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise TokenStoreError(f"cannot write in {path.parent}: {exc.strerror}") from exc
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), 0o600)  # mkstemp makes it 0600 already; say so anyway
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
        _sync_directory(path.parent)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)  # no-op after the replace: the name is gone
        if isinstance(exc, OSError):
            raise TokenStoreError(f"cannot write {path}: {exc.strerror or exc}") from exc
        raise


def remove_stale_temps(path: Path) -> None:
    """Remove the temp files of writes to `path` that a crash interrupted (they may hold
    tokens). Only under the lock every writer of `path` holds, so none is in use."""
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            stale.unlink()


def _sync_directory(directory: Path) -> None:
    """Make the rename itself durable (a crash right after os.replace keeps the new file)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_private(path: Path, max_bytes: int) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise TokenStoreError(f"cannot read {path}: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise TokenStoreError(f"{path} is not a regular file")
        if info.st_mode & 0o077:
            raise TokenStoreError(
                f"{path} is readable by other users (mode {stat.S_IMODE(info.st_mode):04o}):"
                f" run `chmod 600 {path}`")
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TokenStoreError(f"{path} is over the {max_bytes}-byte limit")
    return data


@contextlib.contextmanager
def store_lock(path: Path, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Hold `path` (a lock file) for the block; LockTimeout after `timeout_s`. The lock is
    released whichever thread leaves the block (thread_local=False), so an async caller may
    take and drop it from different worker threads."""
    lock = filelock.FileLock(path, mode=0o600, thread_local=False)
    try:
        lock.acquire(timeout=timeout_s)
    except filelock.Timeout:
        raise LockTimeout(
            f"another process held the token store lock {path} for over {timeout_s:g} s "
            "(a stuck mcpkit? raise lock_timeout_s, or end that process)") from None
    try:
        yield
    finally:
        lock.release()
