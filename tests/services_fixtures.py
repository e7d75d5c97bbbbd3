"""Pytest fixtures for real PostgreSQL and Redis servers (mcpkit.testing.services).

Import the ones a test module needs, including those the used ones depend on, and re-export
them (pytest finds fixtures by name in the module; `__all__` keeps ruff from reading them as
unused imports redefined by the test arguments):

    from tests.services_fixtures import postgres_db, postgres_server, redis_server
    __all__ = ["postgres_db", "postgres_server", "redis_server"]

(or import them once in the conftest.py of a test directory, with `# noqa: F401`).

One throwaway server of each kind per test session (initdb costs a second or two), and a fresh
database per test (`postgres_db`), so tests stay isolated without a cluster each.

When the binaries are missing: locally the tests skip with the hint to install them; in CI (the
`CI` variable set) they fail, because the test run must prove the real thing and `.ci/run`
installs the servers first (scripts/install_services.sh).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NoReturn, TypeVar

import pytest

from mcpkit.testing.services import PostgresServer, RedisServer, ServiceUnavailable


def unavailable(exc: ServiceUnavailable) -> NoReturn:
    """A missing server binary: a failure in CI, a skip (with the install hint) locally."""
    # the message already ends with the hint: "run scripts/install_services.sh"
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the real servers: {exc}", pytrace=False)
    pytest.skip(str(exc))


Server = TypeVar("Server", PostgresServer, RedisServer)


@contextlib.contextmanager
def running(server: Server) -> Iterator[Server]:
    """Start a server for the `with` block and stop it after, under the missing-binaries policy
    above: for tests that need a server of their own (a second one, or one they stop)."""
    try:
        server.start()
    except ServiceUnavailable as exc:
        unavailable(exc)
    try:
        yield server
    finally:
        server.stop()


@dataclass(frozen=True)
class PostgresDatabase:
    """One fresh database on the session's server: `dsn` for libpq/asyncpg, `url` for
    SQLAlchemy's asyncpg dialect."""

    name: str
    dsn: str
    url: str
    server: PostgresServer


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's PostgreSQL on 127.0.0.1 (stopped, and its temp dir removed, at the end)."""
    with running(PostgresServer()) as server:
        yield server


@pytest.fixture
def postgres_db(postgres_server: PostgresServer) -> PostgresDatabase:
    """An empty database of its own for one test (left for the cluster's teardown to remove)."""
    dsn = postgres_server.create_database()
    name = dsn.rsplit("/", 1)[1]
    return PostgresDatabase(name, dsn, postgres_server.url_for(name), postgres_server)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """The session's Redis on 127.0.0.1; tests that need it empty call `command("FLUSHALL")`."""
    with running(RedisServer()) as server:
        yield server
