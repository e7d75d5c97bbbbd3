"""`mcpkit hub user …` / `mcpkit hub token …` as a user runs them: subprocesses with a temporary
data directory (the default SQLite database) or `--database-url` (PostgreSQL too)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio

from mcpkit.hub.store import Store


def hub(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPKIT_HUB_")}
    env["MCPKIT_HUB_DATA"] = str(data)
    return subprocess.run(
        [sys.executable, "-m", "mcpkit", "hub", *args],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def verify(database_url: str, secret: str) -> str | None:
    async def check() -> str | None:
        async with await Store.open(database_url) as store:
            user = await store.tokens.verify(secret)
            return None if user is None else user.name

    return anyio.run(check)


def test_the_default_database_lives_in_the_data_directory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert ok(hub(data, "user", "add", "alice")) == "user alice (id 1) added\n"
    assert ok(hub(data, "user", "add", "root", "--admin")) == "user root (id 2, admin) added\n"
    assert (data / "hub.db").stat().st_mode & 0o777 == 0o600
    assert data.stat().st_mode & 0o777 == 0o700
    listing = ok(hub(data, "user", "list")).splitlines()
    assert listing[0].split() == ["ID", "NAME", "ADMIN", "DISABLED", "CREATED"]
    assert [line.split()[:4] for line in listing[1:]] == [
        ["1", "alice", "no", "no"], ["2", "root", "yes", "no"]
    ]
    assert ok(hub(data, "user", "disable", "alice")) == "user alice disabled\n"
    assert ok(hub(data, "user", "disable", "alice", "--enable")) == "user alice enabled\n"


def test_tokens_are_printed_once_listed_without_secret_and_revoked(tmp_path: Path) -> None:
    data = tmp_path / "data"
    url = f"sqlite+aiosqlite:///{data / 'hub.db'}"
    ok(hub(data, "user", "add", "alice"))
    created = hub(data, "token", "create", "alice", "--name", "laptop", "--expires-days", "30")
    secret = ok(created).strip()
    assert secret.startswith("mcphub_") and "\n" not in secret
    assert "shown only now" in created.stderr and secret not in created.stderr
    assert verify(url, secret) == "alice"
    listing = ok(hub(data, "token", "list", "alice"))
    assert secret not in listing and secret[:12] + "…" in listing
    row = listing.splitlines()[1].split()
    assert row[:4] == ["1", "laptop", secret[:12] + "…", "active"]
    assert ok(hub(data, "token", "revoke", "1")) == "token 1 (laptop) revoked\n"
    assert "revoked" in ok(hub(data, "token", "list", "alice"))
    assert verify(url, secret) is None


ERRORS = [
    (["user", "add", "Not A Slug"], "name: must match"),
    (["user", "add", "alice"], "a user named 'alice' exists"),
    (["user", "disable", "nobody"], "user 'nobody' not found"),
    (["token", "create", "nobody"], "user 'nobody' not found"),
    (["token", "revoke", "99"], "token 99 not found"),
    (["user", "list", "--database-url", "mysql://u@h/db"], "SQLite or PostgreSQL"),
    (["user", "list", "--database-url", "postgresql://u@127.0.0.1:1/x"], "cannot open"),
]


def test_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    ok(hub(tmp_path, "user", "add", "alice"))
    for args, message in ERRORS:
        result = hub(tmp_path, *args)
        assert result.returncode == 2, args
        assert result.stdout == ""
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("mcpkit hub: error: "), lines
        assert message in lines[0]


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    for args in ([], ["user"], ["token", "create"], ["token", "create", "a", "--expires-days", "0"],
                 ["token", "revoke", "abc"]):
        result = hub(tmp_path, *args)
        assert result.returncode == 2, args
        assert "usage: mcpkit hub" in result.stderr


def test_the_commands_work_on_postgresql(database_url: str, tmp_path: Path) -> None:
    ok(hub(tmp_path, "user", "add", "alice", "--database-url", database_url))
    secret = ok(hub(tmp_path, "token", "create", "alice", "--database-url", database_url)).strip()
    assert verify(database_url, secret) == "alice"
    assert "alice" in ok(hub(tmp_path, "user", "list", "--database-url", database_url))
    if database_url.startswith("postgresql"):
        assert not (tmp_path / "hub.db").exists()  # nothing written to the default place


def test_oauth_rotate_key_adds_a_signing_key_each_time(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = ok(hub(data, "oauth", "rotate-key"))
    second = ok(hub(data, "oauth", "rotate-key"))
    kids = [line.split()[3].rstrip(";") for line in (first, second)]
    assert first.endswith("; retired: none\n") and second.endswith("; retired: none\n")

    async def stored() -> list[str]:
        async with await Store.open(f"sqlite+aiosqlite:///{data / 'hub.db'}") as store:
            return [record.kid for record in await store.oauth.signing_keys()]

    assert anyio.run(stored) == kids[::-1]  # newest first: the second one signs now
