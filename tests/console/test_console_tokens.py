"""A user's own API tokens, by the REST API (`/api/v1/users/me/tokens`) and by the console
(`/console/tokens`), over real HTTP (a hub under uvicorn on 127.0.0.1): the secret shown
once, a console-made token working at /mcp until revoked, the per-user cap, CSRF on every
state change, and one user never seeing or revoking another's tokens whatever id is typed.
Also the "Connect a client" page."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from markupsafe import escape
from tests.console.support import CSRF_ATTEMPTS, ConsoleBrowser, console_hub, forged
from tests.console.test_console_security import signed_in
from tests.hub.hub_helpers import Api, Hub, fresh_user, mcp_status

from mcpkit.hub.console.client_snippets import TOKEN_VARIABLE
from mcpkit.hub.crypto import API_TOKEN_PREFIX
from mcpkit.hub.router.gate import DEFAULT_TOKEN_TTL_S

pytestmark = pytest.mark.anyio
MY_TOKENS = "/api/v1/users/me/tokens"
MAX_TOKENS = 3
SECRET_ON_PAGE = re.compile(r'<code id="new-secret" class="secret-value">([^<]+)</code>')


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    tmp: Path = tmp_path_factory.mktemp("console-tokens")
    with console_hub(f"sqlite+aiosqlite:///{tmp / 'hub.db'}",
                     max_tokens_per_user=MAX_TOKENS) as running:
        yield running


async def refused_at_mcp(hub: Hub, secret: str) -> bool:
    """Whether /mcp refuses the token (401) within the gate's cache of verified tokens
    (router/gate.py DEFAULT_TOKEN_TTL_S: a revoked token stops working within it) plus
    headroom; polled, bounded."""
    deadline = time.monotonic() + DEFAULT_TOKEN_TTL_S + 10
    while time.monotonic() < deadline:
        if await mcp_status(hub.url, secret) == 401:
            return True
        await anyio.sleep(0.5)
    return False


async def token_names(api: Api) -> dict[str, bool]:
    """{name: active} of the caller's own tokens."""
    listed = await api.get(MY_TOKENS)
    assert listed.status == 200, listed.text
    return {item["name"]: item["active"] for item in listed.body["items"]}


async def console_create(browser: ConsoleBrowser, name: str, days: str = "") -> str:
    """A token made on the console's page; its secret as the page shows it."""
    csrf = await browser.csrf("/console/tokens")
    page = await browser.post("/console/tokens", {"csrf_token": csrf, "name": name,
                                                  "expires_in_days": days})
    assert page.status == 201, page.text[:500]
    found = SECRET_ON_PAGE.search(page.text)
    assert found is not None, page.text
    return found.group(1)


# --- the REST API -------------------------------------------------------------------------


async def test_the_api_shows_the_secret_once_and_a_revoked_token_stops_working(
        hub: Hub) -> None:
    _, api = await fresh_user(hub)
    created = await api.post(MY_TOKENS, {"name": "laptop", "expires_in_days": 30})
    assert created.status == 201, created.text
    secret, token = created.body["secret"], created.body["token"]
    assert created.headers["Location"] == f"{MY_TOKENS}/{token['id']}"
    assert token["user_id"] == api.user_id and token["expires_at"] is not None
    listed = await api.get(MY_TOKENS)
    assert secret not in listed.text and "secret" not in listed.text
    assert (await token_names(api))["laptop"] is True
    assert await mcp_status(hub.url, secret) == 200
    revoked = await api.delete(f"{MY_TOKENS}/{token['id']}")
    assert revoked.status == 200 and revoked.body["active"] is False, revoked.text
    assert await refused_at_mcp(hub, secret)
    again = await api.delete(f"{MY_TOKENS}/{token['id']}")
    assert again.status == 200 and again.body["revoked_at"] == revoked.body["revoked_at"]


async def test_one_user_never_lists_or_revokes_anothers_tokens_by_the_api(hub: Hub) -> None:
    _, owner = await fresh_user(hub)
    _, other = await fresh_user(hub)
    created = await owner.post(MY_TOKENS, {"name": "owners-only"})
    assert created.status == 201, created.text
    theirs = created.body["token"]["id"]
    assert "owners-only" not in await token_names(other)
    for typed in (str(theirs), "0", "-1", "99999999", "abc", f"{theirs}%2F..", "1e3"):
        refused = await other.delete(f"{MY_TOKENS}/{typed}")
        assert refused.status in (404, 422), (typed, refused.status, refused.text)
        assert "owners-only" not in refused.text
    assert await mcp_status(hub.url, created.body["secret"]) == 200
    assert (await token_names(owner))["owners-only"] is True


