"""The console's security over real HTTP (a hub under uvicorn on 127.0.0.1): session
fixation, cookie flags, CSRF (missing, wrong, cross-origin), the refresh and revocation of the
console's hub tokens, audiences kept apart (/api/v1 vs /mcp), and one user's upstream out of
another's reach however its URL is typed."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from markupsafe import escape
from starlette.responses import Response
from tests.console.support import CSRF_ATTEMPTS, ConsoleBrowser, console_hub, forged
from tests.hub.hostile_auth_server import hostile_server
from tests.hub.hub_browser import set_password
from tests.hub.hub_helpers import UPSTREAMS, Api, Hub, call, fresh_user, mcp_status

from mcpkit.hub.console.session import (
    COOKIE,
    SECURE_COOKIE,
    Session,
    new_session,
    set_session,
)
from mcpkit.hub.crypto import SecretBox, generate_key
from mcpkit.hub.oauth.server import CONSOLE_CLIENT_ID
from mcpkit.hub.oauth.service import CONSOLE_CALLBACK_PATH

pytestmark = pytest.mark.anyio
PAGE_SIZE = 5


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    tmp: Path = tmp_path_factory.mktemp("console")
    # revocations reach the token checks at once (the default re-check is 10 s)
    with console_hub(f"sqlite+aiosqlite:///{tmp / 'hub.db'}",
                     oauth_revocation_check_s=0.001, page_size=PAGE_SIZE) as running:
        yield running


async def signed_in(hub: Hub) -> tuple[ConsoleBrowser, Api]:
    user_id, api = await fresh_user(hub)
    name, password = await set_password(hub, user_id)
    browser = ConsoleBrowser(hub)
    back = await browser.sign_in(name, password)
    assert back.status == 303 and back.headers["Location"] == "/", back.text
    return browser, api


def upstream_fields(csrf: str, name: str) -> dict[str, str]:
    return {"csrf_token": csrf, "name": name, "transport": "http",
            "url": "http://127.0.0.1:9/mcp", "auth_mode": "static",
            "connect_timeout_s": "1", "call_timeout_s": "5", "enabled": "on"}


async def names(api: Api) -> list[str]:
    listed = await api.get(UPSTREAMS)
    assert listed.status == 200, listed.text
    return [item["name"] for item in listed.body["items"]]


# --- sign-in, session cookie ---------------------------------------------------------------


async def test_a_sign_in_replaces_a_planted_cookie_with_a_new_one(hub: Hub) -> None:
    user_id, _ = await fresh_user(hub)
    name, password = await set_password(hub, user_id)
    browser = ConsoleBrowser(hub)
    browser.plant("planted-by-an-attacker")
    assert (await browser.request("GET", "/")).status == 303  # not a session: sign in
    await browser.sign_in(name, password)
    first = browser.cookie()
    assert first is not None and first != "planted-by-an-attacker"
    page = await browser.request("GET", "/")
    assert page.status == 200 and "Your upstreams" in page.text
    csrf_before = browser.session().csrf
    await browser.sign_in(name, password)  # again, in the same browser
    assert browser.cookie() not in (None, first)
    assert browser.session().csrf != csrf_before


async def test_the_session_cookie_is_httponly_samesite_lax_and_host_wide(hub: Hub) -> None:
    user_id, _ = await fresh_user(hub)
    name, password = await set_password(hub, user_id)
    browser = ConsoleBrowser(hub)
    await browser.sign_in(name, password)
    cookie = next(value for value in browser.last_set_cookies
                  if value.startswith(f"{COOKIE}="))
    flags = {part.strip().split("=")[0].lower(): part for part in cookie.split(";")}
    assert "httponly" in flags and "secure" not in flags  # plain http here
    assert flags["samesite"].strip().lower() == "samesite=lax"
    assert flags["path"].strip() == "Path=/"
    assert "domain" not in flags


def test_over_tls_the_cookie_is_secure_and_host_prefixed() -> None:
    response = Response()
    set_session(response, SecretBox([generate_key()]), new_session("a", "r", 60), secure=True)
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"{SECURE_COOKIE}=")
    parts = [part.strip().lower() for part in cookie.split(";")]
    assert {"secure", "httponly", "samesite=lax", "path=/"} <= set(parts)
    assert not any(part.startswith("domain") for part in parts)


async def test_a_callback_with_another_state_is_refused(hub: Hub) -> None:
    browser = ConsoleBrowser(hub)
    started = await browser.request("GET", "/console/sign-in")
    assert started.status == 303
    forged = await browser.request("GET", CONSOLE_CALLBACK_PATH + "?code=x&state=forged")
    assert forged.status == 400 and "does not match" in forged.text
    assert browser.cookie() is None


# --- CSRF ---------------------------------------------------------------------------------


@pytest.mark.parametrize("attempt", CSRF_ATTEMPTS)
async def test_a_state_change_without_the_sessions_token_from_its_origin_is_refused(
        hub: Hub, attempt: str) -> None:
    browser, api = await signed_in(hub)
    csrf = await browser.csrf("/console/upstreams/new")
    fields, origin = forged(upstream_fields(csrf, "csrf-" + attempt), attempt)
    refused = await browser.post("/console/upstreams", fields, origin=origin)
    assert refused.status == 403, refused.text
    assert await names(api) == []
    # the same form, done right, goes through
    done = await browser.post("/console/upstreams", upstream_fields(csrf, "csrf-ok"))
    assert done.status == 303, done.text
    assert await names(api) == ["csrf-ok"]


async def test_a_get_changes_nothing(hub: Hub) -> None:
    browser, api = await signed_in(hub)
    created = await api.create_upstream(name="stays", url="http://127.0.0.1:9/mcp")
    for path in (f"/console/upstreams/{created['id']}/remove",
                 f"/console/upstreams/{created['id']}/refresh"):
        await browser.request("GET", path)
    assert await names(api) == ["stays"]


# --- the console's tokens -----------------------------------------------------------------


async def test_tokens_are_accepted_only_by_the_resource_they_were_minted_for(hub: Hub) -> None:
    browser, _ = await signed_in(hub)
    console_token = browser.session().access_token
    me = await call("GET", hub.url + "/api/v1/users/me", token=console_token)
    assert me.status == 200, me.text
    assert await mcp_status(hub.url, console_token) == 401
    # the same browser (signed in at the hub) gets a token for /mcp from the same server
    mcp_token = await code_grant_token(browser, hub.settings.mcp_url)
    assert await mcp_status(hub.url, mcp_token) == 200
    refused = await call("GET", hub.url + "/api/v1/users/me", token=mcp_token)
    assert refused.status == 401, refused.text


async def test_only_the_console_gets_tokens_for_the_rest_api(hub: Hub) -> None:
    """A registered client (DCR) asking for the REST API is sent back with invalid_target
    before any sign-in: its users consented to /mcp, and scripts use API tokens."""
    redirect_uri = "http://127.0.0.1:1/callback"
    registered = await call("POST", hub.url + "/oauth/register", json={
        "redirect_uris": [redirect_uri], "token_endpoint_auth_method": "none",
        "client_name": "third party"})
    assert registered.status == 201, registered.text
    query = urllib.parse.urlencode({
        "response_type": "code", "client_id": registered.body["client_id"],
        "redirect_uri": redirect_uri, "state": "s", "code_challenge": "x" * 43,
        "code_challenge_method": "S256", "resource": hub.settings.api_url})
    async with aiohttp.ClientSession() as session, session.get(
            f"{hub.url}/oauth/authorize?{query}", allow_redirects=False) as back:
        assert back.status == 302, await back.text()
        location = back.headers["Location"]
    assert location.startswith(redirect_uri)
    sent_back = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)
    assert sent_back["error"] == ["invalid_target"] and "code" not in sent_back


async def test_the_consoles_login_is_redeemed_for_mcp_and_back_for_the_api(hub: Hub) -> None:
    """RFC 8707 §2.2: the console's refresh token gets an access token for /mcp (its "Try a
    tool"), refused by the API; the rotated one gets an API token again, refused by /mcp."""
    browser, _ = await signed_in(hub)
    for_mcp = await token_endpoint(hub, {
        "grant_type": "refresh_token", "refresh_token": browser.session().refresh_token,
        "resource": hub.settings.mcp_url})
    assert for_mcp.status == 200, for_mcp.text
    mcp_token = for_mcp.body["access_token"]
    assert await mcp_status(hub.url, mcp_token) == 200
    assert (await call("GET", hub.url + "/api/v1/users/me", token=mcp_token)).status == 401
    for_api = await token_endpoint(hub, {
        "grant_type": "refresh_token", "refresh_token": for_mcp.body["refresh_token"],
        "resource": hub.settings.api_url})
    assert for_api.status == 200, for_api.text
    api_token = for_api.body["access_token"]
    assert (await call("GET", hub.url + "/api/v1/users/me", token=api_token)).status == 200
    assert await mcp_status(hub.url, api_token) == 401


