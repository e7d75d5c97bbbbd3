"""Hub account passwords (mcpkit.hub.passwords) and `mcpkit hub user set-password`, which
reads the password from stdin (never argv) and stores only its argon2id hash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.hub.passwords import (
    MAX_PASSWORD_BYTES,
    MIN_PASSWORD_CHARS,
    PasswordRefused,
    hash_password,
    password_matches,
)
from mcpkit.hub.store import Store

PASSWORDS = st.text(min_size=MIN_PASSWORD_CHARS, max_size=40).filter(
    lambda text: len(text.encode("utf-8", "surrogatepass")) <= MAX_PASSWORD_BYTES
    and text.encode("utf-8", "replace") == text.encode("utf-8", "surrogatepass"))


@settings(max_examples=5, deadline=None)  # each hash costs argon2's memory and time
@given(PASSWORDS, PASSWORDS)
def test_a_password_matches_its_hash_and_no_other(password: str, other: str) -> None:
    stored = hash_password(password)
    assert stored.startswith("$argon2id$") and password not in stored
    assert password_matches(stored, password)
    assert password_matches(stored, other) is (other == password)


def test_the_bounds_are_enforced() -> None:
    with pytest.raises(PasswordRefused, match="at least"):
        hash_password("short")
    with pytest.raises(PasswordRefused, match=f"at most {MAX_PASSWORD_BYTES} bytes"):
        hash_password("x" * (MAX_PASSWORD_BYTES + 1))
    stored = hash_password("x" * MAX_PASSWORD_BYTES)
    assert password_matches(stored, "x" * MAX_PASSWORD_BYTES)
    assert not password_matches(stored, "x" * (MAX_PASSWORD_BYTES + 1))  # not even hashed


def test_no_stored_hash_never_matches() -> None:
    # an unknown user or one without a password: checked against a decoy, never a match
    assert not password_matches(None, "mcpkit-hub decoy password")
    assert not password_matches("not a hash", "anything at all")


def _hub(data: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPKIT_HUB_")}
    env["MCPKIT_HUB_DATA"] = str(data)
    return subprocess.run([sys.executable, "-m", "mcpkit", "hub", *args], input=stdin,
                          capture_output=True, text=True, timeout=60, env=env, check=False)


def test_set_password_reads_stdin_and_stores_only_the_hash(tmp_path: Path) -> None:
    secret = "correct horse battery staple"
    assert _hub(tmp_path, "user", "add", "ada").returncode == 0
    done = _hub(tmp_path, "user", "set-password", "ada", stdin=secret + "\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "user ada: password set\n" and secret not in done.stderr

    async def stored() -> str | None:
        async with await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}") as store:
            found = await store.users.sign_in_record("ada")
            assert found is not None
            return found[1]

    hashed = anyio.run(stored)
    assert hashed is not None and secret not in hashed and password_matches(hashed, secret)
    assert secret.encode() not in (tmp_path / "hub.db").read_bytes()

    short = _hub(tmp_path, "user", "set-password", "ada", stdin="short\n")
    assert short.returncode == 2 and "at least" in short.stderr
    removed = _hub(tmp_path, "user", "set-password", "ada", "--remove")
    assert removed.returncode == 0 and anyio.run(stored) is None
    unknown = _hub(tmp_path, "user", "set-password", "nobody", stdin=secret + "\n")
    assert unknown.returncode == 2


@pytest.mark.parametrize("module", ["mcpkit.hub.oauth", "mcpkit.hub.oauth.routes",
                                    "mcpkit.hub.passwords", "mcpkit.hub.store.oauth"])
def test_the_oauth_modules_import_first(module: str) -> None:
    """Each imports on its own, before the API (no import circle through mcpkit.hub.api)."""
    done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def test_the_oauth_settings_are_checked_and_read_from_the_environment() -> None:
    from mcpkit.hub.settings import HubSettings, SettingsError

    read = HubSettings.from_env({"MCPKIT_HUB_OAUTH_MAX_PASSWORD_CHECKS": "2",
                                 "MCPKIT_HUB_OAUTH_ACCESS_TOKEN_TTL_S": "60",
                                 "MCPKIT_HUB_OAUTH_REVOCATION_CHECK_S": "2.5",
                                 "MCPKIT_HUB_OAUTH_SIGNING_KEY_CHECK_S": "30",
                                 "MCPKIT_HUB_PUBLIC_URL": "https://hub.example.com/"})
    assert read.oauth_max_password_checks == 2 and read.oauth_access_token_ttl_s == 60
    assert read.oauth_revocation_check_s == 2.5 and read.oauth_signing_key_check_s == 30
    assert read.issuer == "https://hub.example.com"
    assert read.mcp_url == "https://hub.example.com/mcp"
    assert HubSettings(host="::1", port=9).issuer == "http://[::1]:9"
    for bad in ({"oauth_max_password_checks": 0}, {"oauth_code_ttl_s": -1.0},
                {"public_url": "ftp://hub"}, {"public_url": "https://hub/?x=1"},
                {"oauth_revocation_check_s": 0.0}, {"oauth_signing_key_check_s": -1.0},
                # a login's refresh tokens (what revokes its access tokens) must outlive them
                {"oauth_access_token_ttl_s": 600.0, "oauth_refresh_token_ttl_s": 600.0}):
        with pytest.raises(SettingsError):
            HubSettings(**bad)  # type: ignore[arg-type]
