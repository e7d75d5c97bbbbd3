"""`Client(url, auth=MachineAuth(grant, dpop=…))` against a real authorization server, IdP and
protected MCP server on 127.0.0.1 (tests/client/machine_server.py): each client
authentication method of the client-credentials grant, workload identity (jwt-bearer) from a
value, a callable and a file, enterprise-managed authorization (ID token → ID-JAG →
jwt-bearer), DPoP (a proof per request with `ath`, nonce retries at both servers), re-grant
on a 401 and before expiry, hostile token and nonce responses, and no secret in logs,
reprs or errors."""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Iterator, Mapping
from pathlib import Path

import anyio
import pytest
from joserfc.jwk import ECKey
from tests.client.machine_server import JWT_BEARER, MachineServer, app
from tests.procs import serve_in_thread

from mcpkit import Client
from mcpkit.auth.errors import AuthorizationFailed
from mcpkit.client import (
    ClientCredentialsGrant,
    ConnectOptions,
    DPoPKey,
    EnterpriseGrant,
    MachineAuth,
    WorkloadIdentityGrant,
)
from mcpkit.client.oauth import OAuth
from mcpkit.client.oauth_redirect import follow_location
from mcpkit.errors import InvalidArgument

pytestmark = pytest.mark.anyio

ERA = "2025-11-25"  # pinned: no era probe, so each test's first request is the one that 401s
SECRET = "s3cret-value-of-the-client"


@pytest.fixture
def server() -> Iterator[MachineServer]:
    machine = MachineServer(client_secrets={"svc": SECRET})
    machine.secrets_seen.add(SECRET)
    with serve_in_thread(app(machine), name="machine-oauth") as base:
        machine.base = base
        yield machine


async def call_read(server: MachineServer, auth: object, times: int = 1) -> None:
    async with Client(server.resource, era=ERA, auth=auth) as client:  # type: ignore[arg-type]
        for _ in range(times):
            result = await client.call_tool("read", {})
            assert result.content[0].text == "read ok"  # type: ignore[union-attr]


def assert_no_secrets(server: MachineServer, *texts: str) -> None:
    assert server.secrets_seen, "the server issued nothing: the test proves nothing"
    for text in texts:
        for secret in server.secrets_seen:
            assert secret not in text


# --- client credentials -----------------------------------------------------------------


