"""The auth package's layer (DESIGN.md, issue 23): it may import mcpkit.errors, mcpkit.protocol,
itself and libraries; never the client, server, hub, manager or transports, and no network
IO library (the flows that talk HTTP live in mcpkit.client)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.test_import_layers import SRC, imported_modules

AUTH_FILES = sorted((SRC / "auth").glob("*.py"))
ALLOWED_MCPKIT = ("mcpkit.errors", "mcpkit.protocol", "mcpkit.auth")
NO_IO = {"aiohttp", "httpx", "socket", "asyncio", "anyio", "starlette", "uvicorn", "requests"}


def test_the_package_exists() -> None:
    assert len(AUTH_FILES) >= 5


@pytest.mark.parametrize("path", AUTH_FILES, ids=lambda p: p.name)
def test_auth_imports_only_lower_layers(path: Path) -> None:
    for module, level in imported_modules(path):
        if level:
            continue  # relative: inside the package
        if module.startswith("mcpkit"):
            assert module.startswith(ALLOWED_MCPKIT), f"{path.name}: imports {module}"
        assert module.split(".")[0] not in NO_IO, f"{path.name}: imports {module}"
