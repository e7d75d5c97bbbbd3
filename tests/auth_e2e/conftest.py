"""Fixtures of the OAuth end-to-end tests: one real authorization server (oidc-provider) and
one protected MCP server per test session (tests/auth_e2e/stack.py), shared by every test that
asks for `stack`; each test starts with the default access-token lifetime."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.auth_e2e.stack import Stack, running_stack
from tests.manager.test_cli import user  # noqa: F401 (a fixture: the CLI tests' user)

DEFAULT_ACCESS_TOKEN_TTL_S = 3600


@pytest.fixture(scope="session")
def oidc_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("oidc")) as stack:
        yield stack


@pytest.fixture
def stack(oidc_stack: Stack) -> Iterator[Stack]:
    """The shared stack, its access-token lifetime back to the default after the test."""
    yield oidc_stack
    oidc_stack.set_access_token_ttl(DEFAULT_ACCESS_TOKEN_TTL_S)
