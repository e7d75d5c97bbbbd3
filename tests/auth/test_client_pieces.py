"""The client's pure decisions in the OAuth flow: which identity to use at an authorization
server (configured, CIMD, DCR) and how the redirect back is checked (state, RFC 9207 iss)."""

from __future__ import annotations

import urllib.parse
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.auth.errors import AuthorizationError
from mcpkit.auth.metadata import AuthorizationServerMetadata
from mcpkit.auth.tokens import ClientRegistration
from mcpkit.client.oauth import DEFAULT_REDIRECT_URI
from mcpkit.client.oauth_grant import Request, authorization_request, code_from_redirect
from mcpkit.client.oauth_registration import Identity, configured, metadata_document

ISSUER = "https://as.example"
CIMD = "https://app.example/client.json"


def metadata(**extra: Any) -> AuthorizationServerMetadata:
    doc = {"issuer": ISSUER, "authorization_endpoint": f"{ISSUER}/authorize",
           "token_endpoint": f"{ISSUER}/token", "code_challenge_methods_supported": ["S256"],
           **extra}
    return msgspec.convert(doc, AuthorizationServerMetadata)


def identity(**changes: Any) -> Identity:
    base: dict[str, Any] = {
        "client_id": None, "client_secret": None, "client_issuer": None, "metadata_url": CIMD,
        "redirect_uris": (DEFAULT_REDIRECT_URI,), "custom_redirect": False, "client_name": "t"}
    return Identity(**{**base, **changes})


def test_configured_credentials_pick_the_auth_method_the_as_supports() -> None:
    for methods, want in ((["client_secret_post"], "client_secret_post"),
                          (["client_secret_basic", "client_secret_post"], "client_secret_basic"),
                          (None, "client_secret_basic"),  # RFC 8414's default
                          (["none"], "none")):
        reg = configured(identity(client_id="c", client_secret="s"),
                         metadata(token_endpoint_auth_methods_supported=methods))
        assert reg is not None and reg.auth_method == want and reg.source == "configured"
    public = configured(identity(client_id="c"), metadata())
    assert public is not None and public.auth_method == "none"
    with pytest.raises(AuthorizationError, match="none of the token endpoint auth methods"):
        configured(identity(client_id="c", client_secret="s"),
                   metadata(token_endpoint_auth_methods_supported=["private_key_jwt"]))


def test_configured_credentials_stay_with_their_issuer() -> None:
    assert configured(identity(client_id="c", client_issuer="https://other.example"),
                      metadata()) is None
    assert configured(identity(client_id="c", client_issuer=ISSUER), metadata()) is not None
    assert configured(identity(), metadata()) is None


def test_cimd_only_when_supported_public_and_default_redirect() -> None:
    ok = metadata(client_id_metadata_document_supported=True,
                  token_endpoint_auth_methods_supported=["none"])
    assert metadata_document(identity(), ok) == ClientRegistration(CIMD, None, "none", "cimd")
    assert metadata_document(identity(custom_redirect=True), ok) is None
    assert metadata_document(identity(metadata_url=None), ok) is None
    assert metadata_document(identity(), metadata(
        client_id_metadata_document_supported=True,
        token_endpoint_auth_methods_supported=["client_secret_basic"])) is None
    assert metadata_document(identity(), metadata(
        token_endpoint_auth_methods_supported=["none"])) is None


def _request(meta: AuthorizationServerMetadata) -> Request:
    client = ClientRegistration("cid")
    return authorization_request(meta, client, DEFAULT_REDIRECT_URI, "https://rs/mcp", ["a"])


def test_the_authorization_url_carries_pkce_state_resource_and_scope() -> None:
    meta = metadata()
    request = _request(meta)
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(request.url).query))
    assert query["code_challenge_method"] == "S256" and query["code_challenge"]
    assert request.verifier not in request.url  # only the challenge goes out
    assert (query["state"], query["resource"], query["scope"], query["client_id"]) == (
        request.state, "https://rs/mcp", "a", "cid")
    assert "***" in repr(request) and request.state not in repr(request)
    assert "prompt" not in query


def test_offline_access_asks_for_consent() -> None:
    """OpenID Connect Core §11: a provider keeps offline_access (issues a refresh token) only
    with prompt=consent; the oidc-provider end-to-end tests need it for every refresh."""
    request = authorization_request(metadata(), ClientRegistration("cid"), DEFAULT_REDIRECT_URI,
                                    "https://rs/mcp", ["a", "offline_access"])
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(request.url).query))
    assert (query["scope"], query["prompt"]) == ("a offline_access", "consent")


def redirect(**params: str) -> str:
    return f"{DEFAULT_REDIRECT_URI}?{urllib.parse.urlencode(params)}"


def test_the_redirect_is_checked() -> None:
    meta = metadata(authorization_response_iss_parameter_supported=True)
    request = _request(meta)
    good = {"code": "C", "state": request.state, "iss": ISSUER}
    assert code_from_redirect(redirect(**good), request, meta) == "C"
    for bad, match in (({**good, "state": "forged"}, "state"),
                       ({"code": "C", "state": request.state}, "no iss"),
                       ({**good, "iss": ISSUER + "/"}, "not the issuer"),
                       ({**good, "iss": "https://evil.example"}, "not the issuer"),
                       ({"state": request.state, "iss": ISSUER, "error": "access_denied"},
                        "access_denied"),
                       ({"state": request.state, "iss": ISSUER}, "no code")):
        with pytest.raises(AuthorizationError, match=match) as caught:
            code_from_redirect(redirect(**bad), request, meta)
        assert request.state not in str(caught.value)
    with pytest.raises(AuthorizationError, match="repeats"):
        code_from_redirect(redirect(**good) + "&code=D", request, meta)


def test_iss_not_advertised_is_optional_but_compared_when_present() -> None:
    meta = metadata()
    request = _request(meta)
    assert code_from_redirect(redirect(code="C", state=request.state), request, meta) == "C"
    with pytest.raises(AuthorizationError, match="not the issuer"):
        code_from_redirect(redirect(code="C", state=request.state, iss="https://evil"),
                           request, meta)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_a_hostile_redirect_never_yields_a_code(tail: str) -> None:
    meta = metadata()
    request = _request(meta)
    try:
        code_from_redirect(DEFAULT_REDIRECT_URI + "?" + tail, request, meta)
    except AuthorizationError:
        return
    raise AssertionError("a redirect without the request's state was accepted")


@pytest.mark.anyio
async def test_oauth_urls_must_be_https_or_loopback() -> None:
    from mcpkit.client.oauth_http import OAuthHttp

    http = OAuthHttp(timeout_s=1.0)
    for url in ("http://as.example/token", "ftp://as.example/x", "file:///etc/passwd",
                "http://10.0.0.1/.well-known/oauth-authorization-server"):
        with pytest.raises(AuthorizationError, match="only HTTPS"):
            await http.get(url)
