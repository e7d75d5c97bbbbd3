"""An upstream login finishes only in a browser signed in to the hub as the user who started
it (issue 24: "no combination of tokens, session ids, upstream ids or names lets user B act
with user A's upstream token").

The attack it closes: Bob starts a login to his upstream and sends the authorization URL to
Ada; Ada logs in at the upstream's authorization server as herself; her browser lands at the
hub's callback with a code for HER identity and Bob's state. Bound by the state alone, the
hub stored Ada's upstream identity as Bob's login. Now the callback asks for the hub's
session: Ada's browser (signed in as Ada, or signing in as Ada at the page the callback
shows) is refused and the pending login cancelled; a browser with no hub session is asked to
sign in - by password, or through the hub's OpenID Connect provider, whose resume target is
checked (a tampered one is refused, never followed).

Real parts: the real oidc-provider (tests/auth_e2e) is both the upstream's authorization
server and the hub's sign-in provider; the protected whoami upstream (whoami_upstream.py)
names the identity a call carried; hubs over real HTTP on 127.0.0.1, on SQLite and
PostgreSQL. The resume-target check is also tried property-based (no IO)."""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterator
from http.cookies import SimpleCookie

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.auth_e2e.stack import Stack, running_stack
from tests.hub.hub_browser import SIGN_IN_TITLE, HubBrowser, set_password
from tests.hub.hub_helpers import UPSTREAMS, Api, Hub, database_for, fresh_user
from tests.hub.oidc_login import OidcWalk, Stopped
from tests.hub.upstream_login_support import (
    CALLBACK,
    authorize,
    browser_of,
    connect,
    land,
    outcome,
    register_oauth,
    router_hubs,
    start,
    whoami,
    whoami_upstream,
)
from tests.procs import free_port
from yarl import URL

from mcpkit.hub.crypto import SecretBox, generate_key
from mcpkit.hub.oauth.oidc import PendingSignIn
from mcpkit.hub.oauth.oidc_routes import PENDING_COOKIE
from mcpkit.hub.oauth.service import (
    OIDC_CALLBACK_PATH,
    RESUMABLE_PATHS,
    SESSION_COOKIE,
    resume_target,
)
from mcpkit.hub.store import Store

pytestmark = pytest.mark.anyio

SECRET_ENV = "MCPKIT_TEST_BINDING_OIDC_CLIENT_SECRET"
ANOTHER_USER = "started by another hub user"


@pytest.fixture(scope="module")
def ports() -> tuple[int, int]:
    """The two hubs' ports (SQLite, PostgreSQL), known before the provider starts: it
    registers the hub's OpenID Connect callback on each."""
    return free_port(), free_port()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, ports: tuple[int, int]
          ) -> Iterator[Stack]:
    callbacks = tuple(f"http://127.0.0.1:{port}{OIDC_CALLBACK_PATH}" for port in ports)
    with running_stack(tmp_path_factory.mktemp("oidc"), hub_redirect_uris=callbacks) as running:
        yield running


@pytest.fixture(scope="module")
def upstream_url(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with whoami_upstream(stack, tmp_path_factory.mktemp("whoami")) as url:
        yield url


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def hub(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
        stack: Stack, ports: tuple[int, int]) -> Iterator[Hub]:
    """A hub whose sign-in page offers the provider too (the oidc-provider)."""
    database_url = database_for(request, request.param, tmp_path_factory.mktemp("hub"))
    port = ports[0 if request.param == "sqlite" else 1]
    os.environ[SECRET_ENV] = stack.hub_client_secret  # read by the hub at start
    try:
        with router_hubs(database_url, SecretBox([generate_key()]), first_port=port,
                         oidc_issuer=stack.issuer, oidc_client_id=stack.hub_client_id,
                         oidc_client_secret_env=SECRET_ENV,
                         oidc_provider_name="Test IdP") as hubs:
            yield hubs[0]
    finally:
        os.environ.pop(SECRET_ENV, None)


async def connected(api: Api, upstream_id: str) -> bool:
    reply = await api.get(f"{UPSTREAMS}/{upstream_id}")
    assert reply.status == 200, reply.text
    return bool(reply.body["oauth_connected"])


async def stored_logins(hub: Hub, upstream_id: str, *user_ids: int) -> list[int]:
    """Which of the users has a login stored for `upstream_id` (read from the database)."""
    async with await Store.open(hub.database_url, hub.box, migrate=False) as store:
        return [user for user in user_ids if await store.upstream_logins.has(user, upstream_id)]


# --- the attack ----------------------------------------------------------------------------


async def test_a_login_started_by_one_user_is_refused_in_anothers_signed_in_browser(
        hub: Hub, upstream_url: str) -> None:
    (ada_id, ada), (bob_id, bob) = await fresh_user(hub), await fresh_user(hub)
    assert ada.token is not None and bob.token is not None
    ada_own = await register_oauth(ada, "mine", upstream_url)
    await connect(ada, ada_own["id"], "ada-victim")  # her browser is signed in to the hub now
    bobs = await register_oauth(bob, "bobs", upstream_url)

    # Bob starts, Ada logs in at the authorization server as herself, lands in her browser
    landed = await authorize(bob, bobs["id"], "ada-victim")
    refused = await land(ada, landed)
    assert refused.status == 403 and ANOTHER_USER in refused.text, refused.text
    assert "ada-victim" not in refused.text
    assert (await browser_of(ada)).pages == ["sign-in"]  # signed in once, at her own connect
    assert not await connected(bob, bobs["id"])
    assert await stored_logins(hub, bobs["id"], ada_id, bob_id) == []
    assert "ada-victim" not in await outcome(hub, bob.token, "bobs__whoami")

    # the pending login is spent: the code (Ada's identity) is never redeemed for Bob, even
    # in Bob's own signed-in browser
    again = await land(bob, landed)
    assert again.status == 400 and "unknown or was already used" in again.text
    assert not await connected(bob, bobs["id"])

    # Ada's own upstream is untouched; Bob, starting again in his own browser, gets his own
    assert await whoami(hub, ada.token, "mine__whoami") == "ada-victim"
    await connect(bob, bobs["id"], "bob-own")
    assert await whoami(hub, bob.token, "bobs__whoami") == "bob-own"
    assert await whoami(hub, ada.token, "mine__whoami") == "ada-victim"


async def test_a_browser_without_a_session_signing_in_as_another_user_is_refused(
        hub: Hub, upstream_url: str) -> None:
    """The same attack where Ada's browser has no hub session: the callback asks her to sign
    in, she does (as herself: she has no other password), and is refused."""
    (ada_id, _), (bob_id, bob) = await fresh_user(hub), await fresh_user(hub)
    ada_name, ada_password = await set_password(hub, ada_id)
    bobs = await register_oauth(bob, "bobs", upstream_url)
    landed = await authorize(bob, bobs["id"], "ada-fresh")
    fresh = HubBrowser(ada_name, ada_password)
    refused = await fresh.open(landed)
    assert fresh.pages == ["sign-in"]
    assert refused.status == 403 and ANOTHER_USER in refused.text, refused.text
    assert await stored_logins(hub, bobs["id"], ada_id, bob_id) == []
    assert (await land(bob, landed)).status == 400  # cancelled for Bob too


# --- the callback asks for a sign-in -------------------------------------------------------


async def test_a_callback_without_a_hub_session_shows_sign_in_then_finishes_for_its_user(
        hub: Hub, upstream_url: str) -> None:
    user_id, api = await fresh_user(hub)
    assert api.token is not None
    name, password = await set_password(hub, user_id)
    upstream = await register_oauth(api, "later", upstream_url)
    landed = await authorize(api, upstream["id"], "carl-account")
    browser = HubBrowser(name, None)  # shows what the hub answers, signs in by hand below

    page = await browser.open(landed)
    assert page.status == 200 and SIGN_IN_TITLE in page.text
    assert "Sign in with Test IdP" in page.text  # the provider's button, as at /oauth/authorize
    assert SESSION_COOKIE not in page.headers.get("Set-Cookie", "")
    csrf_cookie = SimpleCookie(page.headers["Set-Cookie"])["mcpkit_hub_csrf"]
    assert csrf_cookie["path"] == "/oauth" and csrf_cookie["httponly"]
    action = _form_action(page.text)
    assert action.startswith(CALLBACK + "?")  # back to the callback itself, on the hub
    assert not await connected(api, upstream["id"])
    target = urllib.parse.urljoin(landed, action)
    fields = {"csrf_token": csrf_cookie.value, "prompt": "login", "username": name,
              "action": "sign-in"}

    # a wrong password, and a form without the CSRF token: no sign-in, nothing consumed
    wrong = await browser.request("POST", target, data={**fields, "password": "nope"})
    assert wrong.status == 401 and "wrong user name or password" in wrong.text
    forged = await browser.request("POST", target, data={
        **fields, "password": password, "csrf_token": "forged"})
    assert forged.status == 403 and "CSRF" in forged.text
    assert not await connected(api, upstream["id"])

    signed = await browser.request("POST", target, data={**fields, "password": password})
    assert signed.status == 303, signed.text
    assert signed.headers["Location"] == action  # same origin: a path, the callback's own
    session = SimpleCookie(signed.headers.getall("Set-Cookie")[-1])
    assert SESSION_COOKIE in session and session[SESSION_COOKIE]["path"] == "/oauth"
    done = await browser.request("GET", urllib.parse.urljoin(landed, signed.headers["Location"]))
    assert done.status == 200 and "Connected" in done.text, done.text
    assert await connected(api, upstream["id"])
    assert await whoami(hub, api.token, "later__whoami") == "carl-account"


async def test_signing_in_through_the_provider_at_the_callback_resumes_it_and_a_tampered_resume_is_refused(  # noqa: E501
        hub: Hub, upstream_url: str) -> None:
    """The callback's sign-in page, "Sign in with Test IdP": the provider signs the browser in
    (the hub user linked to that subject) and the hub goes back to the callback, which
    finishes. A pending sign-in whose resume target was changed (sealed with the hub's key:
    only someone holding it could) is refused before anything is exchanged or signed in."""
    user_id, api = await fresh_user(hub)
    assert api.token is not None
    async with await Store.open(hub.database_url, hub.box, migrate=False) as store:
        await store.oidc.link(hub.settings.oidc_issuer or "", "olga-sub", user_id)
    upstream = await register_oauth(api, "viaidp", upstream_url)
    started = await start(api, upstream["id"])
    assert started.status == 200, started.text

    walk = OidcWalk(hub.url, "olga-sub")
    stopped = await walk.walk(started.body["authorization_url"], stop_at_callback=True)
    assert isinstance(stopped, Stopped) and stopped.status == 0, stopped
    assert "hub:login" in walk.pages  # the callback asked for a sign-in; the button chosen
    sealed = walk.jar.filter_cookies(URL(stopped.url))[PENDING_COOKIE].value
    genuine = PendingSignIn.from_fields(hub.box.open_mapping(sealed))
    assert genuine.resume.startswith(CALLBACK + "?")

    for tampered in ("https://evil.example/", "//evil.example" + CALLBACK + "?state=x",
                     "/\\evil.example" + CALLBACK, CALLBACK + "/../../api/v1/users/me",
                     "/api/v1/users/me", "/oauth/authorize/../upstream/callback?x"):
        forged = hub.box.seal({**genuine.fields(), "resume": tampered})
        status, location, cookies, text = await _get(stopped.url, forged)
        assert status == 400 and "cannot go back" in text, (tampered, status, text[:300])
        assert location is None and SESSION_COOKIE not in cookies, tampered
    assert not await connected(api, upstream["id"])

    # the genuine one (in the browser): signed in, back to the callback (a path on the hub)
    status, location, cookies, _ = await _get(stopped.url, sealed, walk.jar)
    assert status == 302 and location == genuine.resume and SESSION_COOKIE in cookies
    finished = await walk.walk(urllib.parse.urljoin(hub.url, location))
    assert isinstance(finished, Stopped) and finished.status == 200, finished
    assert "Connected" in finished.text
    assert await whoami(hub, api.token, "viaidp__whoami") == "olga-sub"


async def _get(url: str, pending: str, jar: aiohttp.CookieJar | None = None
               ) -> tuple[int, str | None, str, str]:
    """GET the hub's provider callback: with only this pending sign-in cookie, or in the
    browser whose `jar` holds it; the status, Location, the Set-Cookie headers (joined) and
    the text."""
    headers = {} if jar is not None else {"Cookie": f"{PENDING_COOKIE}={pending}"}
    async with aiohttp.ClientSession(cookie_jar=jar) as http, \
            http.get(url, headers=headers, allow_redirects=False) as reply:
        return (reply.status, reply.headers.get("Location"),
                "\n".join(reply.headers.getall("Set-Cookie", [])), await reply.text())


def _form_action(page: str) -> str:
    from tests.form_walk import FirstForm

    form = FirstForm()
    form.feed(page)
    assert form.action is not None, page
    return form.action


async def test_the_normal_flow_needs_one_sign_in_per_browser(
        hub: Hub, upstream_url: str) -> None:
    """Two logins in a row from one browser: the hub's sign-in page shows once, the session
    cookie carries the second."""
    _, api = await fresh_user(hub)
    assert api.token is not None
    first = await register_oauth(api, "one", upstream_url)
    second = await register_oauth(api, "two", upstream_url)
    await connect(api, first["id"], "dora-account")
    await connect(api, second["id"], "dora-account")
    assert (await browser_of(api)).pages == ["sign-in"]
    assert await whoami(hub, api.token, "two__whoami") == "dora-account"


@pytest.mark.parametrize("hub", ["sqlite"], indirect=True)  # one browser run is enough
async def test_the_whole_connect_flow_in_chromium(hub: Hub, upstream_url: str) -> None:
    """Real headless Chromium: the provider's login and consent as `eve-account`, back at
    the hub's callback its sign-in page (password), then "Connected"."""
    from playwright.async_api import async_playwright
    from tests.browser import CHROMIUM_ARGS, chromium_path

    executable = chromium_path()
    user_id, api = await fresh_user(hub)
    assert api.token is not None
    name, password = await set_password(hub, user_id)
    upstream = await register_oauth(api, "inchrome", upstream_url)
    started = await start(api, upstream["id"])
    assert started.status == 200, started.text
    shown: list[str] = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, headless=True,
                                                   args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(started.body["authorization_url"], timeout=STEP_MS)
            for _ in range(MAX_BROWSER_STEPS):
                if await page.title() == "Connected":
                    break
                submit = page.locator("button[type=submit]").first
                await submit.wait_for(timeout=STEP_MS)
                if page.url.startswith(hub.url) and await page.locator(
                        "input[name=username]").count():
                    shown.append("hub:sign-in")
                    await page.fill("input[name=username]", name)
                    await page.fill("input[name=password]", password)
                    submit = page.locator("button[value=sign-in]")
                else:
                    shown.append("provider")
                    if await page.locator("input[name=login]").count():
                        await page.fill("input[name=login]", "eve-account")
                        await page.fill("input[name=password]", "any password")
                async with page.expect_navigation(timeout=STEP_MS):
                    await submit.click()
            assert await page.title() == "Connected", await page.content()
        finally:
            await browser.close()
    assert shown == ["provider", "provider", "hub:sign-in"]
    assert await whoami(hub, api.token, "inchrome__whoami") == "eve-account"


STEP_MS = 15_000
MAX_BROWSER_STEPS = 8


# --- the resume target, property-based ---------------------------------------------------

HUB = "https://hub.example:8443"


@given(st.text(max_size=80) | st.sampled_from(sorted(RESUMABLE_PATHS)).flatmap(
    lambda path: st.text(max_size=60).map(lambda tail: path + tail)))
def test_a_resume_target_is_only_ever_a_sign_in_page_of_the_hub(candidate: str) -> None:
    accepted = resume_target(candidate)
    if accepted is None:
        return
    assert accepted == candidate
    joined = urllib.parse.urlsplit(urllib.parse.urljoin(HUB + "/oauth/oidc/callback",
                                                        candidate))
    assert (joined.scheme, joined.netloc) == ("https", "hub.example:8443")
    assert joined.path in RESUMABLE_PATHS


def test_resume_targets_kept_and_refused() -> None:
    for kept in (CALLBACK + "?code=a&state=b", "/oauth/authorize?client_id=x", CALLBACK):
        assert resume_target(kept) == kept
    for refused in ("https://evil.example" + CALLBACK, "//evil.example" + CALLBACK,
                    "/\\evil.example", CALLBACK + "/..", CALLBACK + "#x", "/oauth/token",
                    CALLBACK + "?a=b c", CALLBACK + "?\r\nSet-Cookie:x", "", "oauth/authorize",
                    CALLBACK + "?" + "x" * 9000):
        assert resume_target(refused) is None, refused
