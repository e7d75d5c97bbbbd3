"""A remote server that asks for an OAuth login is `needs_auth`, not `failed`: in the
`ServerManager`, in `mcp list` ("needs login", and a status and login command in --json), in
`mcp test`, and when it is added (`mcp add` probes it, bounded, and never fails). The server
is tests/client/oauth_server.py on 127.0.0.1: a 401 with `WWW-Authenticate: Bearer
resource_metadata=…` to any request without a token. A server whose entry says
`grant: client_credentials` needs no login: the manager gets its tokens
(tests/client/machine_server.py)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from tests.client import machine_server, oauth_server
from tests.client.oauth_server import AuthServer
from tests.manager.test_cli import User, error_line, hint
from tests.procs import serve_in_thread

from mcpkit.manager.config import from_entry
from mcpkit.manager.errors import ServerUnavailable
from mcpkit.manager.managed import Status
from mcpkit.manager.manager import ServerManager


@pytest.fixture(scope="module")
def protected() -> Iterator[AuthServer]:
    with oauth_server.running() as auth:
        yield auth


@pytest.mark.anyio
async def test_the_manager_marks_a_401_with_an_oauth_challenge_needs_auth(
        protected: AuthServer) -> None:
    configs = [from_entry("docs", {"url": protected.resource, "startup_timeout_sec": 10}),
               from_entry("tok", {"url": protected.resource, "bearer_token_env_var": "TOK",
                                  "startup_timeout_sec": 10})]
    manager = ServerManager(configs, environ={"TOK": "a-token-the-server-never-issued"})
    async with manager:
        docs, tok = manager.server("docs"), manager.server("tok")
        assert docs.status is Status.NEEDS_AUTH
        assert docs.login == "mcpkit mcp login docs"
        assert docs.error == "needs login: run `mcpkit mcp login docs`"
        with pytest.raises(ServerUnavailable, match="MCP server docs needs login: run "
                                                    "`mcpkit mcp login docs`"):
            await docs.ready_client()
        # a token given as it is and refused: the token is wrong, a login would not help
        assert tok.status is Status.FAILED and tok.login is None
        assert "HTTP 401" in (tok.error or "")
        assert manager.tools() == []
    assert protected.registrations == 0  # nothing was registered at the AS by starting


def test_mcp_add_says_login_is_required_and_list_shows_needs_login(
        user: User, protected: AuthServer) -> None:
    added = user.ok("mcp", "add", "--transport", "http", "docs", protected.resource)
    assert added.out.splitlines()[-1] == ("docs requires login (it asks for OAuth): run "
                                          "`mcpkit mcp login docs`")
    quiet = user.ok("mcp", "add", "docs2", protected.resource, "--no-probe")
    assert "requires login" not in quiet.out

    listed = user.ok("mcp", "list")  # a server that needs a login is not a failure
    row = next(line for line in listed.out.splitlines() if line.startswith("docs "))
    assert "needs login" in row
    assert "mcpkit: docs needs login (it asks for OAuth)" in listed.err
    assert "hint: log in: `mcpkit mcp login docs`" in listed.err
    report = {r["name"]: r for r in user.ok("mcp", "list", "--json").json()}
    assert report["docs"]["status"] == "needs_auth"
    assert report["docs"]["login"] == "mcpkit mcp login docs"
    assert report["docs"]["tools"] is None

    tested = user.fails(1, "mcp", "test", "docs")
    assert error_line(tested) == (f"mcpkit: error: docs requires login (OAuth) (HTTP 401 from "
                                  f"{protected.resource})")
    assert hint(tested) == "hint: log in: `mcpkit mcp login docs`"
    assert user.fails(1, "mcp", "test", "docs", "--json").json()["problem"] == "login"


def test_the_add_probe_is_bounded_and_never_fails_the_add(user: User) -> None:
    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/mcp"
        added = user.ok("mcp", "add", "slow", url, "--probe-timeout", "0.5")
    assert "requires login" not in added.out
    assert user.servers(user.user_file)["slow"] == {"type": "http", "url": url}
    # unset variables: nothing to probe with, and still added
    user.ok("mcp", "add", "later", "http://127.0.0.1:9/${MCP_PATH}")
    assert "later" in user.servers(user.user_file)


@pytest.mark.anyio
async def test_the_client_credentials_grant_of_an_entry_needs_no_login() -> None:
    secret = "svc-secret-7f3a9c"
    machine = machine_server.MachineServer(client_secrets={"svc": secret})
    with serve_in_thread(machine_server.app(machine), name="machine-oauth") as base:
        machine.base = base
        oauth = {"client_id": "svc", "client_secret_env": "SVC_SECRET",
                 "grant": "client_credentials"}
        configs = [from_entry("svc", {"url": machine.resource, "oauth": oauth,
                                      "startup_timeout_sec": 10}),
                   from_entry("unset", {"url": machine.resource, "startup_timeout_sec": 10,
                                        "oauth": {**oauth, "client_secret_env": "UNSET_X"}})]
        async with ServerManager(configs, environ={"SVC_SECRET": secret}) as manager:
            svc, unset = manager.server("svc"), manager.server("unset")
            assert svc.status is Status.READY, svc.error
            result = await manager.call_tool("mcp__svc__read", {})
            assert result.content[0].text == "read ok"  # type: ignore[union-attr]
            # no secret to send: refused, and a login would not help (nobody logs in)
            assert unset.status is Status.FAILED and unset.login is None
            assert secret not in (unset.error or "")
        assert [form["grant_type"] for form in machine.token_requests] == \
            ["client_credentials"]