async def test_an_expiring_access_token_is_refreshed_and_a_refused_refresh_signs_out(
        hub: Hub) -> None:
    browser, _ = await signed_in(hub)
    old = browser.session()
    plant(browser, Session(old.access_token, old.refresh_token, 0.0, old.csrf))
    page = await browser.request("GET", "/")
    assert page.status == 200, page.text
    new = browser.session()
    assert new.access_token != old.access_token and new.refresh_token != old.refresh_token
    assert new.csrf == old.csrf  # open forms stay valid
    # the old refresh token again: reuse, so the hub revokes the login; sign in again
    plant(browser, Session(new.access_token, old.refresh_token, 0.0, new.csrf))
    again = await browser.request("GET", "/")
    assert again.status == 303 and again.headers["Location"].startswith("/console/sign-in")


async def test_sign_out_revokes_the_login(hub: Hub) -> None:
    browser, _ = await signed_in(hub)
    session = browser.session()
    out = await browser.post("/console/sign-out", {"csrf_token": session.csrf})
    assert out.status == 303 and out.headers["Location"] == "/console/signed-out"
    assert browser.cookie() is None
    refresh = await token_endpoint(hub, {"grant_type": "refresh_token",
                                         "refresh_token": session.refresh_token,
                                         "resource": hub.settings.api_url})
    assert refresh.status == 400, refresh.text
    me = await call("GET", hub.url + "/api/v1/users/me", token=session.access_token)
    assert me.status == 401
    assert (await browser.request("GET", "/")).status == 303


