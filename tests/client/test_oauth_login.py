"""`OAuth.login(url)` through `LoopbackRedirect` against the real test authorization server
(tests/client/oauth_server.py): the test plays the browser (urllib, following the
authorization server's redirect to the listener), and a real subprocess logs in with the
`--no-browser` paste flow over its stdin/stderr."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.client import oauth_server
from tests.client.oauth_server import AuthServer
from tests.procs import free_port, stop_process

from mcpkit import Client
from mcpkit.client.oauth import OAuth
from mcpkit.client.oauth_client_metadata import client_metadata_document
from mcpkit.client.oauth_loopback import CALLBACK_PORTS, LoopbackRedirect

pytestmark = pytest.mark.anyio

PASTE_LOGIN = Path(__file__).with_name("paste_login.py")


@pytest.fixture
def server() -> Iterator[AuthServer]:
    with oauth_server.running() as auth:
        yield auth


def browser(visited: list[str]) -> object:
    """An opener that browses like a user who clicks "allow": GETs the authorization URL
    and follows the authorization server's redirect to the loopback listener."""
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def open_url(url: str) -> bool:
        with direct.open(url, timeout=10) as page:  # http://127.0.0.1 only
            visited.append(page.geturl())
            return page.status == 200
    return open_url


async def test_login_through_the_loopback_listener(
        server: AuthServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    visited: list[str] = []
    range_ = [free_port(), free_port()]
    redirect = LoopbackRedirect(ports=range_, opener=browser(visited), output=Printed())
    oauth = OAuth(redirect=redirect)
    tokens = await oauth.login(server.resource)
    assert tokens.access_token in server.access  # the AS issued it: a real login
    [client_id] = server.clients
    assert server.redirect_uris[client_id] == redirect.redirect_uris  # the range, registered
    [asked] = server.authorize_requests
    assert asked["redirect_uri"] in redirect.redirect_uris
    assert server.token_requests[0]["redirect_uri"] == asked["redirect_uri"]
    assert visited and visited[0].startswith(asked["redirect_uri"] + "?")  # the listener's page
    # the login is used at once: the first call sends the token, no second authorization
    async with Client(server.resource, era="2025-11-25", auth=oauth) as c:
        result = await c.call_tool("read", {})
        assert result.content[0].text == "read ok"  # type: ignore[union-attr]
    assert len(server.authorize_requests) == 1
    for secret in server.secrets_seen:  # codes, verifiers, tokens, client secrets
        assert secret not in caplog.text
    state = urllib.parse.parse_qs(urllib.parse.urlsplit(visited[0]).query)["state"][0]
    assert state not in caplog.text


async def test_login_again_authorizes_again_and_reuses_the_registration(
        server: AuthServer) -> None:
    redirect = LoopbackRedirect(ports=[free_port()], opener=browser([]), output=Printed())
    oauth = OAuth(redirect=redirect)
    first = await oauth.login(server.resource)
    second = await oauth.login(server.resource)
    assert first.access_token != second.access_token
    assert len(server.authorize_requests) == 2 and server.registrations == 1


async def test_login_without_a_401_discovers_from_the_well_known_metadata(
        server: AuthServer) -> None:
    """The probe is not refused (404 here): discovery starts at the protected-resource
    metadata's well-known URLs, and the login works all the same."""
    server.resource_path = ""  # the resource is the whole origin
    redirect = LoopbackRedirect(ports=[free_port()], opener=browser([]), output=Printed())
    tokens = await OAuth(redirect=redirect).login(server.base + "/elsewhere")
    assert tokens.access_token in server.access
    [asked] = server.authorize_requests
    assert asked["resource"] == server.base


def test_the_paste_flow_in_a_real_process(server: AuthServer) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(PASTE_LOGIN), server.resource, str(port)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdin is not None
        url = read_authorization_url(proc)
        pasted = io.StringIO()
        paste_browser(pasted)(url)  # the user's browser, on another machine
        location = pasted.getvalue().strip()
        assert location.startswith(f"http://127.0.0.1:{port}/callback?")  # a dead page
        proc.stdin.write("http://127.0.0.1:1/callback?code=typo\n")  # refused: asked again
        proc.stdin.write(location + "\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=30)
    finally:
        stop_process(proc)  # type: ignore[arg-type]
    assert proc.returncode == 0, err
    assert out.startswith("logged-in") and "mcp:read" in out
    assert "That is not it" in err
    assert server.token_requests[0]["redirect_uri"] == f"http://127.0.0.1:{port}/callback"
    assert len(server.access) == 1


def test_a_paste_that_never_comes_times_out_and_the_process_exits(
        server: AuthServer) -> None:
    """The stdin read is abandoned at the timeout: it must not keep the process alive."""
    with subprocess.Popen(  # the pipes are closed on exit
            [sys.executable, str(PASTE_LOGIN), server.resource, str(free_port()), "0.5"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True) as proc:
        try:  # stdin stays open and silent (communicate() would close it)
            proc.wait(timeout=30)
            assert proc.stderr is not None
            err = proc.stderr.read()
        finally:
            stop_process(proc)  # type: ignore[arg-type]
    assert proc.returncode != 0
    assert "CallbackTimeout" in err and "no redirect URL was pasted within 0.5 s" in err


def read_authorization_url(proc: subprocess.Popen[str]) -> str:
    """The authorization URL the process printed on stderr (bounded: 50 lines)."""
    assert proc.stderr is not None
    for _ in range(50):
        line = proc.stderr.readline()
        if not line:
            break
        if line.strip().startswith("http"):
            return line.strip()
    raise AssertionError("the process printed no authorization URL")


DOCUMENT_URL = "https://client.example/mcp/client.json"


def paste_browser(pasted: io.StringIO) -> object:
    """An opener for the paste flow: GETs the authorization URL without following its
    redirect (that page would not load) and 'pastes' the Location it names."""

    class NoFollow(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}), NoFollow())

    def open_url(url: str) -> bool:
        try:
            direct.open(url, timeout=10)  # http://127.0.0.1 only
        except urllib.error.HTTPError as redirect:
            pasted.write(redirect.headers["Location"] + "\n")
            pasted.seek(0)
        return True
    return open_url


async def test_a_client_id_metadata_document_replaces_registration(
        server: AuthServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The AS advertises CIMD: the client id is the document's URL (from the environment),
    nothing is registered, and the redirect URI is one the document lists."""
    server.documents[DOCUMENT_URL] = client_metadata_document(DOCUMENT_URL)
    monkeypatch.setenv("MCPKIT_OAUTH_CLIENT_METADATA_URL", DOCUMENT_URL)
    pasted = io.StringIO()
    redirect = LoopbackRedirect(paste=True, opener=paste_browser(pasted), input=pasted,
                                output=Printed())
    tokens = await OAuth(redirect=redirect).login(server.resource)
    assert tokens.access_token in server.access
    assert server.registrations == 0
    [asked] = server.authorize_requests
    assert asked["client_id"] == DOCUMENT_URL
    assert asked["redirect_uri"] in server.documents[DOCUMENT_URL]["redirect_uris"]


async def test_a_custom_callback_port_falls_back_to_registration(
        server: AuthServer) -> None:
    """--callback-port outside the range: the document does not list it, so DCR."""
    server.documents[DOCUMENT_URL] = client_metadata_document(DOCUMENT_URL)
    port = next(p for p in iter(free_port, None) if p not in CALLBACK_PORTS)
    pasted = io.StringIO()
    redirect = LoopbackRedirect(paste=True, port=port, opener=paste_browser(pasted),
                                input=pasted, output=Printed())
    await OAuth(redirect=redirect, client_metadata_url=DOCUMENT_URL).login(server.resource)
    assert server.registrations == 1
    [client_id] = server.clients
    assert server.redirect_uris[client_id] == [f"http://127.0.0.1:{port}/callback"]


class Printed:
    """An output stream that keeps what was printed."""

    def __init__(self) -> None:
        self.text = ""

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass
