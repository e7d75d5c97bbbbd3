"""mcpkit.testing.services: real PostgreSQL and Redis servers, started on 127.0.0.1 on free
ports, used for real (SQL through psql, RESP over a raw socket), and gone after `stop()`."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.procs import pid_gone
from tests.services_fixtures import (
    PostgresDatabase,
    postgres_db,
    postgres_server,
    redis_server,
    running,
)

from mcpkit.testing.services import (
    HOST,
    PostgresServer,
    RedisError,
    RedisServer,
    ServiceError,
    ServiceUnavailable,
    find_postgres_bin,
)

# re-exported: the fixtures are used by name (this keeps ruff from reading them as unused and
# then redefined by the test arguments)
__all__ = ["postgres_db", "postgres_server", "redis_server"]


def children(pid: int) -> list[int]:
    """The PIDs whose parent is `pid` (PostgreSQL's backends and auxiliary processes)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[1] == str(pid):
                found.append(int(entry.name))
    return found


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((HOST, port)) == 0


def resp(sock: socket.socket, *args: bytes) -> bytes:
    """Send one RESP2 command, return the raw reply (one line, or one bulk string)."""
    sock.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
    reply = b""
    while not reply.endswith(b"\r\n") or (reply.startswith(b"$") and reply.count(b"\r\n") < 2):
        if reply.startswith(b"$-1\r\n"):
            break
        chunk = sock.recv(4096)
        assert chunk, "Redis closed the connection"
        reply += chunk
    return reply


@pytest.fixture
def shared_base_dir() -> Iterator[Path]:
    """A base dir the `postgres` user can reach even when the tests run as root (pytest's
    tmp_path lives under a 0700 dir of root's)."""
    path = Path(tempfile.mkdtemp(prefix="mcpkit-test-pg-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


# -- PostgreSQL --------------------------------------------------------------------------------


def test_postgres_runs_sql(postgres_server: PostgresServer) -> None:
    port = postgres_server.port
    assert postgres_server.url == f"postgresql+asyncpg://postgres@127.0.0.1:{port}/mcpkit"
    assert postgres_server.dsn == f"postgresql://postgres@127.0.0.1:{port}/mcpkit"
    out = postgres_server.psql(
        "CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL);"
        "INSERT INTO notes (body) VALUES ('one'), ('twö');"
        "SELECT id, body FROM notes ORDER BY id;"
    )
    assert out.splitlines() == ["1|one", "2|twö"]
    # the dsn works as is for a libpq client (psql takes a URI as its database argument)
    direct = subprocess.run(
        [str(postgres_server.psql_path), "-X", "-A", "-t", postgres_server.dsn, "-c",
         "SELECT count(*), current_database(), current_user, "
         "current_setting('fsync'), inet_server_addr() FROM notes"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    assert direct.stdout.strip() == "2|mcpkit|postgres|off|127.0.0.1"
    with pytest.raises(ServiceError, match="does not exist"):
        postgres_server.psql("SELECT * FROM no_such_table")


def test_create_database_is_separate(postgres_server: PostgresServer) -> None:
    dsn = postgres_server.create_database("second_db")
    assert dsn == f"postgresql://postgres@127.0.0.1:{postgres_server.port}/second_db"
    postgres_server.psql(
        "CREATE TABLE only_here (x int); INSERT INTO only_here VALUES (7)", "second_db"
    )
    assert postgres_server.psql("SELECT x FROM only_here", "second_db") == "7"
    tables = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'only_here'"
    assert postgres_server.psql(tables) == "0"
    with pytest.raises(ServiceError, match="already exists"):
        postgres_server.create_database("second_db")
    with pytest.raises(ValueError, match="database name"):
        postgres_server.create_database('x"; DROP DATABASE mcpkit; --')


def test_postgres_db_fixture_gives_a_fresh_database(postgres_db: PostgresDatabase) -> None:
    server = postgres_db.server
    assert postgres_db.name != server.database
    assert postgres_db.dsn == f"postgresql://postgres@127.0.0.1:{server.port}/{postgres_db.name}"
    assert postgres_db.url == server.url_for(postgres_db.name)
    user_tables = "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
    assert server.psql(user_tables, postgres_db.name) == "0"
    server.psql("CREATE TABLE mine (x int)", postgres_db.name)
    assert server.psql(user_tables, postgres_db.name) == "1"


def test_second_postgres_runs_concurrently_and_stops_cleanly(
    postgres_server: PostgresServer,
) -> None:
    postgres_server.psql("CREATE TABLE IF NOT EXISTS which (name text)")
    postgres_server.psql("DELETE FROM which; INSERT INTO which VALUES ('session')")
    with running(PostgresServer(database="other")) as other:
        postmaster, port, base = other.pid, other.port, other.data_dir.parent
        assert port != postgres_server.port
        assert postmaster is not None and postmaster != postgres_server.pid
        other.psql("CREATE TABLE which (name text); INSERT INTO which VALUES ('other')")
        assert other.psql("SELECT name FROM which") == "other"
        assert postgres_server.psql("SELECT name FROM which") == "session"
        assert other.initdb_seconds is not None and other.start_seconds is not None
        # an open client session: stop must end its backend too
        client = subprocess.Popen(
            [str(other.psql_path), "-X", other.dsn],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            assert client.stdin is not None
            client.stdin.write(b"SELECT 1;\n")
            client.stdin.flush()
            others = (
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
            )
            deadline = time.monotonic() + 10
            while other.psql(others) != "1":
                assert time.monotonic() < deadline, "the psql client never connected"
                time.sleep(0.05)
            processes = [postmaster, *children(postmaster)]
            assert len(processes) >= 6  # checkpointer, walwriter, ... and the client's backend
        finally:
            other.stop()
            if client.stdin is not None:
                client.stdin.close()
            client.wait(timeout=10)
    assert all(pid_gone(pid) for pid in processes)
    assert not base.exists()
    assert not port_open(port)
    assert other.pid is None
    other.stop()  # idempotent
    assert postgres_server.psql("SELECT name FROM which") == "session"


@pytest.mark.skipif(os.geteuid() != 0, reason="only as root is PostgreSQL run as another user")
def test_as_root_postgres_runs_as_the_postgres_user(postgres_server: PostgresServer) -> None:
    postgres = pwd.getpwnam("postgres")
    info = postgres_server.data_dir.stat()
    assert (info.st_uid, info.st_mode & 0o777) == (postgres.pw_uid, 0o700)
    status = Path(f"/proc/{postgres_server.pid}/status").read_text()
    uids = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1:]
    assert set(uids) == {str(postgres.pw_uid)}


def test_postgres_start_failure_reports_the_log_and_leaves_nothing(shared_base_dir: Path) -> None:
    server = PostgresServer(base_dir=shared_base_dir, settings={"no_such_setting": "1"})
    with pytest.raises(ServiceError, match="no_such_setting") as caught:
        with running(server):
            pass
    assert "exited with code" in str(caught.value)
    assert list(shared_base_dir.iterdir()) == []
    assert server.pid is None


def test_missing_binaries_are_reported_with_the_install_hint(tmp_path: Path) -> None:
    with pytest.raises(ServiceUnavailable, match=r"initdb, postgres, psql: run scripts/install"):
        PostgresServer(bin_dir=tmp_path).start()
    with pytest.raises(ServiceUnavailable, match="redis-server not found: run scripts/install"):
        RedisServer(binary=tmp_path / "redis-server").start()
    assert list(tmp_path.iterdir()) == []
    assert find_postgres_bin("no-such-postgres-program") is None


def test_database_names_are_plain_identifiers() -> None:
    with pytest.raises(ValueError, match="database name"):
        PostgresServer(database="Has-Dash")


# -- Redis -------------------------------------------------------------------------------------


def test_redis_set_get_over_raw_resp(redis_server: RedisServer) -> None:
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    with socket.create_connection((HOST, redis_server.port), timeout=5) as sock:
        assert resp(sock, b"SET", b"greeting", b"hello\r\nworld") == b"+OK\r\n"
        assert resp(sock, b"GET", b"greeting") == b"$12\r\nhello\r\nworld\r\n"
        assert resp(sock, b"GET", b"missing") == b"$-1\r\n"
        assert resp(sock, b"CONFIG", b"GET", b"save").startswith(b"*2\r\n")
    # the helper client decodes the same replies
    assert redis_server.command("INCR", "counter") == 1
    assert redis_server.command("GET", "greeting") == b"hello\r\nworld"
    assert redis_server.command("MGET", "greeting", "missing") == [b"hello\r\nworld", None]
    assert redis_server.command("CONFIG", "GET", "appendonly") == [b"appendonly", b"no"]
    assert redis_server.command("CONFIG", "GET", "bind") == [b"bind", b"127.0.0.1"]
    with pytest.raises(RedisError, match="ERR unknown command"):
        redis_server.command("NO-SUCH-COMMAND")
    assert redis_server.command("FLUSHALL") == "OK"


def test_second_redis_runs_concurrently_and_stops_cleanly(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    redis_server.command("SET", "where", "session")
    with running(RedisServer(base_dir=tmp_path)) as other:
        assert other.port != redis_server.port
        other.command("SET", "where", "other")
        assert redis_server.command("GET", "where") == b"session"
        pid, port = other.pid, other.port
        assert pid is not None
        assert other.start_seconds is not None
    assert pid_gone(pid)
    assert not port_open(port)
    assert list(tmp_path.iterdir()) == []
    assert other.pid is None
    assert redis_server.command("GET", "where") == b"session"
