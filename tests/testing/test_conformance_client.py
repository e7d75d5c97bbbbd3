"""The conformance fixture client (`python -m mcpkit.testing.conformance_client URL`) against
mcpkit's own conformance server: it starts, runs a scenario and exits 0. The official
harness's mock servers are exercised by scripts/conformance/run_client_legs.py, not here."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from mcpkit.testing import conformance_client as cc


def run_client(url: str, scenario: str, version: str | None = None,
               context: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_CONFORMANCE_")}
    env["MCP_CONFORMANCE_SCENARIO"] = scenario
    if version is not None:
        env["MCP_CONFORMANCE_PROTOCOL_VERSION"] = version
    if context is not None:
        env["MCP_CONFORMANCE_CONTEXT"] = context
    return subprocess.run(
        [sys.executable, "-m", "mcpkit.testing.conformance_client", url],
        env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=45,
    )


@pytest.mark.parametrize(("version", "era"), [("2026-07-28", "modern"),
                                              ("2025-11-25", "legacy")])
def test_unknown_scenario_runs_the_generic_steps(http_server: Any, version: str,
                                                 era: str) -> None:
    """Unknown scenario: connect, list the tools, call each one; exit 0."""
    done = run_client(http_server.url, "mcpkit-generic-check", version)
    assert done.returncode == 0, done.stderr
    assert f"{era} era, protocol {version}" in done.stderr
    assert "tool test_simple_text: This is a simple text response" in done.stderr
    assert "tool test_sampling: LLM response: mcpkit conformance reply to" in done.stderr
    assert "tool test_elicitation_sep1034_defaults: Elicitation completed" in done.stderr
    assert "scenario mcpkit-generic-check: done" in done.stderr


def test_initialize_scenario(http_server: Any) -> None:
    done = run_client(http_server.url, "initialize", "2025-11-25")
    assert done.returncode == 0, done.stderr
    assert "legacy era, protocol 2025-11-25, server mcpkit-conformance-server" in done.stderr


@pytest.mark.parametrize(("scenario", "missing"), [
    ("auth/client-credentials-basic", "client_id"),
    ("auth/client-credentials-jwt", "signing_algorithm"),
    ("auth/enterprise-managed-authorization", "idp_id_token"),
    ("auth/wif-jwt-bearer", "valid_jwt"),
])
def test_a_machine_grant_scenario_without_its_context_fails_with_one_line(
        scenario: str, missing: str) -> None:
    """A machine grant needs the context's credentials: said in one line, before anything is
    sent (port 9 has no server)."""
    done = run_client("http://127.0.0.1:9/mcp", scenario, "2025-11-25")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"conformance_client: {scenario}: MCP_CONFORMANCE_CONTEXT has no {missing}")


def test_machine_grants_are_made_from_the_context() -> None:
    secret = cc.machine_grant("auth/client-credentials-basic",
                              {"client_id": "c1", "client_secret": "s3cret"})
    assert isinstance(secret, cc.ClientCredentialsGrant)
    assert secret.credentials.client_id == "c1"
    assert secret.credentials.client_secret == "s3cret"
    assert "s3cret" not in repr(secret)
    wif = cc.machine_grant("auth/wif-jwt-bearer", {"client_id": "w", "valid_jwt": "a.b.c"})
    assert isinstance(wif, cc.WorkloadIdentityGrant)
    assert "a.b.c" not in repr(wif)
    assert cc.machine_grant("auth/dpop", {}) is None  # the authorization-code flow, DPoP-bound
    assert cc.machine_grant("auth/pre-registration", {"client_id": "x"}) is None


def test_a_scenario_without_its_context_fails_with_one_line() -> None:
    done = run_client("http://127.0.0.1:9/mcp", "http-custom-headers", "2026-07-28")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "conformance_client: http-custom-headers: MCP_CONFORMANCE_CONTEXT has no toolCalls "
        "to replay"
    )


SKILL_MD = "---\nname: pdf-processing\ndescription: Extract PDFs\n---\n\nBody.\n"


def test_skill_frontmatter_is_compared_field_by_field() -> None:
    assert cc.parse_frontmatter(SKILL_MD) == {"name": "pdf-processing",
                                              "description": "Extract PDFs"}
    assert cc.parse_frontmatter("no frontmatter") is None
    cc.check_frontmatter(SKILL_MD, {"name": "pdf-processing", "description": "Extract PDFs"})
    with pytest.raises(cc.SkillRejected, match="description"):
        cc.check_frontmatter(SKILL_MD, {"name": "pdf-processing", "description": "Other"})
    with pytest.raises(cc.SkillRejected, match="extra"):
        cc.check_frontmatter(SKILL_MD, {"name": "pdf-processing", "description": "Extract PDFs",
                                        "extra": "x"})


def test_sample_arguments_fill_required_properties_by_type() -> None:
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string"},
            "count": {"type": "integer", "minimum": 3},
            "mode": {"type": "string", "enum": ["a", "b"]},
            "flag": {"type": "boolean", "default": False},
            "optional": {"type": "string"},
        },
        "required": ["region", "count", "mode", "flag"],
    }
    assert cc.sample_arguments(schema) == {"region": "conformance-region", "count": 3,
                                           "mode": "a", "flag": False}
