"""The real authorization server and the protected MCP server behind it, as processes on
127.0.0.1, for the OAuth end-to-end tests (and any later test that needs a real OAuth stack).

    with running_stack(tmp_dir) as stack:
        stack.issuer         the oidc-provider's issuer (http://127.0.0.1:PORT)
        stack.resource       the protected MCP server's URL (…/mcp)
        stack.other_resource a second resource the provider mints tokens for (…/other-mcp),
                             served by nobody: its tokens must be refused at stack.resource
        stack.opaque_resource  a third one, whose access tokens are opaque (for introspection)
        stack.set_access_token_ttl(5)     later grants' access tokens live 5 s
        stack.add_resource(url)           the provider also issues tokens for url (another
                                          protected server a test starts, e.g. `mcpkit serve`)
        mark = stack.mark()
        …
        stack.events_since(mark, "grant.success", grant_type="refresh_token")  # what followed

The provider (tests/auth_e2e/provider.mjs) appends every event the tests count to a JSON-lines
file: `grant.success` / `grant.error` (with `grant_type`, `client_id`), `refresh_token.consumed`,
`grant.revoked`, `{access,refresh}_token.destroyed` (revoked, e.g. by a logout),
`registration_create.success`, `authorization.success` (with `scope`),
`token_exchange.success` (with `account` and `resource`; `token_exchange=True`).
Both processes lead their own process group and are stopped by it; the provider also exits
when its stdin (a pipe held here) closes, so it cannot outlive the test process."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import secrets
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest
from tests.procs import free_port, stop_process, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
JS = ROOT / "tests" / "js" / "node_modules"
NODE22 = JS / f"node-linux-{'arm64' if platform.machine() in ('aarch64', 'arm64') else 'x64'}" \
    / "bin" / "node"
"""oidc-provider 9 wants Node 22: the one tests/js installs (npm package node-linux-*)."""
OIDC_PROVIDER = JS / "oidc-provider" / "lib" / "index.js"
PROVIDER_SCRIPT = Path(__file__).with_name("provider.mjs")
STARTUP_S = 30.0
MAX_LIFE_S = 1800
"""The provider exits by itself after this long, whatever happens to the test process."""


def missing(problem: str) -> None:
    """A missing piece: a skip with the command that brings it in, a failure in CI."""
    if os.environ.get("CI"):
        pytest.fail(f"{problem}; .ci/run installs it", pytrace=False)
    pytest.skip(problem)


def require_provider() -> None:
    if not NODE22.exists() or not OIDC_PROVIDER.exists():
        missing("Node 22 and oidc-provider (tests/js) are missing: run "
                "`bash scripts/install_js_peers.sh`")


@dataclass
class Stack:
    issuer: str
    resource: str
    events_file: Path
    other_resource: str = ""
    opaque_resource: str = ""
    machine_client_id: str = "machine"
    machine_secret: str = field(default="", repr=False)
    """The provider's one pre-registered client-credentials client (client_secret_basic)."""
    hub_client_id: str = "hub"
    hub_client_secret: str = field(default="", repr=False)
    """With `hub_redirect_uris`: the confidential OpenID Connect client "hub"
    (client_secret_basic, the code grant back to those URIs only)."""

    def events(self) -> list[dict[str, Any]]:
        """Every event the provider recorded so far, oldest first."""
        if not self.events_file.exists():
            return []
        lines = self.events_file.read_text("utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def mark(self) -> int:
        """A point in the event log: `events_since(mark, …)` counts only what follows."""
        return len(self.events())

    def events_since(self, mark: int, name: str, **fields: Any) -> list[dict[str, Any]]:
        return [e for e in self.events()[mark:] if e["event"] == name
                and all(e.get(k) == v for k, v in fields.items())]

    def set_access_token_ttl(self, seconds: int) -> None:
        """The lifetime of access tokens issued from now on (the provider's test route)."""
        request = urllib.request.Request(
            f"{self.issuer}/__test/settings?access_token_ttl={seconds}", method="POST")
        with urllib.request.urlopen(request, timeout=10) as reply:
            assert reply.status == 204

    def add_resource(self, resource: str, *, opaque: bool = False) -> None:
        """Let the provider issue access tokens for `resource` too (audience: it alone):
        JWTs, or opaque tokens only introspection can read."""
        query = urllib.parse.urlencode({"resource": resource,
                                        **({"format": "opaque"} if opaque else {})})
        request = urllib.request.Request(f"{self.issuer}/__test/resources?{query}",
                                         method="POST")
        with urllib.request.urlopen(request, timeout=10) as reply:
            assert reply.status == 204


def _start(argv: list[str], port: int, log: IO[bytes], **popen: Any) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, **popen)
    try:
        wait_for_port(proc, port, timeout=STARTUP_S)
    except BaseException:
        stop_process(proc, group=True)
        if proc.stdin is not None:
            proc.stdin.close()
        log.seek(0)
        raise RuntimeError(f"{Path(argv[1]).name} did not start: {log.read()[-2000:]!r}") \
            from None
    return proc


@contextlib.contextmanager
def running_stack(directory: Path, *, hub_redirect_uris: tuple[str, ...] = (),
                  token_exchange: bool = False) -> Iterator[Stack]:
    """Start the provider, then the protected server that trusts it; stop both after.
    With `hub_redirect_uris`, the provider is also the mcpkit hub's OpenID Connect provider
    (a pre-registered confidential client "hub" redirecting there; accounts with claims);
    with `token_exchange` too, "hub" may exchange a user's access token for one for a
    configured resource (RFC 8693; each success is a `token_exchange.success` event)."""
    require_provider()
    provider_port, server_port = free_port(), free_port()
    resource = f"http://127.0.0.1:{server_port}/mcp"
    stack = Stack(f"http://127.0.0.1:{provider_port}", resource, directory / "events.jsonl",
                  other_resource=f"http://127.0.0.1:{server_port}/other-mcp",
                  opaque_resource=f"http://127.0.0.1:{server_port}/opaque-mcp",
                  machine_secret=secrets.token_urlsafe(24),
                  hub_client_secret=secrets.token_urlsafe(24))
    hub_options = [part for uri in hub_redirect_uris for part in ("--hub-redirect-uri", uri)]
    if token_exchange:
        hub_options.append("--token-exchange")
    with contextlib.ExitStack() as stop:
        provider_log = stop.enter_context(open(directory / "provider.log", "w+b"))
        server_log = stop.enter_context(open(directory / "server.log", "w+b"))
        provider = _start(
            [str(NODE22), str(PROVIDER_SCRIPT), "--port", str(provider_port),
             "--resource", resource, "--other-resource", stack.other_resource,
             "--opaque-resource", stack.opaque_resource,
             "--events", str(stack.events_file),
             "--max-life-s", str(MAX_LIFE_S), *hub_options],
            provider_port, provider_log, stdin=subprocess.PIPE,
            env={**os.environ, "MACHINE_CLIENT_SECRET": stack.machine_secret,
                 "HUB_CLIENT_SECRET": stack.hub_client_secret})
        stop.callback(stop_process, provider, group=True)
        assert provider.stdin is not None
        stop.callback(provider.stdin.close)
        server = _start(
            [sys.executable, "-m", "tests.auth_e2e.protected_server", "--port",
             str(server_port), "--issuer", stack.issuer],
            server_port, server_log, stdin=subprocess.DEVNULL)
        stop.callback(stop_process, server, group=True)
        yield stack