# --- isolation ----------------------------------------------------------------------------


async def test_another_users_upstream_is_not_found_however_its_url_is_typed(hub: Hub) -> None:
    _, owner = await fresh_user(hub)
    theirs = await owner.create_upstream(name="private", url="http://127.0.0.1:9/mcp")
    browser, _ = await signed_in(hub)
    csrf = await browser.csrf()
    base = f"/console/upstreams/{theirs['id']}"
    for path in (f"{base}/edit", f"{base}/remove"):
        page = await browser.request("GET", path)
        assert page.status == 404, (path, page.status)
        assert "private" not in page.text
    for path in (base, f"{base}/remove", f"{base}/refresh", f"{base}/connect"):
        posted = await browser.post(path, {**upstream_fields(csrf, "stolen")})
        assert posted.status == 404, (path, posted.status, posted.text[:200])
    assert await names(owner) == ["private"]
    listed = await browser.request("GET", "/")
    assert "private" not in listed.text


# --- the upstreams pages ------------------------------------------------------------------


async def test_the_list_is_paged_by_the_apis_cursor(hub: Hub) -> None:
    browser, api = await signed_in(hub)
    for number in range(PAGE_SIZE + 2):
        await api.create_upstream(name=f"paged-{number}", url="http://127.0.0.1:9/mcp")
    first = await browser.request("GET", "/")
    rows = re.findall(r'data-upstream="([^"]+)"', first.text)
    assert rows == [f"paged-{number}" for number in range(PAGE_SIZE)]
    found = re.search(r'href="(/\?cursor=[^"]+)" rel="next"', first.text)
    assert found is not None, first.text
    second = await browser.request("GET", found.group(1).replace("&amp;", "&"))
    assert re.findall(r'data-upstream="([^"]+)"', second.text) == ["paged-5", "paged-6"]
    assert 'rel="next"' not in second.text and "First page" in second.text


async def test_an_unreachable_upstream_shows_its_error_after_refresh_now(hub: Hub) -> None:
    browser, api = await signed_in(hub)
    created = await api.create_upstream(name="down", url="http://127.0.0.1:9/mcp")
    csrf = await browser.csrf()
    refreshed = await browser.post(f"/console/upstreams/{created['id']}/refresh",
                                   {"csrf_token": csrf, "name": "down"})
    assert refreshed.status == 303
    assert refreshed.headers["Location"] == "/?notice=refresh_failed&name=down"
    page = await browser.request("GET", refreshed.headers["Location"])
    row = page.text.split('data-upstream="down"', 1)[1].split("</tr>", 1)[0]
    assert 'class="badge unhealthy"' in row
    last_error = (await api.get(f"{UPSTREAMS}/{created['id']}")).body["last_error"]
    assert last_error and str(escape(last_error)) in row


