"""The operators' pages in real headless Chromium (tests/browser.py): an admin disables a user
on the Users page, and that user's next console request and next /mcp call with their API
token fail - the session is refused, not just hidden. Each operators' page is saved as a PNG
at 1280 and 390 px in artifacts/screenshots/ (admin-*.png)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.console.support import console_hub
from tests.console.test_console_browser import (  # noqa: F401 (fixtures: anyio_backend, browser)
    DESKTOP,
    PHONE,
    anyio_backend,
    browser,
    new_page,
    shoot,
    sign_in_here,
)
from tests.hub.hub_browser import set_password
from tests.hub.hub_helpers import Hub, call, fresh_user, mcp_status, open_store

from mcpkit.hub.store.records import AuditEntry

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    tmp: Path = tmp_path_factory.mktemp("console-admin-browser")
    with console_hub(f"sqlite+aiosqlite:///{tmp / 'hub.db'}",
                     oauth_revocation_check_s=0.001) as running:
        yield running


async def signed_in_page(hub: Hub, chromium: Any, user_id: int) -> tuple[Any, Any]:
    """A new browser context signed in to the console as the user: (context, page)."""
    name, password = await set_password(hub, user_id)
    context, page = await new_page(chromium)
    await page.goto(hub.url + "/")
    await sign_in_here(page, name, password)
    await page.wait_for_selector("h1:has-text('Your upstreams')")
    return context, page


async def seed_activity(hub: Hub, user_id: int, upstream_id: str) -> None:
    """Audit rows and a health status to show on the pages (as the router and checker would
    have written them)."""
    now = datetime.now(UTC)
    store = await open_store(hub)
    try:
        await store.audit.record_many([
            AuditEntry(user_id=user_id, upstream_id=upstream_id, upstream_name="weather",
                       tool=("forecast", "alerts", "radar")[i % 3],
                       duration_ms=12.0 + i * 7, outcome=("ok", "ok", "tool_error")[i % 3],
                       error="city not found" if i % 3 == 2 else None,
                       at=now - timedelta(minutes=i))
            for i in reversed(range(12))])  # recorded oldest first, as calls happen
        await store.upstreams.set_health(user_id, upstream_id, "needs_auth",
                                         error="the login to this upstream expired")
    finally:
        await store.close()


async def test_an_admin_disables_a_user_whose_next_requests_then_fail(
        hub: Hub, browser: Any) -> None:  # noqa: F811 (the imported fixture)
    admin_id, _ = await fresh_user(hub, admin=True)
    victim_id, victim_api = await fresh_user(hub)
    victim_name = (await victim_api.get("/api/v1/users/me")).body["name"]
    created = await victim_api.create_upstream(name="weather", url="http://127.0.0.1:9/mcp",
                                               enabled=False)
    await seed_activity(hub, victim_id, created["id"])
    assert victim_api.token is not None
    assert await mcp_status(hub.url, victim_api.token) == 200

    victim_context, victim_page = await signed_in_page(hub, browser, victim_id)
    admin_context, page = await signed_in_page(hub, browser, admin_id)
    try:
        # the operators' pages, from the navigation
        await page.click("nav >> text=Users")
        await page.wait_for_selector("h1:has-text('Users')")
        row = page.locator(f"tr[data-user={victim_name}]")
        await shoot(page, "admin-users")
        await row.locator("a:has-text('Tokens')").click()
        await page.wait_for_selector(f"h1:has-text('Tokens of {victim_name}')")
        await shoot(page, "admin-tokens")
        await page.click("nav >> text=Audit log")
        await page.wait_for_selector("table.audit")
        await shoot(page, "admin-audit")
        await page.select_option("#f-outcome", "tool_error")
        await page.fill("#f-upstream", "weather")
        await page.click("button:has-text('Filter')")
        await page.wait_for_selector("table.audit")
        outcomes = await page.locator("td[data-label=Outcome] .badge").all_text_contents()
        assert outcomes and set(outcomes) == {"tool_error"}
        times = await page.locator("tbody time").evaluate_all(
            "found => found.map(time => time.dateTime)")
        assert len(times) == 4 and times == sorted(times, reverse=True)  # newest first
        await shoot(page, "admin-audit-filtered")
        await page.set_viewport_size(PHONE)  # nothing scrolls sideways at phone width
        assert await page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        await page.set_viewport_size(DESKTOP)
        await page.click("nav >> text=Health")
        await page.select_option("#f-health_status", "needs_auth")
        await page.click("button:has-text('Filter')")
        await page.wait_for_selector("tr[data-upstream=weather]")
        await shoot(page, "admin-health")

        # disabling the user, without a reload
        await page.click("nav >> text=Users")
        row = page.locator(f"tr[data-user={victim_name}]")
        await page.evaluate("window.stillThisPage = true")
        await row.locator("button:has-text('Disable')").click()
        await page.wait_for_selector("[role=status]:has-text('User disabled')")
        assert await page.evaluate("window.stillThisPage === true")
        row = page.locator(f"tr[data-user={victim_name}]")
        assert "disabled" in (await row.locator("td[data-label=State]").text_content() or "")
        await shoot(page, "admin-users-disabled")

        # the user's next console request fails: their session is refused and cleared
        session_cookie = next(c["value"] for c in await victim_context.cookies()
                              if c["name"] == "mcpkit_console")
        await victim_page.goto(hub.url + "/")
        assert await victim_page.locator("h1:has-text('Your upstreams')").count() == 0
        assert not [c for c in await victim_context.cookies()
                    if c["name"] == "mcpkit_console"]
        # the cookie replayed: its tokens are refused (not only forgotten by the browser),
        # back to the sign-in (the redirects followed)
        refused = await call("GET", hub.url + "/", headers={
            "Cookie": f"mcpkit_console={session_cookie}"})
        assert "Your upstreams" not in refused.text and "Sign in" in refused.text
        # and their API token at /mcp
        assert await mcp_status(hub.url, victim_api.token) in (401, 403)
    finally:
        await victim_context.close()
        await admin_context.close()
