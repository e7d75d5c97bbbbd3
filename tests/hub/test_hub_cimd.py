"""Client ID Metadata Documents at the hub, over real HTTPS on 127.0.0.1: the documents are
served with a certificate from a throwaway CA (trustme) that the hub is told to trust
(`oauth_client_document_ca_file`), from loopback (`oauth_client_document_allow_private`).
mcpkit's OAuth client logs in with its document URL as client id (no DCR) and lists tools;
the hub fetches the document once for the whole login; the consent page names the client's
URL and the redirect host. Hostile documents - too large, another client_id, a non-https
redirect URI, too slow, not JSON, a redirect, a client_secret - are refused, each with the
reason, and so are document URLs on private addresses when the operator did not allow them."""

from __future__ import annotations

import json
import secrets
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import trustme
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.hub.hub_helpers import call, open_store
from tests.hub.oauth_login import HubLogin
from tests.hub.test_hub_oauth import (
    REDIRECT,
    OAuthHub,
    claims_of,
    s256,
    serving_oauth_hub,
    tool_names,
    user_with_password,
)

from mcpkit import Client
from mcpkit.auth.tokens import MemoryRegistrationStore
from mcpkit.client import Timeouts
from mcpkit.client.oauth import OAuth
from mcpkit.client.oauth_client_metadata import client_metadata_document
from mcpkit.hub.oauth.client_documents import (
    ClientDocumentRefused,
    ClientDocuments,
    client_from_document,
    document_key,
)
from mcpkit.hub.settings import HubSettings

pytestmark = pytest.mark.anyio

FETCH_TIMEOUT_S = 0.5
"""The test hub's document fetch timeout (the slow document takes longer)."""
SLOW_S = 3.0


@dataclass
class Served:
    status: int = 200
    body: bytes = b""
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class DocumentServer:
    """An HTTPS server on 127.0.0.1 serving `documents` by path, counting fetches."""

    url: str
    documents: dict[str, Served]
    fetches: dict[str, int]

    def publish(self, path: str, document: Any = None, **served: Any) -> str:
        url = self.url + path
        body = served.pop("body", None)
        if body is None:
            body = json.dumps(document if document is not None
                              else client_metadata_document(url)).encode()
        self.documents[path] = Served(body=body, **served)
        return url


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> tuple[trustme.CA, Path]:
    authority = trustme.CA()
    pem = tmp_path_factory.mktemp("ca") / "ca.pem"
    authority.cert_pem.write_to_path(str(pem))
    return authority, pem


@pytest.fixture(scope="module")
def documents(ca: tuple[trustme.CA, Path]) -> Iterator[DocumentServer]:
    served: dict[str, Served] = {}
    fetches: dict[str, int] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            fetches[self.path] = fetches.get(self.path, 0) + 1
            answer = served.get(self.path, Served(status=404))
            time.sleep(answer.delay_s)
            self.send_response(answer.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer.body)))
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.end_headers()
            try:
                self.wfile.write(answer.body)
            except OSError:  # the hub gave up (the slow document)
                pass

        def log_message(self, *_args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca[0].issue_cert("127.0.0.1").configure_cert(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="cimd-docs")
    thread.start()
    try:
        yield DocumentServer(f"https://127.0.0.1:{server.server_address[1]}", served, fetches)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def cimd_hub(tmp_path_factory: pytest.TempPathFactory, ca: tuple[trustme.CA, Path]
             ) -> Iterator[OAuthHub]:
    database_url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('hub') / 'hub.db'}"
    with serving_oauth_hub(database_url, "cimdup", oauth_client_document_allow_private=True,
                           oauth_client_document_ca_file=str(ca[1]),
                           oauth_client_document_timeout_s=FETCH_TIMEOUT_S) as served:
        yield served


async def test_metadata_says_documents_are_supported(cimd_hub: OAuthHub) -> None:
    metadata = (await call("GET", cimd_hub.url + "/.well-known/oauth-authorization-server")).body
    assert metadata["client_id_metadata_document_supported"] is True


