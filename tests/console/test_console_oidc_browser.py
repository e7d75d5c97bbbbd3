"""The console with the real OpenID provider (tests/auth_e2e/stack.py: oidc-provider on Node
22), in real headless Chromium: one provider, one protected `whoami` upstream trusting it
(tests/hub/whoami_upstream.py) and one hub that is the provider's pre-registered client.

- Connecting an OAuth upstream (added with the console's form, auth mode "oauth"): the
  upstreams page shows "needs login" and "Connect"; the click goes to the provider's login
  and consent pages (the hub registered there by DCR), back to the hub's callback and to the
  console, which shows the upstream healthy with its tools; a call through /mcp with the
  user's API token reaches the upstream as the provider's subject.
- Signing in to the console with "Sign in with <provider>" (a subject an admin linked to a
  hub user): the console then shows that user's upstreams.
- Isolation: user B, in a second browser context, types user A's URLs (edit, remove, tools,
  a tool's try page when the console has one, and posts Connect, Refresh, Remove, Save and a
  tool switch with B's own CSRF token): each answer is the console's 404 page naming none of
  A's upstreams, URLs or tools, and nothing of A's changed; an operators' page is a 403.

Screenshots at 1280 and 390 px in artifacts/screenshots/ (oauth-*.png, oidc-*.png,
isolation-*.png)."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.auth_e2e.logins import fill_provider_login
from tests.auth_e2e.stack import Stack, running_stack
from tests.console import test_console_browser as chromium
from tests.console.support import console_hub
from tests.console.test_console_admin_browser import signed_in_page
from tests.console.test_console_browser import new_page, shoot
from tests.hub.hub_helpers import UPSTREAMS, Api, Hub, fresh_user, open_store, unique
from tests.hub.oidc_login import CALLBACK_PATH
from tests.hub.upstream_login_support import connect, register_oauth, whoami, whoami_upstream
from tests.procs import free_port

from mcpkit.hub.console import tool_pages, upstream_pages

pytestmark = pytest.mark.anyio
# the module fixtures of the console's Chromium test: one Chromium for the module
anyio_backend, browser = chromium.anyio_backend, chromium.browser

SECRET_ENV = "MCPKIT_TEST_CONSOLE_OIDC_CLIENT_SECRET"
PROVIDER_NAME = "Test IdP"
WHOAMI_TOOLS = ("token_claims", "whoami")
"""The tools of the protected upstream (tests/hub/whoami_upstream.py)."""


@dataclass
class OidcConsole:
    stack: Stack
    hub: Hub
    upstream_url: str
    """The protected `whoami` MCP server, trusting the provider."""


@pytest.fixture(scope="module")
def oidc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcConsole]:
    """The provider, the whoami upstream, and a console hub whose OpenID provider it is (its
    port chosen first: the provider's client "hub" redirects to it only)."""
    directory: Path = tmp_path_factory.mktemp("console-oidc")
    port = free_port()
    callback = f"http://127.0.0.1:{port}{CALLBACK_PATH}"
    with running_stack(directory, hub_redirect_uris=(callback,)) as stack, \
            whoami_upstream(stack, directory) as upstream_url:
        os.environ[SECRET_ENV] = stack.hub_client_secret  # read by the hub at start
        try:
            with console_hub(f"sqlite+aiosqlite:///{directory / 'hub.db'}", port=port,
                             oidc_issuer=stack.issuer, oidc_client_id=stack.hub_client_id,
                             oidc_client_secret_env=SECRET_ENV,
                             oidc_provider_name=PROVIDER_NAME) as hub:
                yield OidcConsole(stack, hub, upstream_url)
        finally:
            os.environ.pop(SECRET_ENV, None)


async def at_provider(page: Any, account: str, pages: list[str]) -> None:
    """On the provider's page now showing: its login (filled with the account) or its
    consent; its button pressed, the next page awaited."""
    await page.locator("button[type=submit]").first.wait_for()
    prompt = await page.locator("input[name=prompt]").get_attribute("value")
    pages.append(str(prompt))
    await fill_provider_login(page, account)
    async with page.expect_navigation():
        await page.locator("button[type=submit]").first.click()


async def through_provider(page: Any, stack: Stack, account: str) -> list[str]:
    """Every provider page in turn until the browser is back off the provider: the prompts
    shown ("login", "consent")."""
    pages: list[str] = []
    for _ in range(4):  # a login and a consent at most; bounded whatever the provider does
        if not page.url.startswith(stack.issuer + "/"):
            return pages
        await at_provider(page, account, pages)
    raise AssertionError(f"still at the provider after {pages}: {page.url}")


def row_of(page: Any, name: str) -> Any:
    return page.locator(f"tr[data-upstream='{name}']")


async def cell(row: Any, label: str) -> str:
    return (await row.locator(f"td[data-label='{label}']").text_content() or "").strip()


# --- connecting an OAuth upstream ------------------------------------------------------------


async def test_connect_an_oauth_upstream_through_the_provider(
        oidc: OidcConsole, browser: Any) -> None:
    hub, stack = oidc.hub, oidc.stack
    user_id, api = await fresh_user(hub)
    account = unique("upstream-account")
    context, page = await signed_in_page(hub, browser, user_id)
    try:
        # added with the console's form, auth mode "oauth"
        await page.click("text=Add upstream")
        await page.fill("#name", "who")
        await page.fill("#url", oidc.upstream_url)
        await page.select_option("#auth_mode", "oauth")
        await page.click("button:has-text('Add upstream')")
        await page.wait_for_selector("[role=status]:has-text('Upstream added.')")
        (upstream,) = (await api.get(UPSTREAMS)).body["items"]
        assert upstream["auth_mode"] == "oauth" and upstream["oauth_connected"] is False

        # before: needs a login, with the way to it
        row = row_of(page, "who")
        assert (await row.locator(".badge").first.text_content() or "").strip() == \
            "needs login"
        connect_button = row.locator("button:has-text('Connect')")
        assert await connect_button.is_visible()
        assert await cell(row, "Tools") == "0"
        await shoot(page, "oauth-needs-login")

        # Connect: to the provider (the hub registered its client there first), its login
        # and consent pages, back through the hub's callback to the console
        mark = stack.mark()
        async with page.expect_navigation(url=re.compile("^" + re.escape(stack.issuer))):
            await connect_button.click()
        assert await through_provider(page, stack, account) == ["login", "consent"]
        await page.wait_for_selector("[role=status]:has-text('Login finished.')")
        assert page.url.startswith(hub.url + "/?notice=connected")
        assert stack.events_since(mark, "registration_create.success")
        assert stack.events_since(mark, "grant.success", grant_type="authorization_code")

        # after: connected, healthy, its tools counted, no badge or button asking for a login
        row = row_of(page, "who")
        assert (await row.locator(".badge").first.text_content() or "").strip() == "healthy"
        assert await row.locator(".badge.needs_auth").count() == 0
        assert await row.locator("button:has-text('Connect')").count() == 0
        assert await cell(row, "Tools") == str(len(WHOAMI_TOOLS))
        assert await cell(row, "Last error") == "—"
        await shoot(page, "oauth-connected")
        shown = (await api.get(f"{UPSTREAMS}/{upstream['id']}")).body
        assert shown["oauth_connected"] is True and shown["health_status"] == "healthy"

        # its tools page lists them
        await row.locator("a:has-text('Tools')").click()
        await page.wait_for_selector("h1:has-text('Tools of who')")
        listed = await page.locator("tr[data-tool]").evaluate_all(
            "rows => rows.map(row => row.dataset.tool)")
        assert sorted(listed) == sorted(WHOAMI_TOOLS)
        await shoot(page, "oauth-tools")
    finally:
        await context.close()

    # the login works: a call through the hub's /mcp with the user's API token reaches the
    # upstream as the provider's subject
    assert api.token is not None
    assert await whoami(hub, api.token, "who__whoami") == account


# --- signing in through the OpenID provider -----------------------------------------------


async def test_sign_in_to_the_console_through_the_openid_provider(
        oidc: OidcConsole, browser: Any) -> None:
    hub, stack = oidc.hub, oidc.stack
    user_id, api = await fresh_user(hub)
    account = unique("idp-account")
    mine = unique("linked")
    await api.create_upstream(name=mine, url="http://127.0.0.1:9/mcp", enabled=False)
    store = await open_store(hub)
    try:
        await store.oidc.link(stack.issuer, account, user_id)  # an admin admits the subject
    finally:
        await store.close()
    context, page = await new_page(browser)
    try:
        await page.goto(hub.url + "/")
        button = page.locator("button[value=oidc]")
        await button.wait_for()
        assert (await button.text_content() or "").strip() == f"Sign in with {PROVIDER_NAME}"
        assert await page.locator("input[name=password]").count() == 1  # the other way stays
        await shoot(page, "oidc-sign-in")
        async with page.expect_navigation(url=re.compile("^" + re.escape(stack.issuer))):
            await button.click()
        assert await through_provider(page, stack, account) == ["login", "consent"]
        await page.wait_for_selector("h1:has-text('Your upstreams')")
        assert page.url == hub.url + "/"
        names = await page.locator("tr[data-upstream]").evaluate_all(
            "rows => rows.map(row => row.dataset.upstream)")
        assert names == [mine]  # the linked user's upstreams, and only theirs
        await shoot(page, "oidc-signed-in")
    finally:
        await context.close()


# --- a user never sees another user's upstreams ------------------------------------------


def typed_pages(upstream_id: str, tool: str) -> list[str]:
    """Every console GET page of one upstream a user could type, from the console's own route
    tables: edit, remove, tools, and whatever else is added under an upstream (a tool's try
    page: its other placeholders filled with `tool`)."""
    pages = []
    for path, _, method in [*upstream_pages.PAGES, *tool_pages.PAGES]:
        if method == "GET" and "{upstream_id}" in path:
            typed = path.replace("{upstream_id}", upstream_id)
            pages.append(re.sub(r"\{[^}]+\}", tool, typed))
    assert len(pages) >= 3, pages  # edit, remove, tools at least
    return pages


def typed_posts(upstream: dict[str, Any]) -> list[tuple[str, dict[str, str]]]:
    """Every console action (POST) on one upstream, from the console's route tables (Save,
    Remove, Refresh now, Connect, a tool switch, and whatever is added), each with the fields
    any of their forms sends (the CSRF token aside): a tool switched off, the edit form's
    values, the upstream's version."""
    fields = {"name": "taken", "transport": "http", "url": "http://127.0.0.1:9/mcp",
              "auth_mode": "static", "connect_timeout_s": "10", "call_timeout_s": "60",
              "enabled": "on", "version": str(upstream["version"]),
              "tool": WHOAMI_TOOLS[1], "enable": "0"}
    posts = []
    for path, _, method in [*upstream_pages.PAGES, *tool_pages.PAGES]:
        if method == "POST" and "{upstream_id}" in path:
            typed = path.replace("{upstream_id}", upstream["id"])
            posts.append((re.sub(r"\{[^}]+\}", WHOAMI_TOOLS[1], typed), fields))
    assert len(posts) >= 5, posts  # save, remove, refresh, connect, a tool switch at least
    return posts


async def post_in_page(page: Any, path: str, fields: dict[str, str]) -> Any:
    """Submit a form to `path` from the page, with the page's own CSRF token (what a user
    could do from the browser's console): the response the browser navigated to."""
    async with page.expect_navigation() as navigation:
        await page.evaluate("""([path, fields]) => {
            const form = document.createElement("form");
            form.method = "post";
            form.action = path;
            const token = document.querySelector("input[name=csrf_token]").value;
            for (const [name, value] of Object.entries({...fields, csrf_token: token})) {
                const input = document.createElement("input");
                input.type = "hidden"; input.name = name; input.value = value;
                form.append(input);
            }
            document.body.append(form);
            form.submit();
        }""", [path, fields])
    return await navigation.value


async def not_found_page(page: Any, url: str) -> str:
    """Open `url`: it must be the console's error page with status 404; its message."""
    response = await page.goto(url)
    assert response is not None and response.status == 404, url
    await page.wait_for_selector("h1:has-text('Something went wrong')")
    return (await page.locator("[role=alert]").text_content() or "").strip()


async def what_bob_could_change(api: Api) -> dict[str, dict[str, Any]]:
    """The user's upstreams by id: what the console's actions change (not the health a
    background check may update meanwhile)."""
    kept = ("name", "url", "auth_mode", "enabled", "disabled_tools", "oauth_connected")
    return {item["id"]: {key: item[key] for key in kept}
            for item in (await api.get(UPSTREAMS)).body["items"]}


async def a_user_with_upstreams(oidc: OidcConsole) -> tuple[Api, dict[str, Any],
                                                             dict[str, Any]]:
    """User A: an OAuth upstream connected (its catalog: the whoami tools) and a plain one."""
    _, api = await fresh_user(oidc.hub)
    connected = await register_oauth(api, unique("a-secret"), oidc.upstream_url)
    await connect(api, connected["id"], unique("a-account"))
    plain = await api.create_upstream(name=unique("a-private"),
                                      url="http://127.0.0.1:9/a-private-path", enabled=False)
    return api, connected, plain


async def test_a_user_never_sees_another_users_upstreams_even_by_typing_urls(
        oidc: OidcConsole, browser: Any) -> None:
    hub = oidc.hub
    ada, connected, plain = await a_user_with_upstreams(oidc)
    tools = (await ada.get(f"{UPSTREAMS}/{connected['id']}/tools")).body["items"]
    assert sorted(tool["name"] for tool in tools) == sorted(WHOAMI_TOOLS)
    ada_id = ada.user_id
    secrets_of_ada = [connected["name"], plain["name"], oidc.upstream_url, plain["url"],
                      "a-private-path", *WHOAMI_TOOLS]
    before = await what_bob_could_change(ada)
    bob_id, bob = await fresh_user(hub)
    bobs = await bob.create_upstream(name=unique("b-own"), url="http://127.0.0.1:9/mcp",
                                     enabled=False)

    async def shows_nothing_of_ada(page: Any) -> None:
        content = await page.content()
        for secret in secrets_of_ada:
            assert secret not in content, (page.url, secret)

    context, page = await signed_in_page(hub, browser, bob_id)
    try:
        # Bob's list: his upstream only
        names = await page.locator("tr[data-upstream]").evaluate_all(
            "rows => rows.map(row => row.dataset.upstream)")
        assert names == [bobs["name"]]
        await shows_nothing_of_ada(page)

        # Ada's pages, typed: the console's not-found page, the very one an id nobody has
        # gets (nothing tells Bob the id exists)
        nobodys = await not_found_page(page, hub.url + typed_pages(str(uuid.uuid4()), "x")[0])
        assert nobodys == "no upstream with this id"
        for upstream in (connected, plain):
            for path in typed_pages(upstream["id"], WHOAMI_TOOLS[1]):
                assert await not_found_page(page, hub.url + path) == nobodys, path
                await shows_nothing_of_ada(page)
        await shoot(page, "isolation-not-found")

        # Ada's actions, posted with Bob's own CSRF token: refused alike, nothing done
        await page.goto(hub.url + "/")
        for path, fields in typed_posts(connected):
            response = await post_in_page(page, path, fields)
            assert response is not None and response.status == 404, path
            assert (await page.locator("[role=alert]").text_content() or "").strip() == \
                nobodys, path
            await shows_nothing_of_ada(page)
            await page.goto(hub.url + "/")

        # an operators' page, typed by a non-admin: 403, and no link to it
        assert await page.locator("nav >> text=Users").count() == 0
        for path in ("/console/admin/users", f"/console/admin/users/{ada_id}/tokens",
                     "/console/admin/audit", "/console/admin/health"):
            response = await page.goto(hub.url + path)
            assert response is not None and response.status == 403, path
            await page.wait_for_selector("h1:has-text('Something went wrong')")
            await shows_nothing_of_ada(page)
        await shoot(page, "isolation-forbidden")
    finally:
        await context.close()

    # Ada's upstreams are as they were: none removed, renamed, switched or logged out
    assert await what_bob_could_change(ada) == before
    assert before[connected["id"]]["oauth_connected"] is True
