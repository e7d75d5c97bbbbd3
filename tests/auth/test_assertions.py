"""The machine grants' forms, checked field by field against what the MCP conformance
harness's mock authorization servers and IdP require (FIXTURE.md §4; the mock's checks are
quoted beside each test), and the ID-JAG token-exchange answer."""

from __future__ import annotations

import json

import jwt as pyjwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from mcpkit.auth.assertions import (
    ID_JAG_TOKEN_TYPE,
    InvalidTokenExchangeResponse,
    client_credentials_form,
    id_jag_exchange_form,
    jwt_bearer_form,
    parse_id_jag_response,
)
from mcpkit.auth.client_auth import ClientAuthMethod, ClientCredentials, client_authentication
from mcpkit.auth.forms import merge_fields
from mcpkit.errors import InvalidArgument, PeerError

AS_ISSUER = "http://localhost:41001"
MCP_RESOURCE = "http://localhost:41002/mcp"


@pytest.fixture(scope="module")
def idp_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def signed(key: ec.EllipticCurvePrivateKey, claims: dict[str, object],
           typ: str | None = None) -> str:
    headers = {"typ": typ} if typ else None
    return pyjwt.encode(claims, key, algorithm="ES256", headers=headers)


def test_client_credentials_with_basic_is_what_the_mock_accepts() -> None:
    # Mock: grant_type === "client_credentials"; Authorization "Basic " + base64(id:secret).
    form = merge_fields(client_credentials_form(scope=["mcp:basic"], resource=MCP_RESOURCE))
    _, headers = client_authentication(
        ClientAuthMethod.CLIENT_SECRET_BASIC,
        ClientCredentials("conformance-test-client", "conformance-test-secret"),
        audience=AS_ISSUER)
    assert dict(form) == {"grant_type": "client_credentials", "scope": "mcp:basic",
                          "resource": MCP_RESOURCE}
    assert headers["Authorization"].startswith("Basic ")


def test_client_credentials_without_scope_or_resource_sends_only_the_grant() -> None:
    assert dict(client_credentials_form()) == {"grant_type": "client_credentials"}


def test_wif_jwt_bearer_form_carries_the_workload_jwt_as_the_assertion(
        idp_key: ec.EllipticCurvePrivateKey) -> None:
    # Mock: grant_type === urn:ietf:params:oauth:grant-type:jwt-bearer; `assertion` verifies
    # with aud = the AS base URL; token auth method `none`.
    workload_jwt = signed(idp_key, {"iss": "https://idp.conformance-test.local",
                                    "sub": "conformance-workload", "aud": AS_ISSUER})
    grant = jwt_bearer_form(workload_jwt, scope=["mcp:read", "mcp:read"],
                            resource=MCP_RESOURCE)
    auth, _ = client_authentication(ClientAuthMethod.NONE,
                                    ClientCredentials("conformance-wif-workload"),
                                    audience=AS_ISSUER)
    form = merge_fields(grant, auth)
    assert dict(form) == {
        "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
        "assertion": workload_jwt,
        "scope": "mcp:read",  # repeats dropped
        "resource": MCP_RESOURCE,
        "client_id": "conformance-wif-workload",
    }


def test_the_id_jag_exchange_has_every_field_the_mock_idp_requires(
        idp_key: ec.EllipticCurvePrivateKey) -> None:
    # Mock IdP: grant_type token-exchange; subject_token; subject_token_type id_token;
    # requested_token_type id-jag; audience; resource. It then mints the ID-JAG with
    # aud = `audience` (checked against the AS URL) and resource = `resource` (checked
    # against the MCP server URL).
    id_token = signed(idp_key, {"sub": "demo-user@example.com",
                                "aud": "conformance-test-idp-client"})
    form = id_jag_exchange_form(id_token, audience=AS_ISSUER, resource=MCP_RESOURCE,
                                scope=["mcp:basic"], client_id="conformance-test-idp-client")
    assert dict(form) == {
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
        "audience": AS_ISSUER,
        "resource": MCP_RESOURCE,
        "subject_token": id_token,
        "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
        "scope": "mcp:basic",
        "client_id": "conformance-test-idp-client",
    }


