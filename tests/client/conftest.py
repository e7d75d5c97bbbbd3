"""Client tests: every test starts with an empty era cache (keys of in-memory servers and
transports are object ids, which a later test may reuse)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcpkit.client import era as eras


@pytest.fixture(autouse=True)
def empty_era_cache() -> Iterator[None]:
    eras._CACHE.clear()
    yield
    eras._CACHE.clear()