async def test_mcpkits_client_logs_in_with_its_document(cimd_hub: OAuthHub,
                                                        documents: DocumentServer) -> None:
    client_id = documents.publish(f"/clients/{secrets.token_hex(4)}.json")
    path = urllib.parse.urlsplit(client_id).path
    _, name, password = await user_with_password(cimd_hub)
    registrations = MemoryRegistrationStore()
    login = HubLogin(name, password)
    auth = OAuth(redirect=login, registrations=registrations, client_metadata_url=client_id)
    async with Client(cimd_hub.url + "/mcp", auth=auth, timeouts=Timeouts(timeout=30.0)) as client:
        names = await tool_names(client)
    assert any(tool.endswith("echo") for tool in names), names
    assert login.pages == ["login", "consent"]
    assert not registrations._entries  # no DCR: the document was the registration
    assert documents.fetches[path] == 1  # authorize and token: one fetch, then the cache
    stored = await stored_client(cimd_hub, client_id)  # stored once the user consented
    assert stored is not None and stored.client_name == "mcpkit"


async def test_the_consent_page_names_the_document_and_the_redirect_host(
        cimd_hub: OAuthHub, documents: DocumentServer) -> None:
    path = f"/clients/{secrets.token_hex(4)}.json"
    client_id = documents.publish(path, {**client_metadata_document(documents.url + path),
                                         "client_name": "Docs App", "redirect_uris": [REDIRECT]})
    _, name, password = await user_with_password(cimd_hub)
    verifier = secrets.token_urlsafe(48)
    seen: list[str] = []
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        url = authorization_url(cimd_hub.url, client_id, verifier)
        async with http.get(url) as page:
            seen.append(await page.text())
            form = sign_in_fields(seen[-1], name, password)
        async with http.post(url, data=form, allow_redirects=False) as page:
            seen.append(await page.text())
    consent = seen[-1]
    assert "Docs App" in consent and client_id in consent and "127.0.0.1" in consent
    assert await stored_client(cimd_hub, client_id) is None  # no consent yet: no row


async def stored_client(oauth_hub: OAuthHub, client_id: str) -> Any:
    store = await open_store(oauth_hub.hub)
    try:
        return await store.oauth.get_client(document_key(client_id))
    finally:
        await store.close()


def sign_in_fields(page: str, name: str, password: str) -> dict[str, str]:
    from tests.form_walk import FirstForm

    form = FirstForm()
    form.feed(page)
    return {**form.fields, "username": name, "password": password, "action": "sign-in"}


def authorization_url(hub_url: str, client_id: str, verifier: str) -> str:
    params = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT,
              "state": "st", "scope": "mcp", "code_challenge": s256(verifier),
              "code_challenge_method": "S256"}
    return hub_url + "/oauth/authorize?" + urllib.parse.urlencode(params)


async def authorize_with(hub_url: str, client_id: str) -> tuple[int, str]:
    reply = await call("GET", authorization_url(hub_url, client_id, "v" * 43))
    return reply.status, reply.text


