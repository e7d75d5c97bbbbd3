"""mcpkit's resource-server verifier against tokens of a real authorization server (the
`oidc-provider` npm package, tests/auth_e2e/provider.mjs): client-credentials JWT access
tokens for the stack's resource pass `JwtVerifier` (keys discovered from the provider's
metadata), a DPoP-bound one only with a fresh proof by its key (a replayed proof and a bearer
presentation refused), and a token the same provider minted for another resource is refused:
no token for another resource, so none passed through. Opaque tokens go through the
provider's introspection endpoint (`IntrospectionVerifier`) under the same rules."""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
import pytest
from tests.auth_e2e.stack import Stack

from mcpkit.auth.assertions import client_credentials_form
from mcpkit.auth.client_auth import basic_authorization
from mcpkit.auth.dpop import DPoPKey
from mcpkit.auth.resource import InvalidToken, TokenRequest
from mcpkit.server.authorization import IntrospectionVerifier, JwtVerifier, discover_verifier

pytestmark = pytest.mark.anyio


async def machine_token(stack: Stack, resource: str, key: DPoPKey | None = None
                        ) -> dict[str, Any]:
    """A client-credentials grant at the provider for `resource` (DPoP-bound with `key`)."""
    form = client_credentials_form(scope=["mcp:read"], resource=resource)
    headers = {"Authorization": basic_authorization(stack.machine_client_id,
                                                    stack.machine_secret)}
    if key is not None:
        headers["DPoP"] = key.proof("POST", f"{stack.issuer}/token")
    async with aiohttp.ClientSession() as http, http.post(
            f"{stack.issuer}/token", data=dict(form), headers=headers) as reply:
        answer: dict[str, Any] = await reply.json()
        assert reply.status == 200, answer
        return answer


async def test_the_providers_token_for_this_resource_passes(
        stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    verifier = await discover_verifier(stack.issuer, stack.resource)
    answer = await machine_token(stack, stack.resource)
    with caplog.at_level(logging.DEBUG):
        info = await verifier.verify(
            TokenRequest("Bearer", answer["access_token"], "POST", stack.resource))
    assert info.client_id == stack.machine_client_id and "mcp:read" in info.scopes
    assert info.jkt is None and info.claims["aud"] == stack.resource
    assert answer["access_token"] not in caplog.text


async def test_a_token_for_another_resource_is_refused(stack: Stack) -> None:
    verifier = JwtVerifier(stack.issuer, stack.resource)
    elsewhere = await machine_token(stack, stack.other_resource)
    with pytest.raises(InvalidToken, match="another resource") as caught:
        await verifier.verify(
            TokenRequest("Bearer", elsewhere["access_token"], "POST", stack.resource))
    assert elsewhere["access_token"] not in str(caught.value)
    # and the resource it was minted for takes it: the refusal above is about the audience
    theirs = JwtVerifier(stack.issuer, stack.other_resource)
    assert (await theirs.verify(TokenRequest("Bearer", elsewhere["access_token"], "POST",
                                             stack.other_resource))).client_id == "machine"


async def test_a_dpop_bound_token_needs_a_fresh_proof_by_its_key(stack: Stack) -> None:
    key = DPoPKey.generate()
    answer = await machine_token(stack, stack.resource, key)
    assert answer["token_type"] == "DPoP"
    token = answer["access_token"]
    verifier = JwtVerifier(stack.issuer, stack.resource)
    proof = key.proof("POST", stack.resource, access_token=token)
    request = TokenRequest("DPoP", token, "POST", stack.resource, dpop_proof=proof)
    assert (await verifier.verify(request)).jkt == key.jkt
    with pytest.raises(InvalidToken, match="already used"):
        await verifier.verify(request)  # the same proof replayed
    with pytest.raises(InvalidToken, match="not as a Bearer token"):
        await verifier.verify(TokenRequest("Bearer", token, "POST", stack.resource))
    other = DPoPKey.generate().proof("POST", stack.resource, access_token=token)
    with pytest.raises(InvalidToken, match="not bound"):
        await verifier.verify(TokenRequest("DPoP", token, "POST", stack.resource,
                                           dpop_proof=other))
    wrong_url = key.proof("POST", stack.other_resource, access_token=token)
    with pytest.raises(InvalidToken, match="htu"):
        await verifier.verify(TokenRequest("DPoP", token, "POST", stack.resource,
                                           dpop_proof=wrong_url))


async def test_introspection_at_the_provider(stack: Stack) -> None:
    """The provider's own RFC 7662 endpoint, found through its metadata, asked with the
    machine client's credentials about opaque tokens: the answer for this resource's token
    passes (a DPoP-bound one only with its proof), the one for another resource's token is
    refused on its audience, and a made-up token is inactive."""
    verifier = await discover_verifier(
        stack.issuer, stack.opaque_resource,
        introspection_client=(stack.machine_client_id, stack.machine_secret))
    assert isinstance(verifier, IntrospectionVerifier)
    ours = (await machine_token(stack, stack.opaque_resource))["access_token"]
    assert ours.count(".") != 2  # opaque, not a JWT
    info = await verifier.verify(TokenRequest("Bearer", ours, "POST", stack.opaque_resource))
    assert info.client_id == stack.machine_client_id and "mcp:read" in info.scopes
    assert info.expires_at is not None
    with pytest.raises(InvalidToken, match="another resource"):
        await (await discover_verifier(
            stack.issuer, stack.resource,
            introspection_client=(stack.machine_client_id, stack.machine_secret))
        ).verify(TokenRequest("Bearer", ours, "POST", stack.resource))
    with pytest.raises(InvalidToken, match="not active"):
        await verifier.verify(TokenRequest("Bearer", "made-up", "POST", stack.opaque_resource))
    key = DPoPKey.generate()
    bound = (await machine_token(stack, stack.opaque_resource, key))["access_token"]
    proof = key.proof("POST", stack.opaque_resource, access_token=bound)
    request = TokenRequest("DPoP", bound, "POST", stack.opaque_resource, dpop_proof=proof)
    assert (await verifier.verify(request)).jkt == key.jkt
    with pytest.raises(InvalidToken, match="already used"):
        await verifier.verify(request)
    assert stack.machine_secret not in repr(verifier)
