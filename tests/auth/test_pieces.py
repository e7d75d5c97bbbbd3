"""The pure pieces of authorization: discovery URL orders, scope selection, issuer and
resource checks, metadata and token decoding, secrets masked in reprs."""

from __future__ import annotations

import time

import msgspec
import pytest

from mcpkit.auth import discovery
from mcpkit.auth.errors import AuthorizationError
from mcpkit.auth.metadata import (
    AuthorizationServerMetadata,
    ProtectedResourceMetadata,
    check_issuer,
    check_pkce,
    decode_document,
    resource_matches,
)
from mcpkit.auth.scopes import select_scopes, union
from mcpkit.auth.tokens import (
    ClientRegistration,
    MemoryTokenStore,
    TokenKey,
    TokenSet,
    parse_token_response,
)
from mcpkit.errors import PeerError

AS = {"issuer": "https://as.example/tenant1",
      "authorization_endpoint": "https://as.example/tenant1/authorize",
      "token_endpoint": "https://as.example/tenant1/token",
      "code_challenge_methods_supported": ["S256"]}


def test_protected_resource_urls_header_then_path_then_root() -> None:
    assert discovery.protected_resource_urls(
        "https://rs.example/a/mcp", "https://rs.example/custom.json") == [
        "https://rs.example/custom.json",
        "https://rs.example/.well-known/oauth-protected-resource/a/mcp",
        "https://rs.example/.well-known/oauth-protected-resource"]
    assert discovery.protected_resource_urls("https://rs.example/") == [
        "https://rs.example/.well-known/oauth-protected-resource"]


def test_authorization_server_urls_with_and_without_a_path() -> None:
    assert discovery.authorization_server_urls("https://as.example/tenant1") == [
        "https://as.example/.well-known/oauth-authorization-server/tenant1",
        "https://as.example/.well-known/openid-configuration/tenant1",
        "https://as.example/tenant1/.well-known/openid-configuration"]
    assert discovery.authorization_server_urls("https://as.example") == [
        "https://as.example/.well-known/oauth-authorization-server",
        "https://as.example/.well-known/openid-configuration"]


def test_legacy_fallbacks_use_the_server_origin() -> None:
    assert discovery.legacy_metadata_url("http://h:1/x/mcp") == (
        "http://h:1/.well-known/oauth-authorization-server")
    meta = discovery.legacy_metadata("http://h:1/x/mcp")
    assert (meta.issuer, meta.authorization_endpoint, meta.token_endpoint,
            meta.registration_endpoint) == ("http://h:1", "http://h:1/authorize",
                                            "http://h:1/token", "http://h:1/register")


def test_scope_selection_order() -> None:
    assert select_scopes(["a"], ["b", "c"], None) == ["a"]
    assert select_scopes([], ["b", "c"], None) == ["b", "c"]
    assert select_scopes([], None, None) == []
    assert select_scopes(["a"], None, ["a", "offline_access"]) == ["a", "offline_access"]
    assert select_scopes([], None, ["offline_access"]) == []  # nothing asked: no scope at all
    assert select_scopes(["a", "a", "offline_access"], None, ["offline_access"]) == [
        "a", "offline_access"]
    assert union(["a", "b"], ["b", "c"]) == ["a", "b", "c"]


def test_issuer_must_match_exactly() -> None:
    meta = msgspec.convert(AS, AuthorizationServerMetadata)
    check_issuer(meta, "https://as.example/tenant1")
    for other in ("https://as.example/tenant1/", "https://AS.example/tenant1",
                  "https://as.example"):
        with pytest.raises(AuthorizationError, match="not the expected"):
            check_issuer(meta, other)


def test_pkce_s256_is_required() -> None:
    check_pkce(msgspec.convert(AS, AuthorizationServerMetadata))
    for methods in (None, ["plain"]):
        meta = msgspec.convert({**AS, "code_challenge_methods_supported": methods},
                               AuthorizationServerMetadata)
        with pytest.raises(AuthorizationError, match="S256"):
            check_pkce(meta)


def test_resource_must_cover_the_server_url() -> None:
    assert resource_matches("https://rs.example/mcp", "https://rs.example/mcp")
    assert resource_matches("https://rs.example", "https://rs.example/mcp")
    assert resource_matches("https://RS.example/", "https://rs.example/mcp/")
    assert not resource_matches("https://rs.example/other", "https://rs.example/mcp")
    assert not resource_matches("https://rs.example/mc", "https://rs.example/mcp")
    assert not resource_matches("https://evil.example/mcp", "https://rs.example/mcp")
    assert not resource_matches("http://rs.example/mcp", "https://rs.example/mcp")


def test_documents_are_decoded_strictly_and_bounded() -> None:
    prm = decode_document(b'{"resource":"https://r/mcp","authorization_servers":["https://a"],'
                          b'"extra":1}', ProtectedResourceMetadata, "prm")
    assert prm.authorization_servers == ["https://a"]
    with pytest.raises(AuthorizationError, match="invalid"):
        decode_document(b'{"resource": 5}', ProtectedResourceMetadata, "prm")
    with pytest.raises(AuthorizationError, match="not a JSON object"):
        decode_document(b"<html>", ProtectedResourceMetadata, "prm")
    with pytest.raises(AuthorizationError, match="limit"):
        decode_document(b" " * 100, ProtectedResourceMetadata, "prm", max_bytes=10)
    many = msgspec.json.encode({**AS, "scopes_supported": ["s"] * 1000})
    with pytest.raises(AuthorizationError, match="invalid"):
        decode_document(many, AuthorizationServerMetadata, "as")
    assert issubclass(AuthorizationError, PeerError)


def test_token_response_parsing() -> None:
    now = 1000.0
    tokens = parse_token_response(
        b'{"access_token":"A","token_type":"bearer","expires_in":60,"refresh_token":"R"}',
        now=now)
    assert (tokens.access_token, tokens.token_type, tokens.refresh_token,
            tokens.expires_at) == ("A", "Bearer", "R", 1060.0)
    assert tokens.expiring(margin_s=30, now=1031.0)
    assert not tokens.expiring(margin_s=30, now=1029.0)
    kept = parse_token_response(b'{"access_token":"B","token_type":"Bearer"}',
                                previous_refresh="R")
    assert kept.refresh_token == "R" and not kept.expiring()
    for bad, match in ((b'{"access_token":"A","token_type":"mac"}', "not supported"),
                       (b'{"token_type":"Bearer"}', "invalid"),
                       (b'{"access_token":"","token_type":"Bearer"}', "empty")):
        with pytest.raises(AuthorizationError, match=match):
            parse_token_response(bad)


def test_secrets_are_masked_in_reprs() -> None:
    tokens = TokenSet("sekrit-access", refresh_token="sekrit-refresh", expires_at=time.time())
    for text in (repr(tokens), str(tokens), f"{tokens}", repr([tokens])):
        assert "sekrit" not in text
        assert "***" in text
    reg = ClientRegistration("cid", "sekrit-secret", "client_secret_basic", "dcr")
    assert "sekrit" not in repr(reg) and "cid" in repr(reg)


@pytest.mark.anyio
async def test_memory_store_keys_by_resource_issuer_and_client() -> None:
    store = MemoryTokenStore()
    one = TokenKey("https://r/mcp", "https://as1", "c1")
    other_issuer = TokenKey("https://r/mcp", "https://as2", "c1")
    await store.put(one, TokenSet("t1"))
    assert (await store.get(one)) == TokenSet("t1")
    assert await store.get(other_issuer) is None
    await store.delete(one)
    assert await store.get(one) is None