async def test_hostile_documents_are_refused_with_the_reason(
        cimd_hub: OAuthHub, documents: DocumentServer) -> None:
    def url(name: str) -> str:
        return f"{documents.url}/hostile/{name}-{secrets.token_hex(3)}.json"

    def good(at: str, **changes: Any) -> dict[str, Any]:
        return {**client_metadata_document(at), "redirect_uris": [REDIRECT], **changes}

    cases: dict[str, str] = {}
    at = url("large")
    cases[documents.publish(urllib.parse.urlsplit(at).path, good(at, padding="x" * 6000))] = \
        "is over 5120 bytes"
    at = url("other-id")
    cases[documents.publish(urllib.parse.urlsplit(at).path,
                            good(at, client_id=documents.url + "/someone-else.json"))] = \
        "another client_id than its own URL"
    at = url("http-redirect")
    cases[documents.publish(urllib.parse.urlsplit(at).path,
                            good(at, redirect_uris=["http://evil.example/callback"]))] = \
        "must be https, or http on a loopback address"
    at = url("slow")
    cases[documents.publish(urllib.parse.urlsplit(at).path, good(at), delay_s=SLOW_S)] = \
        f"did not arrive within {FETCH_TIMEOUT_S:g} s"
    at = url("not-json")
    cases[documents.publish(urllib.parse.urlsplit(at).path, body=b"<html>hi</html>")] = \
        "is not JSON"
    at = url("moved")
    cases[documents.publish(urllib.parse.urlsplit(at).path, body=b"", status=302,
                            headers={"Location": documents.url + "/elsewhere"})] = \
        "answered HTTP 302, not 200"
    at = url("secret")
    cases[documents.publish(urllib.parse.urlsplit(at).path, good(at, client_secret="s"))] = \
        "holds a client_secret"
    at = url("confidential")
    cases[documents.publish(urllib.parse.urlsplit(at).path,
                            good(at, token_endpoint_auth_method="client_secret_basic"))] = \
        "token_endpoint_auth_method must be none"
    cases[url("missing")] = "answered HTTP 404, not 200"
    cases["https://127.0.0.1/"] = "must have a path"

    started = time.monotonic()
    for client_id, reason in cases.items():
        status, page = await authorize_with(cimd_hub.url, client_id)
        assert status == 400 and "invalid_client" in page, (client_id, page)
        assert reason in page, (reason, page)
    assert time.monotonic() - started < 20  # the slow one was cut at the fetch timeout


async def test_private_addresses_are_refused_unless_allowed(tmp_path: Path) -> None:
    settings = HubSettings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}")
    documents = ClientDocuments(None, settings)  # type: ignore[arg-type]  # refused first
    for url, reason in (("https://127.0.0.1:1/client.json", "a loopback address"),
                        ("https://10.0.0.1/client.json", "a private address"),
                        ("https://169.254.169.254/client.json", "a cloud metadata address"),
                        ("https://localhost/client.json", "a loopback name"),
                        ("http://example.com/client.json", "it must use https")):
        with pytest.raises(ClientDocumentRefused, match=reason):
            await documents.client(url)


async def test_a_document_clients_token_names_its_url(cimd_hub: OAuthHub,
                                                      documents: DocumentServer) -> None:
    client_id = documents.publish(f"/clients/{secrets.token_hex(4)}.json")
    _, name, password = await user_with_password(cimd_hub)
    from mcpkit.auth.tokens import MemoryTokenStore

    store = MemoryTokenStore()
    auth = OAuth(redirect=HubLogin(name, password), store=store,
                 registrations=MemoryRegistrationStore(), client_metadata_url=client_id)
    async with Client(cimd_hub.url + "/mcp", auth=auth, timeouts=Timeouts(timeout=30.0)) as client:
        await client.list_tools()
    (held,) = list(store._entries.values())
    assert claims_of(held.access_token)["client_id"] == client_id


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                max_size=4),
    max_leaves=20)
DOCUMENT_URL = "https://client.example/app.json"


FIELDS = st.sampled_from([
    "client_id", "client_name", "redirect_uris", "token_endpoint_auth_method", "grant_types",
    "response_types", "application_type", "client_secret", "jwks_uri"])


@given(st.dictionaries(FIELDS, JSON_VALUES, max_size=3).map(  # a good document, changed
    lambda changes: {**client_metadata_document(DOCUMENT_URL), **changes})
    | st.dictionaries(FIELDS, JSON_VALUES, max_size=8) | JSON_VALUES)
@settings(max_examples=300, deadline=None)
def test_any_document_is_a_client_or_a_precise_refusal(document: Any) -> None:
    """Whatever a document holds, the checks answer a client named by the URL or a
    ClientDocumentRefused - never another error (which the hub would answer with a 500)."""
    try:
        record = client_from_document(json.dumps(document).encode(), DOCUMENT_URL)
    except ClientDocumentRefused as refused:
        assert DOCUMENT_URL in str(refused)
        return
    assert isinstance(document, dict) and document["client_id"] == DOCUMENT_URL
    assert "client_secret" not in document and document["client_name"]
    assert record.client_id == document_key(DOCUMENT_URL) and record.redirect_uris
    assert record.token_endpoint_auth_method == "none"
