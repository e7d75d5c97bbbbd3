"""Throwaway PostgreSQL and Redis servers on 127.0.0.1, for tests and benchmarks.

The hub keeps its registry in PostgreSQL and coordinates replicas through Redis, and a mock of
either proves nothing about transactions, locking or pub/sub. So the tests run the real servers,
but never the machine's system services: each `PostgresServer` / `RedisServer` is a fresh
process on a free port in its own temp dir, started and stopped by PID, so tests can run in
parallel, leave no state behind, and need nothing but the binaries (which
`scripts/install_services.sh` installs from the Debian packages).

Every wait is bounded (a start that does not finish raises `ServiceError` with the tail of the
server's log, after stopping what was started), `stop()` always reaps the process and removes
the temp dir, and nothing is registered globally (no atexit, no signal handlers): use the
classes as context managers or call `stop()` in a `finally`.

Only the standard library is used (no database client): readiness and SQL go through the `psql`
binary next to `postgres`, and Redis is spoken to in RESP over a plain socket.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Self

from mcpkit.errors import InvalidArgument, PeerError, Timeout, TransportError, UsageError

__all__ = [
    "HOST",
    "INSTALL_HINT",
    "PostgresServer",
    "RedisError",
    "RedisServer",
    "RespReply",
    "ServiceError",
    "ServiceUnavailable",
    "find_postgres_bin",
    "find_redis_server",
    "free_port",
    "redis_command",
]

HOST = "127.0.0.1"
"""The only address the servers listen on: nothing here is meant to be reachable from outside."""
INSTALL_HINT = "run scripts/install_services.sh"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
POSTGRES_SUPERUSER = "postgres"
_PG_LIB = Path("/usr/lib/postgresql")
_LOG_TAIL_BYTES = 4000
_PORT_ATTEMPTS = 3  # a free port can be taken between probing it and the server binding it
_POLL_S = 0.05
_SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes; the name adds "/.s.PGSQL.NNNNN"
_DB_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_BIND_FAILED = ("Address already in use", "could not bind", "could not create listen socket")


class ServiceUnavailable(UsageError, RuntimeError):
    """The binaries (or, as root, the `postgres` system user) are missing: an install problem,
    which test fixtures turn into a skip locally and a failure in CI."""


class _PastDeadline(Timeout):
    """A readiness poll ran past its deadline (caught, as any TimeoutError of the poll, by
    the launcher, which says what)."""


class ServiceError(PeerError, RuntimeError):
    """A server did not start or stop as expected, or a command against it failed."""


class RedisError(PeerError, RuntimeError):
    """An error reply from Redis (`-ERR ...`)."""


RespReply = str | bytes | int | None | list["RespReply"]
"""A decoded RESP2 reply: simple string -> str, bulk string -> bytes, integer -> int,
null -> None, array -> list."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the server may still lose it
    to a race, which the start loops retry)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _version_key(version: str) -> tuple[int, ...]:
    """Sort key for /usr/lib/postgresql/<version>: numeric, so 15 > 9.6; odd names last."""
    try:
        return tuple(int(part) for part in version.split("."))
    except ValueError:
        return (-1,)


def find_postgres_bin(name: str) -> Path | None:
    """A PostgreSQL program (`postgres`, `initdb`, `psql`, ...): from PATH, else from the
    Debian layout /usr/lib/postgresql/<version>/bin, newest version first, because Debian
    does not put the server programs on PATH. None when there is none."""
    found = shutil.which(name)
    if found is not None:
        return Path(found)
    candidates = sorted(
        _PG_LIB.glob(f"*/bin/{name}"),
        key=lambda path: _version_key(path.parent.parent.name),
        reverse=True,
    )
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def find_redis_server() -> Path | None:
    """The `redis-server` binary from PATH (or /usr/bin, /usr/local/bin when PATH is bare)."""
    found = shutil.which("redis-server")
    if found is not None:
        return Path(found)
    for candidate in (Path("/usr/bin/redis-server"), Path("/usr/local/bin/redis-server")):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _log_tail(path: Path | None, since: int = 0) -> str:
    """The last few KB of a server log (from byte `since`), for error messages."""
    if path is None:
        return "(no log)"
    try:
        with path.open("rb") as log:
            size = log.seek(0, os.SEEK_END)
            log.seek(max(since, size - _LOG_TAIL_BYTES))
            text = log.read().decode("utf-8", "replace").strip()
    except OSError as exc:
        return f"(log unreadable: {exc})"
    return text or "(log is empty)"


