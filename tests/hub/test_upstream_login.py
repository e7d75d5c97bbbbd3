"""Per-user OAuth logins to upstreams, end to end: the real oidc-provider is the upstream's
authorization server, a real protected MCP server (whoami_upstream.py: mcpkit's resource
server) the upstream, and its `whoami` tool shows at the upstream whose login a call carried.

One provider and one protected upstream per module; one hub (SQLite) for the single-replica
tests; the replica test brings two hubs on PostgreSQL and Redis."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.auth_e2e.stack import Stack, running_stack
from tests.hub.hub_helpers import UPSTREAMS, Hub, call, fresh_user
from tests.hub.upstream_login_support import (
    CALLBACK,
    age_login,
    authorize,
    connect,
    register_oauth,
    router_hubs,
    start,
    state_of,
    whoami,
    whoami_upstream,
)

from mcpkit.hub.crypto import SecretBox, generate_key

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("oidc")) as running:
        yield running


@pytest.fixture(scope="module")
def upstream_url(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with whoami_upstream(stack, tmp_path_factory.mktemp("whoami")) as url:
        yield url


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    database_url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('hub') / 'hub.db'}"
    with router_hubs(database_url, SecretBox([generate_key()])) as hubs:
        yield hubs[0]


async def test_two_users_on_one_upstream_each_see_only_their_own_identity(
        hub: Hub, upstream_url: str) -> None:
    (_, ada), (_, bob) = await fresh_user(hub), await fresh_user(hub)
    upstream_a = await register_oauth(ada, "who", upstream_url)
    upstream_b = await register_oauth(bob, "who", upstream_url)
    assert upstream_a["auth_mode"] == "oauth"
    await connect(ada, upstream_a["id"], "ada-account")
    await connect(bob, upstream_b["id"], "bob-account")
    assert ada.token is not None and bob.token is not None
    assert await whoami(hub, ada.token, "who__whoami") == "ada-account"
    assert await whoami(hub, bob.token, "who__whoami") == "bob-account"
