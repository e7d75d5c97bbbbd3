"""Fixtures of the hub's tests: `database_url` runs a test on a SQLite file and on a fresh
PostgreSQL database (tests/services_fixtures.py), and `store` opens a migrated `Store` on it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit.hub.crypto import SecretBox, generate_key
from mcpkit.hub.store import Store

try:
    from tests.services_fixtures import postgres_db, postgres_server  # noqa: F401

    POSTGRES_MISSING: str | None = None
except ImportError as error:  # the PostgreSQL fixtures have not landed in this checkout
    POSTGRES_MISSING = f"no PostgreSQL fixture (tests/services_fixtures.py): {error}"


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    if POSTGRES_MISSING:
        pytest.skip(POSTGRES_MISSING)
    url: str = request.getfixturevalue("postgres_db").url
    return url


@pytest.fixture
def box() -> SecretBox:
    return SecretBox([generate_key()])


@pytest.fixture
async def store(database_url: str, box: SecretBox, anyio_backend: Any) -> AsyncIterator[Store]:
    async with await Store.open(database_url, box) as opened:
        yield opened


@pytest.fixture
async def sqlite_store(tmp_path: Path, box: SecretBox, anyio_backend: Any) -> AsyncIterator[Store]:
    """For checks made before the database is touched (input validation): one backend will do."""
    async with await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}", box) as opened:
        yield opened