def _child_env(**extra: str) -> dict[str, str]:
    """The environment for server and client children: without PG* variables (PGHOST,
    PGOPTIONS, PGSSLMODE, ... would redirect or alter our connections) and in the C locale, so
    messages in the logs are the English ones the error paths look for."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
    env["LC_ALL"] = "C"
    env.update(extra)
    return env


def _tcp_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((HOST, port)) == 0


def _children(pid: int) -> list[int]:
    """PIDs whose parent is `pid` (Linux /proc; empty elsewhere). PostgreSQL's backends each
    call setsid(), so a process-group kill would miss them when the postmaster is SIGKILLed."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                stat_line = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            fields = stat_line.rsplit(")", 1)[-1].split()
            if len(fields) > 1 and fields[1] == str(pid):
                found.append(int(entry.name))
    return found


def _terminate(proc: subprocess.Popen[bytes], sig: signal.Signals, timeout: float) -> None:
    """Stop one server by its PID: `sig`, a bounded wait, then SIGKILL for it and its direct
    children; always reaps it, so the PID is gone afterwards."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, sig)
    try:
        proc.wait(timeout=timeout)
        return
    except subprocess.TimeoutExpired:
        pass
    for pid in [*_children(proc.pid), proc.pid]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=10)


@dataclass(frozen=True)
class _RunAs:
    """The unprivileged user a root process runs PostgreSQL as (it refuses to run as root)."""

    uid: int
    gid: int


def _postgres_run_as() -> _RunAs | None:
    """None when not root; else the `postgres` system user, which the Debian package creates.
    Missing, it is an install problem: nothing is created here."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(POSTGRES_SUPERUSER)
    except KeyError:
        raise ServiceUnavailable(
            "running as root, and PostgreSQL refuses to run as root, but there is no "
            f"'{POSTGRES_SUPERUSER}' system user to run it as (the Debian postgresql package "
            f"creates it): {INSTALL_HINT}"
        ) from None
    return _RunAs(entry.pw_uid, entry.pw_gid)


def _traversable_by_others(path: Path) -> bool:
    """Whether another user can reach `path` (every directory up to / has o+x)."""
    try:
        return all(
            part.stat().st_mode & stat.S_IXOTH for part in [path.resolve(), *path.resolve().parents]
        )
    except OSError:
        return False


def _bounded_wait(
    ready: Callable[[], bool],
    proc: subprocess.Popen[bytes],
    deadline: float,
) -> bool:
    """Poll `ready()` until it holds (True), the server exits (False), or `deadline` passes
    (`_PastDeadline`)."""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if ready():
            return True
        time.sleep(_POLL_S)
    raise _PastDeadline