async def test_a_user_holds_at_most_the_settings_active_tokens(hub: Hub) -> None:
    _, api = await fresh_user(hub)  # holds one token already (its own "tests")
    made = [await api.post(MY_TOKENS, {"name": f"t{i}"}) for i in range(MAX_TOKENS - 1)]
    assert [reply.status for reply in made] == [201] * (MAX_TOKENS - 1)
    refused = await api.post(MY_TOKENS, {"name": "one-too-many"})
    assert refused.status == 409, refused.text
    assert refused.body["error"]["field"] == "tokens"
    assert f"({MAX_TOKENS})" in refused.body["error"]["message"]
    assert "one-too-many" not in await token_names(api)
    await api.delete(f"{MY_TOKENS}/{made[0].body['token']['id']}")
    assert (await api.post(MY_TOKENS, {"name": "room-again"})).status == 201


# --- the console --------------------------------------------------------------------------


async def test_a_console_token_works_at_mcp_until_revoked_on_the_page(hub: Hub) -> None:
    browser, api = await signed_in(hub)
    secret = await console_create(browser, "from-console", days="7")
    assert await mcp_status(hub.url, secret) == 200
    listed = await browser.request("GET", "/console/tokens")
    assert "from-console" in listed.text and secret not in listed.text  # shown once only
    token_id = next(item["id"] for item in (await api.get(MY_TOKENS)).body["items"]
                    if item["name"] == "from-console")
    confirm = await browser.request("GET", f"/console/tokens/{token_id}/revoke"
                                           "?name=from-console")
    assert confirm.status == 200 and "from-console" in confirm.text
    csrf = await browser.csrf("/console/tokens")
    done = await browser.post(f"/console/tokens/{token_id}/revoke", {"csrf_token": csrf})
    assert done.status == 303 and done.headers["Location"] == "/console/tokens?notice=revoked"
    assert await refused_at_mcp(hub, secret)
    assert (await token_names(api))["from-console"] is False


async def test_a_bad_expiry_is_shown_next_to_its_field(hub: Hub) -> None:
    browser, api = await signed_in(hub)
    csrf = await browser.csrf("/console/tokens")
    for days, message in (("soon", "a whole number of days"), ("99999", "3650")):
        page = await browser.post("/console/tokens", {"csrf_token": csrf, "name": "bad-expiry",
                                                      "expires_in_days": days})
        assert page.status == 422, page.text[:300]
        assert message in page.text and 'value="' + days + '"' in page.text
    assert "bad-expiry" not in await token_names(api)


@pytest.mark.parametrize("attempt", CSRF_ATTEMPTS)
async def test_creating_or_revoking_without_the_sessions_csrf_token_is_refused(
        hub: Hub, attempt: str) -> None:
    browser, api = await signed_in(hub)
    csrf = await browser.csrf("/console/tokens")
    kept = await api.post(MY_TOKENS, {"name": "kept"})
    fields, origin = forged({"csrf_token": csrf, "name": "forged"}, attempt)
    created = await browser.post("/console/tokens", fields, origin=origin)
    assert created.status == 403, created.text
    revoke_fields = {k: v for k, v in fields.items() if k != "name"}
    revoked = await browser.post(f"/console/tokens/{kept.body['token']['id']}/revoke",
                                 revoke_fields, origin=origin)
    assert revoked.status == 403, revoked.text
    names = await token_names(api)
    assert "forged" not in names and names["kept"] is True
    assert await mcp_status(hub.url, kept.body["secret"]) == 200


async def test_one_user_never_sees_or_revokes_anothers_token_in_the_console(hub: Hub) -> None:
    _, owner = await fresh_user(hub)
    created = await owner.post(MY_TOKENS, {"name": "not-yours"})
    theirs = created.body["token"]["id"]
    browser, _ = await signed_in(hub)
    listed = await browser.request("GET", "/console/tokens")
    assert listed.status == 200 and "not-yours" not in listed.text
    csrf = await browser.csrf("/console/tokens")
    for typed in (str(theirs), "0", "99999999", "abc", "..%2F..%2Fadmin"):
        refused = await browser.post(f"/console/tokens/{typed}/revoke", {"csrf_token": csrf})
        assert refused.status in (404, 422), (typed, refused.status, refused.text[:200])
        assert "not-yours" not in refused.text
    assert await mcp_status(hub.url, created.body["secret"]) == 200


async def test_the_connect_page_points_every_client_at_this_hubs_mcp(hub: Hub) -> None:
    browser, _ = await signed_in(hub)
    page = await browser.request("GET", "/console/connect")
    assert page.status == 200, page.text
    mcp_url = hub.settings.mcp_url
    for client in ("Claude Code", "Codex", "Cursor", "VS Code", "mcpkit"):
        assert f'data-client="{client}" data-form="OAuth"' in page.text
        assert f'data-client="{client}" data-form="API token"' in page.text
    assert str(escape(mcp_url)) in page.text and TOKEN_VARIABLE in page.text
    assert API_TOKEN_PREFIX not in page.text  # no secret on this page
    assert page.headers["Cache-Control"] == "no-store"
