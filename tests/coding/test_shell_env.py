"""`bash` gets a deny-by-default environment: the harmless allow-list, plus only what the
operator passes (`--pass-env`, `--env`, `CodingEnv.pass_env` / `set_env`). Random variables
in the server's environment never reach a real command unless allow-listed or passed."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.coding.processes import tree_env

from mcpkit import Client
from mcpkit.client import ConnectOptions
from mcpkit.coding import shell
from mcpkit.coding.env import CodingEnv
from mcpkit.coding.scope import Scopes
from mcpkit.coding.server import build_server
from mcpkit.coding.workspace import Workspace

pytestmark = pytest.mark.anyio

SECRETS = {
    "DATABASE_URL": "postgres://app:s3cret-pw@db.internal/app",
    "OPENAI_KEY": "sk-proj-0123456789",
    "STRIPE_KEY": "sk_live_0123456789",
    "GH_PAT": "ghp_0123456789abcdef",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T000/B000/XXXX",
    "HTTPS_PROXY": "http://user:pw@proxy:3128",
    "MCPKIT_SERVE_TOKEN": "serve-token",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
}


def parse_env(dump: str) -> dict[str, str]:
    """`env -0` output (NUL-separated NAME=VALUE; values may hold newlines)."""
    found = {}
    for item in dump.split("\0"):
        name, eq, value = item.partition("=")
        if eq:
            found[name] = value
    return found


async def command_environment(client: Client) -> dict[str, str]:
    with anyio.fail_after(30):
        result = await client.call_tool("bash", {"command": "env -0"})
    assert result.structured_content["exit_code"] == 0
    return parse_env(result.structured_content["output"])


def serve(root: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "mcpkit", "serve", "--transport", "stdio", "--workspace",
            str(root), *flags]


async def test_named_secrets_never_reach_bash(tmp_path: Path) -> None:
    async with Client(
        serve(tmp_path),
        connect=ConnectOptions(env=tree_env(**SECRETS, TZ="UTC", LC_TIME="C")),
    ) as c:
        seen = await command_environment(c)
    assert not set(SECRETS) & set(seen)
    assert not any(value in "\0".join(seen.values()) for value in SECRETS.values())
    assert seen["TZ"] == "UTC" and seen["LC_TIME"] == "C"  # allow-listed ones do
    assert "PATH" in seen and seen["GIT_TERMINAL_PROMPT"] == "0"


async def test_operator_passes_variables_explicitly(tmp_path: Path) -> None:
    flags = ("--pass-env", "GH_PAT", "--pass-env", "MYAPP_*", "--pass-env", "MCPKIT_SERVE_*",
             "--env", "DATABASE_URL=sqlite:///dev.db", "--env", "EMPTY=")
    environment = tree_env(**SECRETS, MYAPP_MODE="dev", MYAPP_LEVEL="3")
    async with Client(serve(tmp_path, *flags), connect=ConnectOptions(env=environment)) as c:
        seen = await command_environment(c)
    assert seen["GH_PAT"] == SECRETS["GH_PAT"]
    assert seen["MYAPP_MODE"] == "dev" and seen["MYAPP_LEVEL"] == "3"
    assert seen["DATABASE_URL"] == "sqlite:///dev.db" and seen["EMPTY"] == ""
    assert "MCPKIT_SERVE_TOKEN" not in seen  # never through a pattern
    assert not {"OPENAI_KEY", "STRIPE_KEY", "SLACK_WEBHOOK_URL", "HTTPS_PROXY"} & set(seen)


def test_env_flag_needs_name_and_value(tmp_path: Path) -> None:
    import subprocess

    out = subprocess.run(serve(tmp_path, "--env", "NOEQUALS"), capture_output=True,
                         text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and "NAME=VALUE" in out.stderr


NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,30}", fullmatch=True)
VALUES = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                 max_size=40)
ENVIRONMENTS = st.dictionaries(NAMES, VALUES, max_size=12)


@settings(max_examples=100, deadline=None)
@given(base=ENVIRONMENTS, passed=st.lists(NAMES, max_size=3),
       values=st.dictionaries(NAMES, VALUES, max_size=3))
def test_only_allowed_or_passed_names_survive(base: dict[str, str], passed: list[str],
                                              values: dict[str, str]) -> None:
    result = shell.scrubbed_env(base, pass_env=tuple(passed), set_env=values)
    for name, value in result.items():
        if name in values:
            assert value == values[name]
        elif name in shell.COMMAND_DEFAULTS and name not in base:
            assert value == shell.COMMAND_DEFAULTS[name]
        else:
            assert shell.is_safe_name(name) or (name in passed
                                                and name not in shell.NEVER_PASSED)
            assert value == base[name]
    for name in base:
        if shell.is_safe_name(name) or name in passed:
            assert name in result


SET_BY_BASH = frozenset({"PWD", "OLDPWD", "SHLVL", "_"}) | set(shell.COMMAND_DEFAULTS)


def harmless(name: str) -> bool:
    """Names a random test may set in this process (the command must still run, and bash
    sets a few itself)."""
    return (not shell.is_safe_name(name) and name not in SET_BY_BASH
            and not name.startswith(("PYTHON", "MCPKIT_", "BASH")))


PRINTABLE = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=40)
"""Values a command prints back unchanged (no control characters: escapes are stripped)."""
ALLOWED_RANDOM = st.builds(lambda suffix: "LC_" + suffix,
                           st.from_regex(r"[A-Z]{1,8}", fullmatch=True))


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret=st.dictionaries(NAMES.filter(harmless), VALUES, min_size=1, max_size=8),
       allowed=st.dictionaries(ALLOWED_RANDOM, PRINTABLE, max_size=2),
       passed=st.lists(NAMES.filter(harmless), max_size=2))
async def test_random_server_variables_never_reach_a_real_command(
    tmp_path: Path, secret: dict[str, str], allowed: dict[str, str], passed: list[str]
) -> None:
    passed_values = {name: f"passed-{i}" for i, name in enumerate(passed)}
    environment: dict[str, Any] = {**secret, **allowed, **passed_values}
    env = CodingEnv(Workspace.at(tmp_path), Scopes(tmp_path / ".out"),
                    pass_env=tuple(passed))
    with mock.patch.dict(os.environ, environment):
        async with Client(build_server(env)) as c:
            seen = await command_environment(c)
    for name in secret:
        if name in passed_values:
            assert seen.get(name) == passed_values[name]
        else:
            assert name not in seen, f"{name} reached the command"
    for name, value in allowed.items():
        assert seen.get(name) == value
