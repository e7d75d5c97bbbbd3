"""`mcpkit mcp login|logout` and `mcpkit mcp auth status`, driven as a user would: a
subprocess per command, HOME in a temp dir (the file token store under it), against
tests/client/oauth_server.py on 127.0.0.1 (a real authorization server: DCR, PKCE, rotating
refresh tokens; and the protected MCP server behind it).

- `--no-browser`: the test reads the printed URL from stderr, GETs it (the test AS redirects
  at once) and pastes the `Location` on stdin, as a user on a headless machine would;
- the browser flow: `$BROWSER` is a small script (tests/manager/fake_browser.py) that GETs
  the URL and follows the redirect to the loopback listener, as a browser would;
- afterwards `mcp list` starts the server with the kept login, `auth status` shows it with no
  secret in it, and `logout` removes it (the server then needs login again)."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.client import oauth_server
from tests.client.oauth_server import AuthServer
from tests.manager.test_cli import PY, RUN_TIMEOUT_S, User, error_line
from tests.procs import free_port

FAKE_BROWSER = str(Path(__file__).parent / "fake_browser.py")
MAX_STDERR_LINES = 50


@pytest.fixture
def protected() -> Iterator[AuthServer]:
    with oauth_server.running() as auth:
        yield auth


def no_secret_in(auth: AuthServer, *texts: str) -> None:
    assert auth.secrets_seen, "the server issued nothing: the test proves nothing"
    for text in texts:
        for secret in auth.secrets_seen:
            assert secret not in text


def location_of(url: str) -> str:
    """GET `url` without following the redirect; the `Location` it answers."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.request("GET", f"{parts.path}?{parts.query}")
        reply = connection.getresponse()
        assert reply.status == 302, reply.status
        return reply.getheader("Location") or ""
    finally:
        connection.close()


def login_pasting(user: User, name: str, *flags: str,
                  browse: Callable[[str], str] = location_of,
                  marker: str = "/authorize?") -> tuple[int, str, str]:
    """`mcpkit mcp login NAME --no-browser`: read the URL it prints (the stderr line with
    `marker`), 'log in' (`browse` it: by default GET it, as the test AS redirects at once),
    paste where the browser ends."""
    proc = subprocess.Popen([PY, "-m", "mcpkit", "mcp", "login", name, "--no-browser", *flags],
                            cwd=user.project, env=user.env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding="utf-8")
    assert proc.stdin is not None and proc.stderr is not None
    try:
        seen = []
        for _ in range(MAX_STDERR_LINES):
            line = proc.stderr.readline()
            seen.append(line)
            if line.strip().startswith("http://") and marker in line:
                break
        else:
            raise AssertionError(f"no authorization URL printed: {''.join(seen)}")
        proc.stdin.write(browse(line.strip()) + "\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = "".join(seen) + err
    assert "Traceback" not in err, err
    return proc.returncode, out, err


def test_login_with_no_browser_then_list_status_and_logout(user: User,
                                                           protected: AuthServer) -> None:
    user.ok("mcp", "add", "docs", protected.resource, "--token-store", "file", "--no-probe")
    before = {r["name"]: r for r in user.ok("mcp", "list", "--json").json()}
    assert before["docs"]["status"] == "needs_auth"

    code, out, err = login_pasting(user, "docs", "--scopes", "mcp:read,mcp:write")
    assert code == 0, err
    assert out.splitlines()[0] == (f"logged in to docs at {protected.base} as client "
                                   "client-1")
    assert "  scopes:  mcp:read mcp:write" in out
    assert "kept in: the file store (" in out
    [asked] = protected.authorize_requests
    assert asked["scope"] == "mcp:read mcp:write"  # --scopes, as given
    no_secret_in(protected, out, err)

    status = user.ok("mcp", "auth", "status", "--json")
    [row] = status.json()
    assert row["logged_in"] is True and row["store"]["kind"] == "file"
    [login] = row["logins"]
    assert (login["issuer"], login["client_id"]) == (protected.base, "client-1")
    assert login["scopes"] == ["mcp:read", "mcp:write"] and login["refreshable"] is True
    assert login["expires_at"] and login["expired"] is False
    assert login["dpop_bound"] is False and login["client_source"] == "dcr"
    no_secret_in(protected, status.out, status.err)
    text = user.ok("mcp", "auth", "status", "docs").out
    assert "docs: logged in" in text and f"issuer:      {protected.base}" in text
    no_secret_in(protected, text)

    # the manager starts the server with the kept login: no browser, no new registration
    after = {r["name"]: r for r in user.ok("mcp", "list", "--json").json()}
    assert after["docs"]["status"] == "ready", after["docs"]
    assert after["docs"]["tools"] == 2
    assert protected.registrations == 1 and len(protected.authorize_requests) == 1

    out = user.ok("mcp", "logout", "docs").out
    assert out.startswith("logged out of docs: removed 1 login from the file store (")
    # the test AS has no revocation endpoint: said, and the login is gone all the same
    assert f"  not revoked: {protected.base}: " in out
    assert user.ok("mcp", "auth", "status", "docs", "--json").json()[0]["logged_in"] is False
    assert "docs was not logged in" in user.ok("mcp", "logout", "docs").out
    again = {r["name"]: r for r in user.ok("mcp", "list", "--json").json()}
    assert again["docs"]["status"] == "needs_auth"


def test_login_in_the_browser_on_a_chosen_callback_port(user: User,
                                                        protected: AuthServer) -> None:
    port = free_port()
    user.ok("mcp", "add", "docs", protected.resource, "--token-store", "file", "--no-probe",
            "--callback-port", str(port))
    done = user.ok("mcp", "login", "docs", BROWSER=f"{sys.executable} {FAKE_BROWSER} %s")
    assert done.out.startswith(f"logged in to docs at {protected.base} as client client-1")
    assert "/authorize?" in done.err  # the URL is printed even when a browser opens
    [asked] = protected.authorize_requests
    assert asked["redirect_uri"] == f"http://127.0.0.1:{port}/callback"
    no_secret_in(protected, done.out, done.err)


def test_login_refusals(user: User, protected: AuthServer) -> None:
    user.ok("mcp", "add", "files", "--", PY, "-c", "pass")
    user.ok("mcp", "add", "tok", protected.resource, "--bearer-token-env-var", "TOK")
    stdio = user.fails(2, "mcp", "login", "files")
    assert "files is a command (stdio) server" in error_line(stdio)
    token = user.fails(2, "mcp", "login", "tok", TOK="x")
    assert "tok sends a token as it is (bearer_token_env_var); it does not log in" in \
        error_line(token)
    unknown = user.fails(2, "mcp", "login", "nope")
    assert "no server named 'nope'" in error_line(unknown) or "nope" in error_line(unknown)
    port = user.fails(2, "mcp", "login", "files", "--callback-port", "80")
    assert "files is a command (stdio) server" in error_line(port)
    assert json.loads(user.ok("mcp", "auth", "status", "--json").out) == []
