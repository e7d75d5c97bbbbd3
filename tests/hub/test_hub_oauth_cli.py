"""`mcpkit mcp login` against the hub as a user types it (its own HOME, a separate process):
the headless `--no-browser` login, the hub's sign-in and consent pages answered over HTTP
(oauth_login.py) as a browser elsewhere would, the address pasted back; then the tools of the
user's upstreams called through the hub with the kept login."""

from __future__ import annotations

import re
import urllib.parse

import anyio
from tests.hub.oauth_login import HubLogin
from tests.hub.test_hub_oauth import OAuthHub, oauth_hub, user_with_password  # noqa: F401
from tests.manager.test_cli import User, user  # noqa: F401 (fixtures)
from tests.manager.test_login_cli import login_pasting

JWT = re.compile(r"eyJ[\w-]+\.[\w-]+\.[\w-]+")


def test_mcp_login_to_the_hub_then_list_tools(
        user: User, oauth_hub: OAuthHub) -> None:  # noqa: F811 (the fixtures imported above)
    _, name, password = anyio.run(user_with_password, oauth_hub)
    hub_mcp = oauth_hub.url + "/mcp"
    user.ok("mcp", "add", "--transport", "http", "hub", hub_mcp, "--token-store", "file",
            "--no-probe")
    pages: list[str] = []

    def browse(authorization_url: str) -> str:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(authorization_url).query)
        login = HubLogin(name, password, redirect_uri=query["redirect_uri"][0])
        back = anyio.run(login, authorization_url)
        pages.extend(login.pages)
        return back

    code, out, err = login_pasting(user, "hub", browse=browse, marker="/oauth/authorize?")
    assert code == 0, err
    assert out.startswith(f"logged in to hub at {oauth_hub.url} as client "), out
    assert pages == ["login", "consent"]
    listed = user.ok("mcp", "list", "--json").json()
    assert [row["status"] for row in listed if row["name"] == "hub"] == ["ready"]
    tools = user.ok("tools", "hub")
    assert "oauthup__" in tools.out, tools
    for text in (out, err, tools.out, tools.err):
        assert not JWT.search(text) and password not in text