def test_the_id_jag_then_rides_the_jwt_bearer_grant_with_basic_auth(
        idp_key: ec.EllipticCurvePrivateKey) -> None:
    # Mock AS: Authorization Basic (client_secret_basic), `assertion` with typ
    # oauth-id-jag+jwt.
    id_jag = signed(idp_key, {"sub": "u", "aud": AS_ISSUER, "resource": MCP_RESOURCE},
                    typ="oauth-id-jag+jwt")
    answer = json.dumps({"access_token": id_jag, "issued_token_type": ID_JAG_TOKEN_TYPE,
                         "token_type": "N_A", "expires_in": 300}).encode()
    parsed = parse_id_jag_response(answer)
    assert parsed.assertion == id_jag and parsed.expires_in == 300
    form = jwt_bearer_form(parsed.assertion, resource=MCP_RESOURCE)
    assert form["assertion"] == id_jag
    assert form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"
    assert id_jag not in repr(parsed) and id_jag not in repr(form)


@pytest.mark.parametrize(("answer", "message"), [
    ({"access_token": "a.b.c", "issued_token_type":
      "urn:ietf:params:oauth:token-type:access_token", "token_type": "N_A"}, "not an ID-JAG"),
    ({"access_token": "a.b.c", "token_type": "N_A"}, "not an ID-JAG"),
    ({"access_token": "a.b.c", "issued_token_type": ID_JAG_TOKEN_TYPE,
      "token_type": "Bearer"}, "N_A"),
    ({"issued_token_type": ID_JAG_TOKEN_TYPE, "token_type": "N_A"}, "no access_token"),
    ({"access_token": "not-a-jwt", "issued_token_type": ID_JAG_TOKEN_TYPE,
      "token_type": "N_A"}, "compact signed JWT"),
    ({"access_token": "a.b.c", "issued_token_type": ID_JAG_TOKEN_TYPE, "token_type": "N_A",
      "expires_in": "300"}, "expires_in"),
    ([1, 2], "JSON object"),
])
def test_a_wrong_exchange_answer_is_a_peer_error(answer: object, message: str) -> None:
    with pytest.raises(InvalidTokenExchangeResponse, match=message) as caught:
        parse_id_jag_response(json.dumps(answer).encode())
    assert isinstance(caught.value, PeerError)


def test_the_exchange_answer_size_is_bounded_and_settable() -> None:
    answer = json.dumps({"access_token": "a.b.c", "issued_token_type": ID_JAG_TOKEN_TYPE,
                         "token_type": "N_A", "pad": "x" * 70000}).encode()
    with pytest.raises(InvalidTokenExchangeResponse, match="over the limit"):
        parse_id_jag_response(answer)
    assert parse_id_jag_response(answer, max_bytes=80000).assertion == "a.b.c"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"scope": "mcp:basic"}, "sequence"),
    ({"scope": ["has space"]}, "scope token"),
    ({"scope": ['quo"te']}, "scope token"),
    ({"resource": "/relative"}, "absolute URI"),
    ({"resource": "https://rs.example/mcp#frag"}, "fragment"),
    ({"resource": "https://rs.example/\ud800"}, "visible ASCII"),
    ({"resource": "https://rs.example/a b"}, "visible ASCII"),
])
def test_bad_scope_or_resource_is_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        client_credentials_form(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("assertion", ["", "only.two", "a.b.c.d.e", "a.b.c\n", "x" * 16385])
def test_an_assertion_that_is_no_compact_jwt_is_refused_without_quoting_it(
        assertion: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        jwt_bearer_form(assertion)
    if assertion:
        assert assertion.strip() not in str(caught.value)
    with pytest.raises(InvalidArgument):
        id_jag_exchange_form(assertion, audience=AS_ISSUER, resource=MCP_RESOURCE)


@pytest.mark.parametrize(("audience", "client_id"), [
    ("", None), ("http://as.example/\ud800", None), (AS_ISSUER, ""), (AS_ISSUER, "a\ud800"),
    (AS_ISSUER, "new\nline"),
])
def test_an_exchange_without_a_usable_audience_or_client_id_is_refused(
        audience: str, client_id: str | None) -> None:
    with pytest.raises(InvalidArgument):
        id_jag_exchange_form("a.b.c", audience=audience, resource=MCP_RESOURCE,
                             client_id=client_id)