async def test_connect_sends_the_browser_to_the_upstreams_authorization_server(
        hub: Hub) -> None:
    browser, api = await signed_in(hub)
    async with hostile_server() as upstream:
        created = await api.post(UPSTREAMS, {"name": "needs", "url": upstream.url,
                                             "auth_mode": "oauth"})
        assert created.status == 201, created.text
        refreshed = await browser.post(f"/console/upstreams/{created.body['id']}/refresh",
                                       {"csrf_token": await browser.csrf(), "name": "needs"})
        assert refreshed.status == 303, refreshed.text
        page = await browser.request("GET", "/")
        row = page.text.split('data-upstream="needs"', 1)[1].split("</tr>", 1)[0]
        assert ">needs login<" in row and "/connect" in row
        connect = await browser.post(f"/console/upstreams/{created.body['id']}/connect",
                                     {"csrf_token": await browser.csrf(), "name": "needs"})
        assert connect.status == 303, connect.text
        location = urllib.parse.urlsplit(connect.headers["Location"])
        assert f"{location.scheme}://{location.netloc}{location.path}" == \
            upstream.base + "/authorize"
        query = urllib.parse.parse_qs(location.query)
        assert query["redirect_uri"][0].startswith(hub.url + "/")
        assert query["code_challenge_method"] == ["S256"]


# --- static files -------------------------------------------------------------------------


async def test_static_files_have_versioned_names_and_are_cached_long(hub: Hub) -> None:
    browser, _ = await signed_in(hub)
    page = await browser.request("GET", "/")
    for suffix in ("css", "js"):
        found = re.search(rf'"(/console/static/console\.[0-9a-f]{{12}}\.{suffix})"', page.text)
        assert found is not None, page.text
        served = await browser.request("GET", found.group(1))
        assert served.status == 200
        assert "immutable" in served.headers["Cache-Control"]
    assert (await browser.request("GET", "/console/static/console.css")).status == 404


# --- helpers ------------------------------------------------------------------------------


def plant(browser: ConsoleBrowser, session: Session) -> None:
    response = Response()
    set_session(response, browser.hub.box, session, secure=False)
    value = response.headers["set-cookie"].split(";", 1)[0].split("=", 1)[1]
    browser.plant(value)


async def token_endpoint(hub: Hub, form: dict[str, str]) -> Any:
    return await call("POST", hub.url + "/oauth/token",
                      data={**form, "client_id": CONSOLE_CLIENT_ID})


async def code_grant_token(browser: ConsoleBrowser, resource: str) -> str:
    """A code grant for `resource` in a browser already signed in at the hub."""
    import base64
    import hashlib
    import secrets

    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(
        hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    redirect_uri = browser.hub.url + CONSOLE_CALLBACK_PATH
    query = urllib.parse.urlencode({
        "response_type": "code", "client_id": CONSOLE_CLIENT_ID, "redirect_uri": redirect_uri,
        "state": "s", "code_challenge": challenge, "code_challenge_method": "S256",
        "resource": resource})
    back = await browser.request("GET", f"/oauth/authorize?{query}")
    assert back.status == 302, back.text
    code = urllib.parse.parse_qs(urllib.parse.urlsplit(back.headers["Location"]).query)["code"]
    token = await token_endpoint(browser.hub, {
        "grant_type": "authorization_code", "code": code[0], "redirect_uri": redirect_uri,
        "code_verifier": verifier, "resource": resource})
    assert token.status == 200, token.text
    access: str = token.body["access_token"]
    return access


async def test_an_edit_saves_and_a_stale_one_says_so_on_the_form(hub: Hub) -> None:
    browser, api = await signed_in(hub)
    created = await api.create_upstream(name="edited", url="http://127.0.0.1:9/mcp")
    path = f"/console/upstreams/{created['id']}"
    form = await browser.request("GET", path + "/edit")
    assert form.status == 200 and 'value="http://127.0.0.1:9/mcp"' in form.text
    fields = {**upstream_fields(await browser.csrf(path + "/edit"), "edited"),
              "url": "http://127.0.0.1:10/mcp", "version": str(created["version"])}
    saved = await browser.post(path, fields)
    assert saved.status == 303, saved.text
    assert (await api.get(f"{UPSTREAMS}/{created['id']}")).body["url"] == \
        "http://127.0.0.1:10/mcp"
    stale = await browser.post(path, {**fields, "url": "http://127.0.0.1:11/mcp"})
    assert stale.status == 409 and "someone changed this upstream" in stale.text
    assert 'value="http://127.0.0.1:11/mcp"' in stale.text  # what was typed is kept
