"""The proofs and client assertions mcpkit signs, checked by a real node process with the
JOSE library (jose) and the very checks the MCP conformance harness's mock servers run
(`auth/dpop`, `auth/dpop-nonce`, `auth/client-credentials-jwt`): what another implementation
accepts, not only what joserfc decodes. Skipped without node or tests/js/node_modules."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from joserfc.jwk import ECKey

from mcpkit.auth.client_auth import (
    ClientAuthMethod,
    ClientCredentials,
    SigningKey,
    client_authentication,
)
from mcpkit.auth.dpop import DPoPKey

HERE = Path(__file__).resolve().parent
JS_DIR = HERE.parent / "js"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None or not (JS_DIR / "node_modules" / "jose" / "package.json").exists(),
    reason="tests/js/node_modules is missing: run scripts/install_js_peers.sh")


def jose_verdicts(request: dict[str, Any]) -> dict[str, Any]:
    assert NODE is not None
    # Run as `-e` source from cwd tests/js, so `import "jose"` resolves to
    # tests/js/node_modules (a file's imports resolve from the file's own directory).
    source = (HERE / "jose_checks.mjs").read_text("utf-8")
    done = subprocess.run([NODE, "--input-type=module", "-e", source], cwd=JS_DIR,
                          input=json.dumps(request), capture_output=True, text=True,
                          timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    verdicts: dict[str, Any] = json.loads(done.stdout)
    return verdicts


def test_proofs_and_an_assertion_pass_the_harness_checks() -> None:
    key = DPoPKey.generate()
    token_endpoint = "http://localhost:41001/token"
    resource = "http://localhost:41002/mcp"
    access_token = "eyJhbGciOiJFUzI1NiJ9.eyJjbmYiOnt9fQ.c2ln"
    proofs = [
        {"proof": key.proof("POST", token_endpoint), "method": "POST", "url": token_endpoint},
        {"proof": key.proof("POST", token_endpoint, nonce="conformance-as-dpop-nonce"),
         "method": "POST", "url": token_endpoint, "nonce": "conformance-as-dpop-nonce"},
        *({"proof": key.proof("POST", resource + "?session=1", access_token=access_token,
                              nonce="conformance-rs-dpop-nonce"),
           "method": "POST", "url": resource, "accessToken": access_token,
           "nonce": "conformance-rs-dpop-nonce"} for _ in range(3)),
    ]
    private = ec.generate_private_key(ec.SECP256R1())
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    credentials = ClientCredentials("conformance-test-client", signing_key=SigningKey(pem))
    form, _ = client_authentication(ClientAuthMethod.PRIVATE_KEY_JWT, credentials,
                                    audience="http://localhost:41001")
    public_jwk = ECKey.import_key(pem).as_dict(private=False)

    verdicts = jose_verdicts({"proofs": proofs, "assertion": {
        "jwt": form["client_assertion"], "publicJwk": public_jwk,
        "audience": "http://localhost:41001"}})

    assert [verdict["ok"] for verdict in verdicts["proofs"]] == [True] * 5, verdicts
    assert {verdict["jkt"] for verdict in verdicts["proofs"]} == {key.jkt}
    assert len({verdict["jti"] for verdict in verdicts["proofs"]}) == 5  # no replay
    assert verdicts["assertion"] == {"ok": True, "iss": "conformance-test-client",
                                     "sub": "conformance-test-client"}


def test_the_checks_do_refuse_a_wrong_proof() -> None:
    """The verifier is no rubber stamp: a proof for another URL or method, or without the
    token's ath, fails there."""
    key = DPoPKey.generate()
    url = "http://localhost:41002/mcp"
    proofs = [
        {"proof": key.proof("POST", "http://localhost:41002/other"), "method": "POST",
         "url": url},
        {"proof": key.proof("GET", url), "method": "POST", "url": url},
        {"proof": key.proof("POST", url), "method": "POST", "url": url, "accessToken": "a.b.c"},
    ]
    verdicts = jose_verdicts({"proofs": proofs, "assertion": {
        "jwt": "x.y.z", "publicJwk": key.public_jwk, "audience": url}})
    assert [verdict.get("error") for verdict in verdicts["proofs"]] == ["htu", "htm", "ath"]
    assert verdicts["assertion"]["ok"] is False
