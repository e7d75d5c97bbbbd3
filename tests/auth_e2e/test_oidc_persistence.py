"""Logins that outlive a process, against the real provider (tests/auth_e2e/stack.py), each
step a separate OS process (tests/auth_e2e/oidc_worker.py) sharing one file token store:

- a restart keeps the login: the next process calls the tool with no authorization, no
  registration and no code grant at the provider;
- eight processes that find one expired token at once refresh it once at the provider (its
  event log says so), and all eight end with the same new token, the grant never revoked;
- a logout revokes the refresh token at the provider (RFC 7009) and forgets the login: the
  next process has nothing to resume."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import msgspec
import pytest
from tests.auth_e2e.stack import Stack
from tests.procs import released_together

pytestmark = pytest.mark.anyio

PROCESSES = 8
WORKER_TIMEOUT_S = 60.0


def worker(stack: Stack, store: Path, action: str) -> list[str]:
    return [sys.executable, "-m", "tests.auth_e2e.oidc_worker", stack.resource, str(store),
            action]


async def run(stack: Stack, store: Path, action: str) -> tuple[int, dict[str, object], str]:
    with anyio.fail_after(WORKER_TIMEOUT_S):
        done = await anyio.run_process(worker(stack, store, action), check=False,
                                       env=dict(os.environ))
    lines = done.stdout.splitlines()
    report = msgspec.json.decode(lines[-1]) if done.returncode == 0 and lines else {}
    return done.returncode, report, done.stderr.decode()[-2000:]


async def ok(stack: Stack, store: Path, action: str) -> dict[str, object]:
    code, report, err = await run(stack, store, action)
    assert code == 0, err
    return report


async def test_a_restart_keeps_the_login(stack: Stack, tmp_path: Path) -> None:
    await ok(stack, tmp_path, "login")
    mark = stack.mark()
    for _ in range(2):
        assert (await ok(stack, tmp_path, "call"))["text"] == "read ok"
    for event in ("authorization.success", "registration_create.success"):
        assert not stack.events_since(mark, event)
    assert not stack.events_since(mark, "grant.success", grant_type="authorization_code")


async def test_eight_processes_refresh_one_expired_token_once(stack: Stack,
                                                              tmp_path: Path) -> None:
    stack.set_access_token_ttl(2)  # inside the 30 s refresh margin at once
    await ok(stack, tmp_path, "login")
    stack.set_access_token_ttl(3600)  # the refreshed token is good: nobody refreshes twice
    mark = stack.mark()
    reports = await released_together([*worker(stack, tmp_path, "call"), "--wait"],
                                      PROCESSES, WORKER_TIMEOUT_S)
    assert [r["text"] for r in reports] == ["read ok"] * PROCESSES
    assert len({r["token"] for r in reports}) == 1
    assert len(stack.events_since(mark, "grant.success", grant_type="refresh_token")) == 1
    assert not stack.events_since(mark, "grant.revoked")
    assert not stack.events_since(mark, "authorization.success")


async def test_logout_revokes_at_the_provider_and_forgets(stack: Stack,
                                                          tmp_path: Path) -> None:
    await ok(stack, tmp_path, "login")
    mark = stack.mark()
    report = await ok(stack, tmp_path, "logout")
    # the refresh token is revoked; the provider's JWT access tokens are self-contained
    # (unsupported_token_type: they expire on their own)
    assert report == {"removed": 1, "revoked": 1, "not_revoked": []}
    assert stack.events_since(mark, "refresh_token.destroyed")
    code, _, err = await run(stack, tmp_path, "call")
    assert code != 0 and "the stored login was not used" in err
    assert (await ok(stack, tmp_path, "logout"))["removed"] == 0  # twice: nothing left
