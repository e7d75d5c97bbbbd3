"""`mcpkit mcp add|login|list|call|auth status|logout` as a user types them, each a separate
process with its own HOME, against the real provider (tests/auth_e2e/stack.py): the headless
`--no-browser` login, where the user opens the printed URL elsewhere (here: the provider's
login and consent pages, scripted by FormLogin) and pastes the address the browser ends on.
The provider's event log, not the CLI's word, says what happened at the authorization server."""

from __future__ import annotations

import re
import urllib.parse

import anyio
from tests.auth_e2e.logins import FormLogin
from tests.auth_e2e.stack import Stack
from tests.manager.test_cli import User
from tests.manager.test_login_cli import login_pasting

JWT = re.compile(r"eyJ[\w-]+\.[\w-]+\.[\w-]+")
"""What a leaked access token (a JWT) looks like in output."""


def provider_login(authorization_url: str) -> str:
    """The user, in a browser on another machine: logs in, consents, copies the address."""
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(authorization_url).query)
    login = FormLogin(redirect_uri=query["redirect_uri"][0])
    return anyio.run(login, authorization_url)


def test_headless_login_then_call_status_and_logout(user: User, stack: Stack) -> None:
    added = user.ok("mcp", "add", "--transport", "http", "docs", stack.resource,
                    "--token-store", "file")
    assert "docs requires login (it asks for OAuth): run `mcpkit mcp login docs`" in added.out
    assert user.ok("mcp", "list", "--json").json()[0]["status"] == "needs_auth"

    mark = stack.mark()
    code, out, err = login_pasting(user, "docs", browse=provider_login, marker="/auth?")
    assert code == 0, err
    assert out.startswith(f"logged in to docs at {stack.issuer} as client ")
    assert len(stack.events_since(mark, "registration_create.success")) == 1
    assert len(stack.events_since(mark, "grant.success", grant_type="authorization_code")) == 1

    mark = stack.mark()
    called = user.ok("call", "docs", "read")
    assert "read ok" in called.out
    status = user.ok("mcp", "auth", "status", "docs", "--json")
    [row] = status.json()
    [login] = row["logins"]
    assert login["issuer"] == stack.issuer and login["refreshable"] is True
    assert not stack.events_since(mark, "authorization.success")  # the kept login was used
    for text in (out, err, called.out, called.err, status.out, status.err):
        assert not JWT.search(text)

    mark = stack.mark()
    logout = user.ok("mcp", "logout", "docs")
    assert logout.out.startswith("logged out of docs: removed 1 login")
    assert stack.events_since(mark, "refresh_token.destroyed")
    assert user.ok("mcp", "list", "--json").json()[0]["status"] == "needs_auth"

