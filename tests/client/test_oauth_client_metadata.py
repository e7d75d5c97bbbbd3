"""mcpkit's Client ID Metadata Document: what it holds, which URLs can be a client id, and
`python -m mcpkit.client.oauth_client_metadata URL` writing it (a real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpkit.client.oauth import OAuth
from mcpkit.client.oauth_client_metadata import (
    check_client_metadata_url,
    client_metadata_document,
)
from mcpkit.client.oauth_loopback import CALLBACK_PORTS, LoopbackRedirect
from mcpkit.errors import InvalidArgument

URL = "https://example.com/mcp/client.json"


def test_the_document_lists_the_loopback_range_exactly() -> None:
    document = client_metadata_document(URL)
    assert document == {
        "client_id": URL,
        "client_name": "mcpkit",
        "redirect_uris": [f"http://127.0.0.1:{port}/callback" for port in CALLBACK_PORTS],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "native",
    }
    assert document["redirect_uris"] == LoopbackRedirect().redirect_uris  # what is used


@pytest.mark.parametrize(("url", "problem"), [
    ("http://example.com/client.json", "https"),
    ("https://example.com", "path"),
    ("https://example.com/", "path"),
    ("https://example.com/c.json#x", "fragment"),
    ("https://user:pw@example.com/c.json", "password"),
    ("https://example.com/a/../c.json", "dot segments"),
    ("https:///c.json", "host"),
])
def test_urls_that_cannot_be_a_client_id_are_refused(url: str, problem: str) -> None:
    with pytest.raises(InvalidArgument, match=problem):
        check_client_metadata_url(url)
    with pytest.raises(InvalidArgument, match=problem):
        OAuth(client_metadata_url=url)


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=30)
       .filter(lambda s: s not in (".", "..")))
def test_any_https_url_with_a_path_is_its_own_client_id(name: str) -> None:
    url = f"https://example.com/{name}"
    assert client_metadata_document(url)["client_id"] == url


def test_the_environment_names_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPKIT_OAUTH_CLIENT_METADATA_URL", URL)
    assert OAuth().client_metadata_url == URL
    assert OAuth(client_metadata_url="https://other.example/c").client_metadata_url == (
        "https://other.example/c")
    monkeypatch.delenv("MCPKIT_OAUTH_CLIENT_METADATA_URL")
    assert OAuth().client_metadata_url is None  # no default domain


def test_the_module_writes_the_document() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcpkit.client.oauth_client_metadata", URL,
         "--client-name", "My tools"], capture_output=True, text=True, timeout=30, check=True)
    document = json.loads(done.stdout)
    assert document == client_metadata_document(URL, client_name="My tools")
    refused = subprocess.run(
        [sys.executable, "-m", "mcpkit.client.oauth_client_metadata", "http://x/c"],
        capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2 and "https" in refused.stderr
