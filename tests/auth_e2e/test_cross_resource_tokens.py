"""No token crosses from one protected resource to another (issue 24, "Isolation"): every
piece real, on 127.0.0.1 -

- the hub, an authorization server for its own `/mcp`, its users logging in with mcpkit's
  OAuth client (DCR, PKCE, the hub's sign-in and consent pages walked over HTTP);
- oidc-provider (tests/auth_e2e/stack.py) and a `mcpkit serve --auth-issuer <provider>
  --auth-audience <its own URL> --required-scope mcp:read` process trusting it, its token
  got by mcpkit's OAuth client through the provider's pages;
- a second hub (another issuer, another signing key), and a third with the first one's
  public URL - the same issuer and audience - but a database and keys of its own.

A hub access token sent to the protected server, the protected server's token sent to the
hub's `/mcp`, and one hub's token sent to another hub are each refused with 401
`invalid_token`, while each token is accepted where it belongs (so the refusals are about
the token's audience, issuer and signature, not a broken token)."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.auth_e2e.logins import FormLogin
from tests.auth_e2e.serve_process import Served, running_serve
from tests.auth_e2e.stack import Stack
from tests.hub.hub_helpers import Hub, call, fresh_user, seed_admin
from tests.hub.oauth_login import HubLogin
from tests.hub.router.support import hub_app
from tests.procs import free_port, serve_in_thread

from mcpkit.client.oauth import OAuth
from mcpkit.hub.crypto import SecretBox, generate_key
from mcpkit.hub.passwords import hash_password
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Store

pytestmark = pytest.mark.anyio

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "cross", "version": "0"}}}


@pytest.fixture(scope="module")
def served(oidc_stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`mcpkit serve --auth-issuer <the provider> --auth-audience <its own URL>
    --required-scope mcp:read` (the scope its metadata publishes, so clients ask for it)."""
    with running_serve(tmp_path_factory.mktemp("serve"), oidc_stack,
                       "--required-scope", "mcp:read") as process:
        yield process


@contextlib.contextmanager
def oauth_hub(directory: Path, public_url: str | None = None) -> Iterator[Hub]:
    """A hub (REST, OAuth, /mcp) on a database of its own in `directory`, on a free port;
    its issuer is its own URL unless `public_url` names another."""
    database_url = f"sqlite+aiosqlite:///{directory / 'hub.db'}"
    box = SecretBox([generate_key()])
    admin = seed_admin(database_url, box)
    port = free_port()
    settings = HubSettings(database_url=database_url, port=port, public_url=public_url,
                           auth_failure_burst=1_000_000)
    with serve_in_thread(hub_app(settings, box), lifespan="on", name="hub", port=port) as url:
        yield Hub(url, admin, database_url, settings, box)


@pytest.fixture(scope="module")
def hubs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Hub, Hub, Hub]]:
    """Three hubs with their own databases and signing keys: the first two with their own
    issuers (their URLs), the third posing as the first (its issuer and audience)."""
    with oauth_hub(tmp_path_factory.mktemp("hub-a")) as one, \
            oauth_hub(tmp_path_factory.mktemp("hub-b")) as two, \
            oauth_hub(tmp_path_factory.mktemp("hub-c"), public_url=one.url) as posing:
        assert len({one.settings.issuer, two.settings.issuer}) == 2
        assert posing.settings.mcp_url == one.settings.mcp_url
        yield one, two, posing


async def hub_access_token(hub: Hub) -> str:
    """A new user of `hub` with a password logs in with mcpkit's OAuth client; the access
    token the hub issued for its /mcp."""
    user_id, _ = await fresh_user(hub)
    password = "pw-" + secrets.token_urlsafe(12)
    async with await Store.open(hub.database_url, hub.box) as store:
        await store.users.set_password_hash(user_id, hash_password(password))
        name = (await store.users.get(user_id)).name
    tokens = await OAuth(redirect=HubLogin(name, password)).login(hub.url + "/mcp")
    return tokens.access_token


async def provider_access_token(served: Served) -> str:
    """The provider's access token for the protected server, by mcpkit's OAuth client."""
    return (await OAuth(redirect=FormLogin()).login(served.url)).access_token


async def initialize(url: str, token: str) -> tuple[int, str]:
    """The status and WWW-Authenticate of a raw `initialize` POST with `token` as Bearer."""
    reply = await call("POST", url, token=token, json=INITIALIZE,
                       headers={"Accept": "application/json, text/event-stream"})
    return reply.status, reply.headers.get("WWW-Authenticate", "")


def refused_as_invalid(answer: tuple[int, str]) -> bool:
    status, challenge = answer
    return status == 401 and 'error="invalid_token"' in challenge


async def test_a_hub_token_is_refused_by_a_protected_upstream_and_the_reverse(
        served: Served, hubs: tuple[Hub, Hub, Hub]) -> None:
    hub = hubs[0]
    hub_token = await hub_access_token(hub)
    upstream_token = await provider_access_token(served)
    # each where it belongs
    assert (await initialize(hub.url + "/mcp", hub_token))[0] == 200
    assert (await initialize(served.url, upstream_token))[0] == 200
    # and neither where it does not: the hub's token names the hub's /mcp (and the hub's
    # issuer and key), the provider's names the protected server
    assert refused_as_invalid(await initialize(served.url, hub_token))
    assert refused_as_invalid(await initialize(hub.url + "/mcp", upstream_token))


async def test_a_token_of_one_hub_is_refused_by_another(hubs: tuple[Hub, Hub, Hub]) -> None:
    one, two, _ = hubs
    token_of_one = await hub_access_token(one)
    token_of_two = await hub_access_token(two)
    assert (await initialize(one.url + "/mcp", token_of_one))[0] == 200
    assert (await initialize(two.url + "/mcp", token_of_two))[0] == 200
    assert refused_as_invalid(await initialize(two.url + "/mcp", token_of_one))
    assert refused_as_invalid(await initialize(one.url + "/mcp", token_of_two))


async def test_a_hub_with_the_same_issuer_but_other_keys_refuses_the_token(
        hubs: tuple[Hub, Hub, Hub]) -> None:
    """Issuer and audience match; the signature cannot: the key is not the posing hub's."""
    one, _, posing = hubs
    token_of_one = await hub_access_token(one)
    assert refused_as_invalid(await initialize(posing.url + "/mcp", token_of_one))
    assert (await initialize(one.url + "/mcp", token_of_one))[0] == 200
