"""Token-endpoint client authentication: the four methods' fields and headers, the choice
among the methods a server advertises, private_key_jwt assertions verified with PyJWT, and
secrets kept out of reprs and error messages."""

from __future__ import annotations

import base64
import time
from urllib.parse import unquote_plus

import jwt as pyjwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.auth.client_auth import (
    CLIENT_ASSERTION_TYPE,
    ClientAuthMethod,
    ClientCredentials,
    NoUsableClientAuthMethod,
    SigningKey,
    basic_authorization,
    choose_auth_method,
    client_authentication,
)
from mcpkit.auth.forms import merge_fields
from mcpkit.errors import InvalidArgument, UsageError

SECRET = "s3cr3t-value-never-shown"
ISSUER = "http://127.0.0.1:41000"


def pem(private_key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return private_key.private_bytes(serialization.Encoding.PEM,
                                     serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption())


@pytest.fixture(scope="module")
def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def decoded_basic(header: str) -> tuple[str, str]:
    """What a server does with a Basic header (RFC 6749 §2.3.1): Base64, split at the first
    colon, form-urldecode each half."""
    scheme, _, encoded = header.partition(" ")
    assert scheme == "Basic"
    client_id, _, secret = base64.b64decode(encoded).decode("ascii").partition(":")
    return unquote_plus(client_id), unquote_plus(secret)


def test_basic_encodes_rfc_6749_appendix_b_special_characters() -> None:
    # Appendix B: " %&+£€" form-urlencodes to "+%25%26%2B%C2%A3%E2%82%AC".
    header = basic_authorization("s6BhdRkqt3", " %&+£€")
    assert base64.b64decode(header.removeprefix("Basic ")) == (
        b"s6BhdRkqt3:+%25%26%2B%C2%A3%E2%82%AC")


@pytest.mark.parametrize(("client_id", "secret"), [
    ("conformance-test-client", "conformance-test-secret"),
    ("id:with:colons", "secret:with:colons"),
    ("https://app.example/client.json", "p@ss w/rd=+&?#%"),
    ("ünïcode", "秘密"),
])
def test_basic_round_trips_through_what_a_server_decodes(client_id: str, secret: str) -> None:
    form, headers = client_authentication(ClientAuthMethod.CLIENT_SECRET_BASIC,
                                          ClientCredentials(client_id, secret),
                                          audience=ISSUER)
    assert dict(form) == {}
    assert decoded_basic(headers["Authorization"]) == (client_id, secret)


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
def test_any_id_and_secret_round_trip_or_are_refused_as_invalid(client_id: str,
                                                                secret: str) -> None:
    try:
        credentials = ClientCredentials(client_id, secret)
    except InvalidArgument as refused:  # only for a reason the message names, not the text
        assert "control characters" in str(refused) or "surrogate" in str(refused)
        return
    _, headers = client_authentication(ClientAuthMethod.CLIENT_SECRET_BASIC, credentials,
                                       audience=ISSUER)
    assert decoded_basic(headers["Authorization"]) == (client_id, secret)


@pytest.mark.parametrize(("client_id", "secret"), [("a\ud800", "b"), ("a", "b\udfff")])
def test_text_utf8_cannot_carry_is_refused(client_id: str, secret: str) -> None:
    with pytest.raises(InvalidArgument, match="surrogate"):
        ClientCredentials(client_id, secret)
    with pytest.raises(InvalidArgument, match="surrogate"):
        basic_authorization(client_id, secret)


def test_post_puts_id_and_secret_in_the_form() -> None:
    form, headers = client_authentication(ClientAuthMethod.CLIENT_SECRET_POST,
                                          ClientCredentials("cid", SECRET), audience=ISSUER)
    assert dict(form) == {"client_id": "cid", "client_secret": SECRET}
    assert dict(headers) == {}


def test_none_sends_only_the_client_id() -> None:
    form, headers = client_authentication(ClientAuthMethod.NONE, ClientCredentials("cid"),
                                          audience=ISSUER)
    assert dict(form) == {"client_id": "cid"}
    assert dict(headers) == {}


@pytest.mark.parametrize("algorithm", ["ES256", "RS256"])
def test_private_key_jwt_is_a_signed_assertion_with_rfc_7523_claims(
        algorithm: str, ec_key: ec.EllipticCurvePrivateKey, rsa_key: rsa.RSAPrivateKey) -> None:
    private = ec_key if algorithm == "ES256" else rsa_key
    credentials = ClientCredentials(
        "conformance-test-client",
        signing_key=SigningKey(pem(private), algorithm, key_id="k1"))  # type: ignore[arg-type]
    before = int(time.time())
    form, headers = client_authentication(ClientAuthMethod.PRIVATE_KEY_JWT, credentials,
                                          audience=ISSUER)
    assert dict(headers) == {}
    assert form["client_assertion_type"] == CLIENT_ASSERTION_TYPE
    assertion = form["client_assertion"]
    header = pyjwt.get_unverified_header(assertion)
    assert header["alg"] == algorithm and header["kid"] == "k1"
    # What the conformance mock checks: signature, aud = issuer, iss = sub = client id.
    claims = pyjwt.decode(assertion, private.public_key(), algorithms=[algorithm],
                          audience=ISSUER)
    assert claims["iss"] == claims["sub"] == "conformance-test-client"
    assert before <= claims["iat"] <= int(time.time())
    assert claims["exp"] - claims["iat"] == 60
    assert isinstance(claims["jti"], str) and len(claims["jti"]) >= 22
    again = client_authentication(ClientAuthMethod.PRIVATE_KEY_JWT, credentials,
                                  audience=ISSUER)[0]["client_assertion"]
    assert pyjwt.decode(again, options={"verify_signature": False})["jti"] != claims["jti"]


def test_the_assertion_audience_and_lifetime_are_the_callers(
        ec_key: ec.EllipticCurvePrivateKey) -> None:
    credentials = ClientCredentials("cid", signing_key=SigningKey(pem(ec_key)))
    token_endpoint = ISSUER + "/token"
    form, _ = client_authentication(ClientAuthMethod.PRIVATE_KEY_JWT, credentials,
                                    audience=token_endpoint, now=1_000, assertion_lifetime_s=30)
    claims = pyjwt.decode(form["client_assertion"], ec_key.public_key(), algorithms=["ES256"],
                          audience=token_endpoint, options={"verify_exp": False,
                                                            "verify_iat": False})
    assert (claims["iat"], claims["exp"]) == (1_000, 1_030)


@pytest.mark.parametrize(("advertised", "credentials_kind", "expected"), [
    (None, "secret", "client_secret_basic"),        # RFC 8414: absent means basic
    (["client_secret_post"], "secret", "client_secret_post"),
    (["client_secret_post", "client_secret_basic"], "secret", "client_secret_basic"),
    (["none", "client_secret_basic"], "public", "none"),
    (["private_key_jwt", "client_secret_basic"], "key", "private_key_jwt"),
])
def test_the_method_is_the_clients_preferred_one_the_server_accepts(
        advertised: list[str] | None, credentials_kind: str, expected: str,
        ec_key: ec.EllipticCurvePrivateKey) -> None:
    credentials = {"secret": ClientCredentials("cid", SECRET),
                   "public": ClientCredentials("cid"),
                   "key": ClientCredentials("cid", signing_key=SigningKey(pem(ec_key)))}
    assert choose_auth_method(credentials[credentials_kind], advertised) == expected


@pytest.mark.parametrize(("advertised", "credentials"), [
    (None, ClientCredentials("cid")),                           # basic, and no secret
    (["private_key_jwt"], ClientCredentials("cid", SECRET)),
    (["client_secret_basic"], ClientCredentials("cid")),
    ([], ClientCredentials("cid", SECRET)),
])
def test_no_fitting_method_says_what_to_configure_without_the_secret(
        advertised: list[str] | None, credentials: ClientCredentials) -> None:
    with pytest.raises(NoUsableClientAuthMethod) as caught:
        choose_auth_method(credentials, advertised)
    assert isinstance(caught.value, UsageError)
    assert "configured" in str(caught.value)
    assert SECRET not in str(caught.value)


def test_the_key_algorithm_must_be_one_the_server_lists(
        ec_key: ec.EllipticCurvePrivateKey) -> None:
    credentials = ClientCredentials("cid", signing_key=SigningKey(pem(ec_key), "ES256"))
    assert choose_auth_method(credentials, ["private_key_jwt"],
                              signing_algs_advertised=["ES256"]) == "private_key_jwt"
    with pytest.raises(NoUsableClientAuthMethod):
        choose_auth_method(credentials, ["private_key_jwt"], signing_algs_advertised=["RS256"])


def test_keys_that_do_not_fit_their_algorithm_are_refused(
        ec_key: ec.EllipticCurvePrivateKey, rsa_key: rsa.RSAPrivateKey) -> None:
    small_rsa = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    p384 = ec.generate_private_key(ec.SECP384R1())
    public_pem = ec_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo)
    for bad_pem, algorithm in [(pem(ec_key), "RS256"), (pem(rsa_key), "ES256"),
                               (pem(small_rsa), "RS256"), (pem(p384), "ES256"),
                               (public_pem, "ES256"), (pem(ec_key), "HS256"),
                               (b"-----BEGIN PRIVATE KEY-----\nbm9wZQ==\n-----END", "ES256")]:
        with pytest.raises(InvalidArgument) as caught:
            SigningKey(bad_pem, algorithm)  # type: ignore[arg-type]
        assert "bm9wZQ" not in str(caught.value)


