"""A protected `mcpkit serve` against the real authorization server (oidc-provider, shared per
session: tests/auth_e2e/stack.py), every piece a real process on 127.0.0.1:

- mcpkit's Client with OAuth (the provider's pages walked over HTTP) in both eras, and the
  official Python SDK's OAuth client (a process of its own) in both eras, list and call the
  coding tools; the same driver against the test-only protected server first, so a failure
  against `mcpkit serve` is the server's;
- no token: 401 with the RFC 9728 `resource_metadata` challenge, and the metadata itself;
- a token minted for the other protected server is refused, and the reverse (audience and
  resource checks: no passthrough either way);
- mcpkit's client-credentials client with DPoP (a proof per request) calls the tools;
- a DPoP-bound client-credentials token: taken with a fresh proof by its key, refused with a
  replayed proof, another key's proof, or as a Bearer token;
- opaque tokens by introspection (`--auth-introspection-*`), and `--auth-dpop-nonce`;
- `--required-scope`: 403 insufficient_scope for a token without it, and mcpkit's client
  steps up;
- start-up: `--auth-*` with `--token` is refused, and an unreachable issuer is one line and
  exit status 2, within the start-up bound."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from tests.auth_e2e.logins import FormLogin
from tests.auth_e2e.serve_process import WORKSPACE_FILE, WORKSPACE_TEXT, Served, running_serve
from tests.auth_e2e.stack import ROOT, Stack
from tests.procs import free_port, stop_process, wait_for_port

from mcpkit import Client
from mcpkit.auth.assertions import client_credentials_form
from mcpkit.auth.client_auth import basic_authorization
from mcpkit.auth.dpop import DPoPKey
from mcpkit.client import ClientCredentialsGrant, MachineAuth
from mcpkit.client.oauth import OAuth

pytestmark = pytest.mark.anyio

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
SDK_LIMIT_S = 90.0
CODING_TOOLS = {"view", "ls", "glob", "grep", "bash"}
READ, WRITE = "mcp:read", "mcp:write"
SECRET_ENV = "MCPKIT_TEST_INTROSPECTION_SECRET"


@pytest.fixture(scope="module")
def served(oidc_stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`mcpkit serve --auth-issuer <the provider> --auth-audience <its own URL>
    --required-scope mcp:read` (the scope its metadata publishes, so clients ask for it)."""
    with running_serve(tmp_path_factory.mktemp("serve"), oidc_stack,
                       "--required-scope", READ) as process:
        yield process


@pytest.fixture(scope="module")
def served_write(oidc_stack: Stack, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[Served]:
    """The same, with `--required-scope mcp:write`: a token with only mcp:read gets 403."""
    with running_serve(tmp_path_factory.mktemp("serve-write"), oidc_stack,
                       "--required-scope", WRITE) as process:
        yield process


@pytest.fixture(scope="module")
def served_introspecting(oidc_stack: Stack, tmp_path_factory: pytest.TempPathFactory
                         ) -> Iterator[Served]:
    with introspecting_serve(tmp_path_factory.mktemp("serve-introspect"),
                             oidc_stack) as process:
        yield process


def introspecting_serve(directory: Path, stack: Stack
                        ) -> contextlib.AbstractContextManager[Served]:
    """`mcpkit serve` requiring READ, its opaque tokens checked by introspection at the
    provider as the "machine" client (its secret in an environment variable, never on the
    command line)."""
    return running_serve(directory, stack, "--required-scope", READ,
                         "--auth-introspection-client-id", stack.machine_client_id,
                         "--auth-introspection-secret-env", SECRET_ENV, opaque=True,
                         env={SECRET_ENV: stack.machine_secret})


@pytest.fixture(scope="module")
def served_nonce(oidc_stack: Stack, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[Served]:
    """DPoP proofs must carry the server's nonce (`--auth-dpop-nonce`)."""
    with running_serve(tmp_path_factory.mktemp("serve-nonce"), oidc_stack,
                       "--auth-dpop-nonce") as process:
        yield process


# --- helpers -----------------------------------------------------------------------------


async def machine_token(stack: Stack, resource: str, scopes: list[str],
                        key: DPoPKey | None = None) -> str:
    """A client-credentials access token for `resource` (DPoP-bound to `key` when given)."""
    form = client_credentials_form(scope=scopes, resource=resource)
    headers = {"Authorization": basic_authorization(stack.machine_client_id,
                                                    stack.machine_secret)}
    if key is not None:
        headers["DPoP"] = key.proof("POST", f"{stack.issuer}/token")
    async with aiohttp.ClientSession() as http, http.post(
            f"{stack.issuer}/token", data=dict(form), headers=headers) as reply:
        answer = await reply.json()
        assert reply.status == 200, answer
    assert answer["token_type"] == ("DPoP" if key else "Bearer")
    token: str = answer["access_token"]
    return token


async def initialize(url: str, authorization: str | None = None,
                     proof: str | None = None) -> tuple[int, str]:
    """The status and WWW-Authenticate of a raw 2025-11-25 `initialize` POST."""
    status, headers = await initialize_headers(url, authorization, proof)
    return status, headers.get("WWW-Authenticate", "")


async def initialize_headers(url: str, authorization: str | None = None,
                             proof: str | None = None) -> tuple[int, Mapping[str, str]]:
    headers = {"Accept": "application/json, text/event-stream",
               **({"Authorization": authorization} if authorization else {}),
               **({"DPoP": proof} if proof else {})}
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}}
    async with aiohttp.ClientSession() as http, http.post(
            url, json=message, headers=headers) as reply:
        return reply.status, reply.headers.copy()  # case-insensitive, like HTTP


def challenge_params(header: str) -> dict[str, str]:
    """`Bearer a="b", c="d"` → {"a": "b", "c": "d"} (the test's own reading of it)."""
    _, _, rest = header.partition(" ")
    params = {}
    for part in rest.split(","):
        name, _, value = part.strip().partition("=")
        if name:
            params[name] = value.strip('"')
    return params


def sdk_client(url: str, tool: str, arguments: dict[str, Any], era: str) -> dict[str, Any]:
    """The official Python SDK's OAuth client run as a process; its JSON report."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.auth_e2e.sdk_oauth_client", "--url", url, "--tool", tool,
         "--arguments", json.dumps(arguments), "--era", era],
        cwd=ROOT, capture_output=True, text=True, timeout=SDK_LIMIT_S, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def view_arguments(served: Served) -> dict[str, Any]:
    return {"file_path": str(served.workspace / WORKSPACE_FILE)}


def text_of(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


# --- clients that log in -----------------------------------------------------------------


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_sdk_oauth_client_against_the_test_only_server(stack: Stack, era: str) -> None:
    """The driver itself works (against the protected server written for the tests), so a
    failure below is `mcpkit serve`'s."""
    report = sdk_client(stack.resource, "read", {}, era)
    assert report["text"] == "read ok" and not report["is_error"]
    assert report["protocol_version"] == (LEGACY if era == "legacy" else MODERN)
    assert report["pages"] == ["login", "consent"]
    assert report["audience"] == stack.resource


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_sdk_oauth_client_against_protected_serve(served: Served, era: str) -> None:
    report = sdk_client(served.url, "view", view_arguments(served), era)
    assert CODING_TOOLS <= set(report["tools"])
    assert not report["is_error"] and WORKSPACE_TEXT.strip() in report["text"]
    assert report["protocol_version"] == (LEGACY if era == "legacy" else MODERN)
    assert report["pages"] == ["login", "consent"]  # a real login through the provider
    assert report["audience"] == served.url  # RFC 8707: a token for this server only


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_mcpkit_client_against_protected_serve(stack: Stack, served: Served,
                                                     era: str) -> None:
    login = FormLogin()
    mark = stack.mark()
    async with Client(served.url, era=era, auth=OAuth(redirect=login)) as client:
        assert client.protocol_version == era
        tools = {tool.name for tool in await client.list_tools()}
        assert CODING_TOOLS <= tools
        result = await client.call_tool("view", view_arguments(served))
        assert not result.is_error and WORKSPACE_TEXT.strip() in text_of(result)
    assert login.pages == ["login", "consent"]
    [grant] = stack.events_since(mark, "grant.success")
    assert grant["grant_type"] == "authorization_code"


async def test_mcpkit_machine_client_with_dpop(stack: Stack, served: Served) -> None:
    """mcpkit's client-credentials client, its tokens DPoP-bound: a fresh proof per request,
    each checked (and its jti recorded) by the server."""
    grant = ClientCredentialsGrant(stack.machine_client_id, client_secret=stack.machine_secret)
    auth = MachineAuth(grant, scopes=["mcp:read"], dpop=True)
    async with Client(served.url, era=MODERN, auth=auth) as client:
        for _ in range(3):  # three requests, three proofs
            result = await client.call_tool("view", view_arguments(served))
            assert not result.is_error and WORKSPACE_TEXT.strip() in text_of(result)


async def test_opaque_tokens_by_introspection(stack: Stack, served: Served,
                                             served_introspecting: Served) -> None:
    """`--auth-introspection-*`: the provider's opaque tokens are read by introspection; a
    login through the pages works the same; another resource's tokens are still refused."""
    opaque = await machine_token(stack, served_introspecting.url, [READ])
    assert opaque.count(".") != 2  # not a JWT: only the provider can say what it means
    assert (await initialize(served_introspecting.url, f"Bearer {opaque}"))[0] == 200
    assert (await initialize(served.url, f"Bearer {opaque}"))[0] == 401  # JWTs only there
    jwt_elsewhere = await machine_token(stack, served.url, [READ])
    opaque_elsewhere = await machine_token(stack, stack.opaque_resource, [READ])
    status, challenge = await initialize(served_introspecting.url, f"Bearer {opaque_elsewhere}")
    assert status == 401 and challenge_params(challenge).get("error") == "invalid_token"
    # oidc-provider answers "400 unsupported_token_type" for a JWT it cannot introspect: a
    # refusal of the token (401), not an authorization server in trouble (503)
    status, challenge = await initialize(served_introspecting.url, f"Bearer {jwt_elsewhere}")
    assert status == 401 and challenge_params(challenge).get("error") == "invalid_token"
    login = FormLogin()
    async with Client(served_introspecting.url, era=LEGACY,
                      auth=OAuth(redirect=login)) as client:
        result = await client.call_tool("view", view_arguments(served_introspecting))
        assert not result.is_error and WORKSPACE_TEXT.strip() in text_of(result)
    assert login.pages == ["login", "consent"]


async def test_dpop_nonce_is_required_and_mcpkit_follows_it(stack: Stack,
                                                           served_nonce: Served) -> None:
    key = DPoPKey.generate()
    token = await machine_token(stack, served_nonce.url, [READ], key)
    proof = key.proof("POST", served_nonce.url, access_token=token)
    status, headers = await initialize_headers(served_nonce.url, f"DPoP {token}", proof)
    assert status == 401 and "use_dpop_nonce" in headers.get("WWW-Authenticate", "")
    nonce = headers["DPoP-Nonce"]
    with_nonce = key.proof("POST", served_nonce.url, access_token=token, nonce=nonce)
    assert (await initialize(served_nonce.url, f"DPoP {token}", with_nonce))[0] == 200

    grant = ClientCredentialsGrant(stack.machine_client_id, client_secret=stack.machine_secret)
    async with Client(served_nonce.url, era=MODERN,
                      auth=MachineAuth(grant, scopes=[READ], dpop=True)) as client:
        result = await client.call_tool("view", view_arguments(served_nonce))
        assert not result.is_error