async def test_client_secret_basic(server: MachineServer,
                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    grant = ClientCredentialsGrant("svc", client_secret=SECRET)
    auth = MachineAuth(grant)
    await call_read(server, auth, times=2)
    [form] = server.token_requests  # one grant, kept for the second call
    assert form["grant_type"] == "client_credentials"
    assert form["resource"] == server.resource
    assert "client_secret" not in form
    assert server.token_headers[0]["authorization"].startswith("Basic ")
    assert_no_secrets(server, caplog.text, repr(auth), repr(grant), repr(auth.tokens))


async def test_client_secret_post_when_that_is_all_the_server_takes(
        server: MachineServer) -> None:
    server.auth_methods = ["client_secret_post"]
    await call_read(server, MachineAuth(ClientCredentialsGrant("svc", client_secret=SECRET)))
    [form] = server.token_requests
    assert form["client_id"] == "svc" and form["client_secret"] == SECRET
    assert "authorization" not in server.token_headers[0]


async def test_private_key_jwt(server: MachineServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    key = ECKey.generate_key("P-256")
    server.client_keys["keyed"] = key
    server.auth_methods = ["private_key_jwt"]
    pem = key.as_pem(private=True).decode()
    server.secrets_seen.add(pem)
    grant = ClientCredentialsGrant("keyed", private_key=pem)
    auth = MachineAuth(grant)
    await call_read(server, auth)
    [form] = server.token_requests
    assert form["client_assertion_type"] == (
        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
    server.secrets_seen.add(form["client_assertion"])
    assert_no_secrets(server, caplog.text, repr(auth), repr(grant))


async def test_a_method_the_server_does_not_take_is_a_clear_error(
        server: MachineServer) -> None:
    server.auth_methods = ["private_key_jwt"]
    with pytest.raises(AuthorizationFailed) as caught:
        await call_read(server, MachineAuth(ClientCredentialsGrant("svc", client_secret=SECRET)))
    assert "private_key_jwt" in str(caught.value)
    assert SECRET not in str(caught.value)
    assert server.token_requests == []


# --- workload identity and enterprise-managed authorization ------------------------------


async def test_workload_identity_from_a_callable_asked_for_each_grant(
        server: MachineServer) -> None:
    issued: list[str] = []

    def current_jwt() -> str:
        issued.append(server.workload_jwt())
        return issued[-1]

    auth = MachineAuth(WorkloadIdentityGrant(current_jwt))
    await call_read(server, auth)
    server.revoke_all()  # the next request is refused: a new grant with a new JWT
    await call_read(server, auth)
    assert [f["grant_type"] for f in server.token_requests] == [JWT_BEARER, JWT_BEARER]
    assert [f["assertion"] for f in server.token_requests] == issued
    assert "client_id" not in server.token_requests[0]  # no client: the assertion alone


async def test_workload_identity_from_a_file_read_again(server: MachineServer,
                                                        tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(server.workload_jwt() + "\n")
    auth = MachineAuth(WorkloadIdentityGrant.from_file(path, client_id="wl"))
    await call_read(server, auth)
    rotated = server.workload_jwt()
    path.write_text(rotated)
    server.revoke_all()
    await call_read(server, auth)
    assert server.token_requests[-1]["assertion"] == rotated
    assert server.token_requests[-1]["client_id"] == "wl"


async def test_a_refused_workload_jwt_fails_once_without_another_grant(
        server: MachineServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = server.workload_jwt(audience="https://elsewhere.example")
    with pytest.raises(AuthorizationFailed) as caught:
        await call_read(server, MachineAuth(WorkloadIdentityGrant(wrong)))
    assert "invalid_grant" in str(caught.value)
    assert len(server.token_requests) == 1  # not retried, no other grant tried
    assert_no_secrets(server, caplog.text, str(caught.value))


async def test_enterprise_id_token_to_id_jag_to_jwt_bearer(
        server: MachineServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    server.client_secrets["xaa-client"] = "xaa-secret"
    server.secrets_seen.add("xaa-secret")
    grant = EnterpriseGrant(id_token=server.id_token(),
                            idp_token_endpoint=f"{server.base}/idp/token",
                            idp_client_id="idp-client", client_id="xaa-client",
                            client_secret="xaa-secret")
    auth = MachineAuth(grant)
    await call_read(server, auth)
    [exchange] = server.idp_requests
    assert exchange["audience"] == server.base  # the ID-JAG is for the MCP AS
    assert exchange["resource"] == server.resource
    assert exchange["client_id"] == "idp-client"
    [form] = server.token_requests
    assert form["grant_type"] == JWT_BEARER
    assert_no_secrets(server, caplog.text, repr(auth), repr(grant))


# --- DPoP --------------------------------------------------------------------------------


async def test_dpop_a_fresh_proof_per_request_with_ath(
        server: MachineServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    server.dpop = True
    key = DPoPKey.generate()
    auth = MachineAuth(ClientCredentialsGrant("svc", client_secret=SECRET), dpop=key)
    await call_read(server, auth, times=3)
    assert auth.tokens is not None and auth.tokens.token_type == "DPoP"
    token_proof, *resource_proofs = server.proofs
    assert token_proof["htm"] == "POST" and "ath" not in token_proof
    assert len(resource_proofs) >= 4  # initialize, initialized, three calls
    assert all("ath" in proof for proof in resource_proofs)
    assert len({proof["jti"] for proof in server.proofs}) == len(server.proofs)
    assert {scheme for _, scheme in server.resource_requests} == {"DPoP"}
    # The session's GET stream and its closing DELETE carry proofs for their own method.
    methods = {method for method, _ in server.resource_requests}
    assert {"GET", "DELETE"} <= methods, methods
    assert {proof["htm"] for proof in resource_proofs} == methods
    assert_no_secrets(server, caplog.text, repr(auth), repr(key))


async def test_dpop_nonces_at_the_authorization_server_and_the_resource(
        server: MachineServer) -> None:
    server.dpop = True
    server.as_nonce, server.rs_nonce = "as-nonce-1", "rs-nonce-1"
    auth = MachineAuth(ClientCredentialsGrant("svc", client_secret=SECRET), dpop=True)
    await call_read(server, auth, times=2)
    assert server.nonce_challenges == {"as": 1, "rs": 1}  # each nonce asked for once, kept
    assert server.proofs[0]["nonce"] == "as-nonce-1"
    assert all(proof["nonce"] == "rs-nonce-1" for proof in server.proofs[1:])


async def test_a_dpop_nonce_over_the_limit_is_refused(server: MachineServer) -> None:
    server.dpop = True
    server.as_nonce = "wanted"
    server.nonce_header_override = "n" * 5000
    with pytest.raises(AuthorizationFailed) as caught:
        await call_read(server, MachineAuth(
            ClientCredentialsGrant("svc", client_secret=SECRET), dpop=True))
    assert "over the limit of 1024" in str(caught.value)
    assert len(server.token_requests) == 1


async def test_a_token_the_server_did_not_bind_goes_out_as_bearer(
        server: MachineServer) -> None:
    """DPoP asked for, but the authorization server ignores proofs (token_type Bearer): the
    token is presented as the bearer token it is."""
    auth = MachineAuth(ClientCredentialsGrant("svc", client_secret=SECRET), dpop=True)
    await call_read(server, auth)
    assert "dpop" in server.token_headers[0]  # the proof was sent
    assert auth.tokens is not None and auth.tokens.token_type == "Bearer"
    assert {scheme for _, scheme in server.resource_requests} == {"Bearer"}


async def test_the_authorization_code_flow_with_dpop(server: MachineServer) -> None:
    """`OAuth(dpop=True)`: the code exchange and the refresh carry proofs (with the AS's
    nonce), the resource requests `Authorization: DPoP` with the resource's nonce."""
    server.dpop = True
    server.as_nonce, server.rs_nonce = "as-n", "rs-n"
    server.token_lifetime_s = 20  # inside the refresh margin: refreshed before the next use
    oauth = OAuth(redirect=follow_location, client_id="svc", client_secret=SECRET, dpop=True)
    await call_read(server, oauth, times=2)
    grants = [form["grant_type"] for form in server.token_requests]
    assert grants[:2] == ["authorization_code", "authorization_code"]  # the nonce retry
    assert "refresh_token" in grants
    assert oauth.tokens is not None and oauth.tokens.token_type == "DPoP"
    assert server.nonce_challenges == {"as": 1, "rs": 1}
    assert {scheme for _, scheme in server.resource_requests} == {"DPoP"}


async def test_dpop_over_http_sse_proves_the_get_stream_and_each_post(
        server: MachineServer) -> None:
    """HTTP+SSE: the stream's GET has a proof for GET at /sse, each message's POST one for
    POST at the endpoint it goes to (not the /sse URL); the resource's nonce is honoured."""
    server.dpop = True
    server.rs_nonce = "rs-n"
    server.resource_path = ""  # the PRM's resource covers /sse and /messages
    auth = MachineAuth(ClientCredentialsGrant("svc", client_secret=SECRET), dpop=True)
    async with Client(server.base + "/sse", era="2024-11-05",
                      connect=ConnectOptions(kind="sse"), auth=auth) as client:
        result = await client.call_tool("read", {})
        assert result.content[0].text == "read ok"  # type: ignore[union-attr]
    targets = {(proof["htm"], urllib.parse.urlsplit(str(proof["htu"])).path)
               for proof in server.proofs[1:]}
    assert ("GET", "/sse") in targets
    assert ("POST", "/messages/") in targets or ("POST", "/messages") in targets, targets


# --- re-grant, expiry, hostile token responses -------------------------------------------


async def test_regrant_on_401_and_before_expiry(server: MachineServer) -> None:
    auth = MachineAuth(ClientCredentialsGrant("svc", client_secret=SECRET))
    await call_read(server, auth)
    server.revoke_all()
    await call_read(server, auth)
    assert len(server.token_requests) == 2
    server.token_lifetime_s = 20  # inside the 30 s margin: replaced before each use
    server.revoke_all()
    await call_read(server, auth, times=2)
    assert len(server.token_requests) >= 4


async def test_concurrent_401s_share_one_grant(server: MachineServer) -> None:
    auth = MachineAuth(ClientCredentialsGrant("svc", client_secret=SECRET))
    async with Client(server.resource, era=ERA, auth=auth) as client:
        await client.call_tool("read", {})
        server.revoke_all()
        results: list[str] = []

        async def read() -> None:
            result = await client.call_tool("read", {})
            results.append(result.content[0].text)  # type: ignore[union-attr]

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(read)
    assert results == ["read ok"] * 4
    assert len(server.token_requests) == 2  # the first grant, then one for all four


@pytest.mark.parametrize(("body", "says"), [
    (b'{"access_token": "abc", "token_type": "mac"}', "'mac' is not supported"),
    (b'{"access_token": "abc", "token_type": "DPoP"}', "'DPoP' is not supported (Bearer)"),
    (b'{"token_type": "Bearer"}', "invalid"),
    (b'{"access_token": "' + b"x" * 70000 + b'", "token_type": "Bearer"}', "limit"),
])
async def test_hostile_token_responses(server: MachineServer, body: bytes, says: str) -> None:
    server.token_body_override = body
    with pytest.raises(AuthorizationFailed) as caught:
        await call_read(server, MachineAuth(ClientCredentialsGrant("svc", client_secret=SECRET)))
    assert says in str(caught.value)
    assert "x" * 100 not in str(caught.value)


# --- the HttpAuth contract -----------------------------------------------------------------


async def test_an_http_auth_without_the_method_parameter_still_works(
        server: MachineServer) -> None:
    """`HttpAuth.headers` gained `method`: an implementation written before keeps working."""
    machine = MachineAuth(ClientCredentialsGrant("svc", client_secret=SECRET))
    await call_read(server, machine)
    assert machine.tokens is not None
    token = machine.tokens.access_token

    class Static:
        max_attempts = 1

        async def headers(self, url: str) -> Mapping[str, str]:
            return {"Authorization": f"Bearer {token}"}

        async def challenge(self, url: str, status: int, headers: Mapping[str, str]) -> bool:
            return False

    await call_read(server, Static())


def test_grants_refuse_what_cannot_work() -> None:
    with pytest.raises(InvalidArgument, match="secret or a private key"):
        ClientCredentialsGrant("svc")
    with pytest.raises(InvalidArgument, match="not both"):
        ClientCredentialsGrant("svc", client_secret="x", private_key="y")
    with pytest.raises(InvalidArgument, match="not a PEM private key"):
        ClientCredentialsGrant("svc", private_key="-----BEGIN nonsense")
    with pytest.raises(InvalidArgument, match="not one string"):
        MachineAuth(ClientCredentialsGrant("svc", client_secret="x"), scopes="a b")