def test_a_method_without_its_credential_is_a_usage_error() -> None:
    for method in (ClientAuthMethod.CLIENT_SECRET_BASIC, ClientAuthMethod.CLIENT_SECRET_POST,
                   ClientAuthMethod.PRIVATE_KEY_JWT):
        with pytest.raises(InvalidArgument, match="needs"):
            client_authentication(method, ClientCredentials("cid"), audience=ISSUER)


@pytest.mark.parametrize("client_id", ["", "x" * 2049, "new\nline", "tab\tid"])
def test_a_bad_client_id_is_refused(client_id: str) -> None:
    with pytest.raises(InvalidArgument):
        ClientCredentials(client_id)


def test_secrets_stay_out_of_reprs(ec_key: ec.EllipticCurvePrivateKey) -> None:
    key = SigningKey(pem(ec_key))
    credentials = ClientCredentials("cid", SECRET, key)
    form, _ = client_authentication(ClientAuthMethod.CLIENT_SECRET_POST, credentials,
                                    audience=ISSUER)
    basic_headers = client_authentication(ClientAuthMethod.CLIENT_SECRET_BASIC, credentials,
                                          audience=ISSUER)[1]
    jwt_form = client_authentication(ClientAuthMethod.PRIVATE_KEY_JWT, credentials,
                                     audience=ISSUER)[0]
    private_body = "".join(pem(ec_key).decode().splitlines()[1:-1])
    for shown in (repr(credentials), str(credentials), repr(key), repr(form), str(form),
                  repr(basic_headers), repr(jwt_form), repr(merge_fields(form, jwt_form))):
        assert SECRET not in shown
        assert basic_headers["Authorization"].split()[1] not in shown
        assert jwt_form["client_assertion"][:30] not in shown
        assert private_body[:30] not in shown
    assert "client_secret" in repr(form)  # the names are shown, for debugging


def test_merging_refuses_a_field_set_twice() -> None:
    with pytest.raises(InvalidArgument, match="client_id"):
        merge_fields({"client_id": "a"}, {"client_id": "b"})