@pytest.fixture
def example_url(stack: Stack, tmp_path: Path) -> Iterator[str]:
    """`mcpkit example --auth-issuer … --auth-audience …` (the serve_arguments commands)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    stack.add_resource(url)
    with open(tmp_path / "example.log", "w+b") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcpkit", "example", "--port", str(port),
             "--auth-issuer", stack.issuer, "--auth-audience", url], cwd=ROOT,
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        try:
            wait_for_port(proc, port, timeout=30)
            yield url
        finally:
            stop_process(proc, group=True)


async def test_mcpkit_example_takes_the_same_options(stack: Stack, example_url: str) -> None:
    assert (await initialize(example_url))[0] == 401
    grant = ClientCredentialsGrant(stack.machine_client_id, client_secret=stack.machine_secret)
    async with Client(example_url, auth=MachineAuth(grant, scopes=[READ])) as client:
        result = await client.call_tool("add", {"a": 2, "b": 3})
        assert result.structured_content == {"result": 5}


# --- what is refused ---------------------------------------------------------------------


async def test_no_token_is_challenged_with_the_resource_metadata(stack: Stack,
                                                                 served: Served) -> None:
    status, challenge = await initialize(served.url)
    assert status == 401
    assert challenge.startswith("Bearer ")
    metadata_url = challenge_params(challenge)["resource_metadata"]
    assert metadata_url == served.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    async with aiohttp.ClientSession() as http, http.get(metadata_url) as reply:
        assert reply.status == 200
        document = await reply.json()
    assert document["resource"] == served.url
    assert document["authorization_servers"] == [stack.issuer]
    assert document["scopes_supported"] == [READ]  # --required-scope: what clients ask for
    assert challenge_params(challenge).get("scope") == READ


async def test_a_token_for_another_resource_is_refused_both_ways(stack: Stack,
                                                                 served: Served) -> None:
    mine = await machine_token(stack, served.url, ["mcp:read"])
    theirs = await machine_token(stack, stack.resource, ["mcp:read"])
    assert (await initialize(served.url, f"Bearer {mine}"))[0] == 200  # the control
    assert (await initialize(stack.resource, f"Bearer {theirs}"))[0] == 200
    status, challenge = await initialize(served.url, f"Bearer {theirs}")
    assert status == 401 and challenge_params(challenge).get("error") == "invalid_token"
    assert mine not in challenge and theirs not in challenge
    status, _ = await initialize(stack.resource, f"Bearer {mine}")  # and no passthrough back
    assert status == 401
    log = served.log.read_text("utf-8", errors="replace")
    assert mine not in log and theirs not in log


async def test_a_dpop_bound_token_needs_a_fresh_proof_by_its_key(stack: Stack,
                                                                 served: Served) -> None:
    key = DPoPKey.generate()
    token = await machine_token(stack, served.url, ["mcp:read"], key)
    proof = key.proof("POST", served.url, access_token=token)
    assert (await initialize(served.url, f"DPoP {token}", proof))[0] == 200
    status, challenge = await initialize(served.url, f"DPoP {token}", proof)
    assert status == 401, "a replayed proof was accepted"
    assert challenge.startswith("DPoP ")  # RFC 9449 §7.1: the scheme the request used
    assert challenge_params(challenge).get("error") == "invalid_dpop_proof"
    assert "replayed" in challenge_params(challenge).get("error_description", "")
    other = DPoPKey.generate().proof("POST", served.url, access_token=token)
    assert (await initialize(served.url, f"DPoP {token}", other))[0] == 401  # not its key
    assert (await initialize(served.url, f"Bearer {token}"))[0] == 401  # bound: no bearer use
    fresh = key.proof("POST", served.url, access_token=token)
    assert (await initialize(served.url, f"DPoP {token}", fresh))[0] == 200


async def test_required_scope_refuses_then_mcpkit_steps_up(stack: Stack,
                                                           served_write: Served) -> None:
    narrow = await machine_token(stack, served_write.url, ["mcp:read"])
    status, challenge = await initialize(served_write.url, f"Bearer {narrow}")
    assert status == 403
    params = challenge_params(challenge)
    assert params["error"] == "insufficient_scope" and WRITE in params["scope"].split()
    wide = await machine_token(stack, served_write.url, ["mcp:read", WRITE])
    assert (await initialize(served_write.url, f"Bearer {wide}"))[0] == 200

    login = FormLogin()  # asks for mcp:read only: the server's 403 makes it ask for more
    oauth = OAuth(redirect=login, scopes=["mcp:read"])
    async with Client(served_write.url, era=MODERN, auth=oauth) as client:
        assert CODING_TOOLS <= {tool.name for tool in await client.list_tools()}
    assert login.pages == ["login", "consent", "consent"]  # a step-up, not a new login
    assert oauth.tokens is not None and WRITE in oauth.tokens.scope.split()


# --- start-up ----------------------------------------------------------------------------


def serve_once(tmp_path: Path, *options: str, env: dict[str, str] | None = None,
               timeout_s: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpkit", "serve", "--workspace", str(tmp_path), "--port",
         str(free_port()), *options], cwd=ROOT, capture_output=True, text=True,
        timeout=timeout_s, env={**os.environ, **(env or {})}, check=False)


AUDIENCE = "http://127.0.0.1:1/mcp"


@pytest.mark.parametrize(("options", "env", "says"), [
    (["--token", "t"], {}, "exclude each other"),
    ([], {"MCPKIT_SERVE_TOKEN": "t"}, "exclude each other"),
    (["--transport", "stdio"], {}, "stdio"),
    (["--auth-introspection-client-id", "rs"], {}, "go together"),
], ids=["token", "token-env", "stdio", "introspection-without-secret"])
def test_inconsistent_auth_options_are_one_line_and_exit_2(
        tmp_path: Path, options: list[str], env: dict[str, str], says: str) -> None:
    done = serve_once(tmp_path, "--auth-issuer", "http://127.0.0.1:1",
                      "--auth-audience", AUDIENCE, *options, env=env)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and says in done.stderr, done.stderr


def test_an_unreachable_issuer_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = serve_once(tmp_path, "--auth-issuer", f"http://127.0.0.1:{free_port()}",
                      "--auth-audience", AUDIENCE)
    assert done.returncode == 2
    assert done.stderr.startswith("mcpkit serve: cannot use the authorization server: ")
    assert done.stderr.count("\n") == 1, done.stderr


def test_a_silent_issuer_is_given_up_on_at_the_startup_timeout(tmp_path: Path) -> None:
    """An issuer that takes the connection and never answers: start-up stops at
    --auth-startup-timeout, one line, exit status 2."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # connections complete in the kernel; nothing ever answers
        started = time.monotonic()
        done = serve_once(tmp_path, "--auth-issuer",
                          f"http://127.0.0.1:{silent.getsockname()[1]}",
                          "--auth-audience", AUDIENCE, "--auth-startup-timeout", "1")
        took = time.monotonic() - started
    assert done.returncode == 2
    assert "did not answer within 1 s" in done.stderr and done.stderr.count("\n") == 1, \
        done.stderr
    assert took < 20  # 1 s and the interpreter's start, with generous headroom