class _ServiceProcess:
    """What a throwaway server process has in common: its process and port, the temp dirs
    removed when it stops, the stop sequence (`STOP_SIGNAL`, a bounded wait, SIGKILL) and
    the context manager. Subclasses define `start()`."""

    STOP_SIGNAL: signal.Signals = signal.SIGTERM

    def __init__(self, stop_timeout: float, start_timeout: float) -> None:
        self.stop_timeout = stop_timeout
        self.start_timeout = start_timeout
        self.start_seconds: float | None = None
        """How long the server took from launch to answering its probe (set by `start`)."""
        self._log_path: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._dirs: list[Path] = []

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        """`STOP_SIGNAL`, a bounded wait, SIGKILL as the fallback; then the temp dirs are
        removed. Idempotent."""
        proc, self._proc = self._proc, None
        try:
            if proc is not None:
                _terminate(proc, self.STOP_SIGNAL, self.stop_timeout)
        finally:
            dirs, self._dirs = self._dirs, []
            for directory in dirs:
                shutil.rmtree(directory, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _launch_on_free_port(
        self,
        name: str,
        probe: str,
        spawn: Callable[[int, BinaryIO], subprocess.Popen[bytes]],
        ready: Callable[[int, float], bool],
    ) -> None:
        """Spawn the server on a free port (its output appended to `_log_path`) and wait,
        bounded by `start_timeout`, until `ready(port, deadline)`; a port lost to a race
        (a bind failure in the log) is retried on another one."""
        log_path = self._log_path
        assert log_path is not None
        started = time.monotonic()
        deadline = started + self.start_timeout
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            port = free_port()
            log_start = log_path.stat().st_size if log_path.exists() else 0
            with log_path.open("ab") as log:
                self._proc = spawn(port, log)
            self._port = port
            try:
                answered = _bounded_wait(
                    functools.partial(ready, port, deadline), self._proc, deadline
                )
            except TimeoutError:
                raise ServiceError(
                    f"{name} did not answer {probe} on {HOST}:{port} within "
                    f"{self.start_timeout} s; log:\n{self.log_tail()}"
                ) from None
            if answered:
                self.start_seconds = time.monotonic() - started
                return
            code = self._proc.wait()
            self._proc = None
            tail = _log_tail(log_path, since=log_start)
            if attempt < _PORT_ATTEMPTS and any(text in tail for text in _BIND_FAILED):
                continue
            raise ServiceError(f"{name} exited with code {code} while starting; log:\n{tail}")

    def log_tail(self) -> str:
        raise NotImplementedError

    @property
    def port(self) -> int:
        if self._port is None or self._proc is None:
            raise ServiceError(f"the {type(self).__name__} is not running")
        return self._port

    @property
    def pid(self) -> int | None:
        """The server's PID while running."""
        return self._proc.pid if self._proc is not None else None


class PostgresServer(_ServiceProcess):
    """A throwaway PostgreSQL cluster: `initdb` in a temp dir, `postgres` on 127.0.0.1 and a
    free port, with durability off (fsync, synchronous_commit, full_page_writes: a test cluster
    is thrown away, so crash safety only costs time), trust authentication for the `postgres`
    superuser, and one database (`database`) created. Stopped by SIGINT (fast shutdown:
    disconnects clients; no checkpoint worth waiting for with fsync off).

    As root, initdb and postgres run as the `postgres` system user (the data dir is owned by it,
    mode 0700); SQL is sent with the `psql` next to the `postgres` binary, over TCP.

        with PostgresServer() as pg:
            engine = create_async_engine(pg.url)
            dsn = pg.create_database()  # an empty database per test
    """

    STOP_SIGNAL = signal.SIGINT

    def __init__(
        self,
        *,
        database: str = "mcpkit",
        bin_dir: Path | None = None,
        base_dir: Path | None = None,
        settings: Mapping[str, str] | None = None,
        start_timeout: float = START_TIMEOUT_S,
        stop_timeout: float = STOP_TIMEOUT_S,
    ) -> None:
        """`bin_dir` pins the directory of initdb/postgres/psql (default: `find_postgres_bin`);
        `base_dir` is where the temp dir goes (default: the system temp dir); `settings` are
        extra `-c name=value` server settings."""
        super().__init__(stop_timeout, start_timeout)
        _check_db_name(database)
        self.database = database
        self.bin_dir = bin_dir
        self.base_dir = base_dir
        self.settings = dict(settings or {})
        self.initdb_seconds: float | None = None
        """How long initdb took (set by `start`)."""
        self._data_dir: Path | None = None
        self._psql: Path | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        """initdb, launch, wait until `SELECT 1` answers, create `database`. On any failure
        everything started so far is stopped and removed before the error propagates."""
        if self._proc is not None or self._dirs:
            raise ServiceError("this PostgresServer was already started")
        initdb, postgres, psql = self._binaries()
        run_as = _postgres_run_as()
        self._psql = psql
        try:
            base = self._make_base_dir(run_as)
            self._data_dir = base / "data"
            self._log_path = base / "postgres.log"
            socket_dir = self._make_socket_dir(base, run_as)
            self._initdb(initdb, run_as)
            self._launch(postgres, socket_dir, run_as)
            self.psql(f'CREATE DATABASE "{self.database}"', database="postgres")
        except BaseException:
            self.stop()
            raise
        return self

    def __repr__(self) -> str:
        return f"<PostgresServer port={self._port} pid={self.pid} database={self.database!r}>"

    # -- addresses ---------------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        if self._data_dir is None:
            raise ServiceError("the PostgresServer was not started")
        return self._data_dir

    @property
    def psql_path(self) -> Path:
        """The `psql` of the same installation as the server (set by `start`)."""
        if self._psql is None:
            raise ServiceError("the PostgresServer was not started")
        return self._psql

    @property
    def url(self) -> str:
        """SQLAlchemy URL of `database` for the asyncpg driver."""
        return self.url_for(self.database)

    @property
    def dsn(self) -> str:
        """libpq/asyncpg DSN of `database`."""
        return self.dsn_for(self.database)

    def url_for(self, database: str) -> str:
        return f"postgresql+asyncpg://{POSTGRES_SUPERUSER}@{HOST}:{self.port}/{database}"

    def dsn_for(self, database: str) -> str:
        return f"postgresql://{POSTGRES_SUPERUSER}@{HOST}:{self.port}/{database}"

    # -- SQL ---------------------------------------------------------------------------------

    def create_database(self, name: str | None = None) -> str:
        """Create an empty database (default: a random `db_<hex>` name) and return its DSN:
        one per test keeps tests isolated without a new cluster each."""
        name = name if name is not None else f"db_{secrets.token_hex(6)}"
        _check_db_name(name)
        self.psql(f'CREATE DATABASE "{name}"', database="postgres")
        return self.dsn_for(name)

    def psql(self, sql: str, database: str | None = None, timeout: float = 30.0) -> str:
        """Run SQL through `psql` (statements one by one, stopping at the first error) and
        return its unaligned, tuples-only output, e.g. "1" for `SELECT 1`."""
        return self._run_psql(sql, database or self.database, self.port, timeout)

    def log_tail(self) -> str:
        """The end of the server's log (initdb's output included)."""
        return _log_tail(self._log_path)

    # -- internals ---------------------------------------------------------------------------

    def _binaries(self) -> tuple[Path, Path, Path]:
        """initdb, postgres and psql of one installation: those next to the real `postgres`
        binary (symlinks resolved, so /usr/local/bin/postgres -> /usr/lib/postgresql/15/bin),
        falling back to a search only when no bin_dir was given."""
        names = ("initdb", "postgres", "psql")
        if self.bin_dir is not None:
            found: dict[str, Path | None] = {
                name: (self.bin_dir / name if (self.bin_dir / name).is_file() else None)
                for name in names
            }
        else:
            postgres = find_postgres_bin("postgres")
            home = postgres.resolve().parent if postgres is not None else None
            found = {
                name: (home / name if home and (home / name).is_file() else find_postgres_bin(name))
                for name in names
            }
        missing = [name for name, path in found.items() if path is None]
        if missing:
            where = f" in {self.bin_dir}" if self.bin_dir is not None else ""
            raise ServiceUnavailable(
                f"PostgreSQL programs not found{where}: {', '.join(missing)}: {INSTALL_HINT}"
            )
        initdb, postgres_bin, psql = (found[name] for name in names)
        assert initdb is not None and postgres_bin is not None and psql is not None
        return initdb, postgres_bin, psql

    def _make_base_dir(self, run_as: _RunAs | None) -> Path:
        parent = self.base_dir if self.base_dir is not None else Path(tempfile.gettempdir())
        if run_as is not None and not _traversable_by_others(parent):
            if self.base_dir is not None:
                raise ServiceError(
                    f"{parent} is not reachable by the '{POSTGRES_SUPERUSER}' user "
                    "(a directory on the way lacks o+x); pass another base_dir"
                )
            parent = Path("/tmp")
        base = Path(tempfile.mkdtemp(prefix="mcpkit-pg-", dir=parent))
        self._dirs.append(base)
        if run_as is not None:
            os.chown(base, run_as.uid, run_as.gid)
        return base

    def _make_socket_dir(self, base: Path, run_as: _RunAs | None) -> Path:
        """The Unix socket dir (-k): inside the temp dir unless that path is too long for a
        socket name, then a short one in /tmp (removed with the rest)."""
        socket_dir = base / "sock"
        if len(str(socket_dir)) > _SOCKET_PATH_MAX:
            socket_dir = Path(tempfile.mkdtemp(prefix="mcpkit-pgs-", dir="/tmp"))
            self._dirs.append(socket_dir)
        else:
            socket_dir.mkdir(mode=0o700)
        if run_as is not None:
            os.chown(socket_dir, run_as.uid, run_as.gid)
        return socket_dir

    def _initdb(self, initdb: Path, run_as: _RunAs | None) -> None:
        assert self._data_dir is not None and self._log_path is not None
        args = [
            str(initdb),
            "-D",
            str(self._data_dir),
            "-A",
            "trust",
            "-U",
            POSTGRES_SUPERUSER,
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C",
        ]
        started = time.monotonic()
        with self._log_path.open("ab") as log:
            try:
                result = subprocess.run(
                    args,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self._data_dir.parent,
                    env=_child_env(),
                    timeout=self.start_timeout,
                    check=False,
                    user=run_as.uid if run_as is not None else None,
                    group=run_as.gid if run_as is not None else None,
                    extra_groups=[] if run_as is not None else None,
                )
            except subprocess.TimeoutExpired:
                raise ServiceError(
                    f"initdb did not finish within {self.start_timeout} s; log:\n{self.log_tail()}"
                ) from None
        if result.returncode != 0:
            raise ServiceError(
                f"initdb failed with exit code {result.returncode}; log:\n{self.log_tail()}"
            )
        self.initdb_seconds = time.monotonic() - started

    def _launch(self, postgres: Path, socket_dir: Path, run_as: _RunAs | None) -> None:
        """Start the postmaster and wait, bounded, until `SELECT 1` answers."""
        data_dir = self._data_dir
        assert data_dir is not None

        def spawn(port: int, log: BinaryIO) -> subprocess.Popen[bytes]:
            args = [
                str(postgres),
                "-D",
                str(data_dir),
                "-k",
                str(socket_dir),
                "-h",
                HOST,
                "-p",
                str(port),
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
            ]
            for name, value in self.settings.items():
                args += ["-c", f"{name}={value}"]
            return _popen(args, log, data_dir.parent, _child_env(), run_as)

        self._launch_on_free_port("postgres", "SELECT 1", spawn, self._answers)

    def _answers(self, port: int, deadline: float) -> bool:
        """Whether the server runs queries, not just accepts TCP (during startup and recovery
        it accepts connections only to refuse them); psql only once the port is open."""
        if not _tcp_open(port):
            return False
        timeout = max(0.5, min(5.0, deadline - time.monotonic()))
        try:
            return self._run_psql("SELECT 1", "postgres", port, timeout) == "1"
        except ServiceError:
            return False

    def _run_psql(self, sql: str, database: str, port: int, timeout: float) -> str:
        if self._psql is None:
            raise ServiceError("the PostgresServer was not started")
        args = [
            str(self._psql),
            "-X",  # no ~/.psqlrc
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            HOST,
            "-p",
            str(port),
            "-U",
            POSTGRES_SUPERUSER,
            "-d",
            database,
            "-f",
            "-",
        ]
        env = _child_env(PGCONNECT_TIMEOUT=str(max(1, int(timeout))), PGCLIENTENCODING="UTF8")
        try:
            result = subprocess.run(
                args,
                input=sql.encode(),
                capture_output=True,
                env=env,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ServiceError(f"psql did not finish within {timeout} s: {sql[:200]}") from None
        if result.returncode != 0:
            raise ServiceError(
                f"psql failed with exit code {result.returncode}: "
                f"{result.stderr.decode('utf-8', 'replace').strip()}"
            )
        return result.stdout.decode("utf-8", "replace").strip()


def _check_db_name(name: str) -> None:
    """Database names are interpolated into SQL and URLs: plain lower-case identifiers only."""
    if not _DB_NAME.fullmatch(name):
        raise InvalidArgument(f"database name must match {_DB_NAME.pattern}: {name!r}")


def _popen(
    args: Sequence[str], log: BinaryIO, cwd: Path, env: Mapping[str, str], run_as: _RunAs | None
) -> subprocess.Popen[bytes]:
    """A server process logging to `log`, in its own session (a terminal's Ctrl-C reaches the
    test runner, whose cleanup then stops the server in order), as `run_as` when given (no
    supplementary groups kept)."""
    return subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        env=env,
        start_new_session=True,
        user=run_as.uid if run_as is not None else None,
        group=run_as.gid if run_as is not None else None,
        extra_groups=[] if run_as is not None else None,
    )


# -- Redis -------------------------------------------------------------------------------------


def _encode_command(args: Sequence[str | bytes | int]) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def _read_reply(reader: BinaryIO, depth: int = 0) -> RespReply:
    if depth > 32:
        raise ServiceError("RESP reply nested too deeply")
    line = reader.readline(1 << 20)
    if not line.endswith(b"\r\n"):
        raise TransportError("Redis closed the connection mid-reply")
    kind, body = line[:1], line[1:-2]
    if kind == b"+":
        return body.decode()
    if kind == b"-":
        raise RedisError(body.decode("utf-8", "replace"))
    if kind == b":":
        return int(body)
    if kind == b"$":
        length = int(body)
        if length < 0:
            return None
        data = reader.read(length + 2)
        if len(data) != length + 2:
            raise TransportError("Redis closed the connection mid-reply")
        return data[:-2]
    if kind == b"*":
        count = int(body)
        if count < 0:
            return None
        return [_read_reply(reader, depth + 1) for _ in range(count)]
    raise ServiceError(f"unexpected RESP reply: {line[:100]!r}")


def redis_command(port: int, *args: str | bytes | int, timeout: float = 5.0) -> RespReply:
    """Send one command to the Redis on 127.0.0.1:`port` over a fresh connection and return the
    decoded reply (error replies raise `RedisError`). RESP2 over a plain socket: enough for
    tests and readiness checks without a client library."""
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        sock.sendall(_encode_command(args))
        with sock.makefile("rb") as reader:
            return _read_reply(reader)


class RedisServer(_ServiceProcess):
    """A throwaway `redis-server` on 127.0.0.1 and a free port: no persistence (no RDB, no
    AOF), protected mode on, its working dir a temp dir; ready when PING answers PONG.

        with RedisServer() as redis:
            client = Redis.from_url(redis.url)
    """

    def __init__(
        self,
        *,
        binary: Path | None = None,
        base_dir: Path | None = None,
        extra_args: Sequence[str] = (),
        start_timeout: float = START_TIMEOUT_S,
        stop_timeout: float = STOP_TIMEOUT_S,
    ) -> None:
        """`binary` pins redis-server (default: `find_redis_server`); `extra_args` are appended
        to its command line (e.g. ["--maxmemory", "64mb"])."""
        super().__init__(stop_timeout, start_timeout)
        self.binary = binary
        self.base_dir = base_dir
        self.extra_args = list(extra_args)
        self._dir: Path | None = None

    def start(self) -> Self:
        """Launch and wait, bounded, for PONG; on failure nothing is left behind."""
        if self._proc is not None or self._dirs:
            raise ServiceError("this RedisServer was already started")
        binary = self.binary if self.binary is not None else find_redis_server()
        if binary is None or not binary.is_file():
            raise ServiceUnavailable(f"redis-server not found: {INSTALL_HINT}")
        try:
            self._dir = Path(tempfile.mkdtemp(prefix="mcpkit-redis-", dir=self.base_dir))
            self._dirs.append(self._dir)
            self._log_path = self._dir / "redis.log"
            self._launch(binary)
        except BaseException:
            self.stop()
            raise
        return self

    def __repr__(self) -> str:
        return f"<RedisServer port={self._port} pid={self.pid}>"

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def command(self, *args: str | bytes | int, timeout: float = 5.0) -> RespReply:
        """One command over a fresh connection, e.g. `command("FLUSHALL")` between tests."""
        return redis_command(self.port, *args, timeout=timeout)

    def log_tail(self) -> str:
        return _log_tail(self._log_path)

    def _launch(self, binary: Path) -> None:
        directory = self._dir
        assert directory is not None

        def spawn(port: int, log: BinaryIO) -> subprocess.Popen[bytes]:
            args = [
                str(binary),
                "--port",
                str(port),
                "--bind",
                HOST,
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(directory),
                "--daemonize",
                "no",
                "--protected-mode",
                "yes",
                *self.extra_args,
            ]
            return _popen(args, log, directory, dict(os.environ), None)

        self._launch_on_free_port("redis-server", "PING", spawn, lambda port, _: _pong(port))


def _pong(port: int) -> bool:
    """Whether Redis answers PING (not -LOADING or a refused connection)."""
    try:
        return redis_command(port, "PING", timeout=1.0) == "PONG"
    except (OSError, RedisError, ServiceError):
        return False
