"""A real Secret Service for the keyring tests: a private D-Bus session bus (`dbus-daemon
--session`) and Debian's gnome-keyring on it, headless, in a temp HOME, started and stopped
by the test (by PID). The login keyring is created unlocked with a throwaway password read
from stdin (`--unlock`; an empty password makes gnome-keyring ask a GUI prompter instead).

Without the binaries the tests skip locally, naming the install script, and fail in CI (the
`CI` variable set), like tests/services_fixtures.py; scripts/install_keyring.sh brings them."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

START_TIMEOUT_S = 20.0
"""Liveness bound: the bus and the keyring answer within this (normally well under 1 s)."""

BINARIES = ("dbus-daemon", "gnome-keyring-daemon")


@dataclass(frozen=True)
class SecretService:
    env: dict[str, str]
    """The environment of a process that uses this Secret Service (DBUS_SESSION_BUS_ADDRESS,
    HOME…), on top of os.environ."""

    def backend(self) -> Any:
        """keyring's SecretService backend (it connects to the bus in os.environ, so the test
        sets DBUS_SESSION_BUS_ADDRESS too)."""
        from keyring.backends.SecretService import Keyring

        return Keyring()


def require_binaries() -> None:
    missing = [name for name in BINARIES if shutil.which(name) is None]
    if not missing:
        return
    reason = (f"{', '.join(missing)} not installed: the keyring store tests need a real Secret "
              "Service; bring it in with: sudo bash scripts/install_keyring.sh")
    if os.environ.get("CI"):
        pytest.fail(f"CI must test the keyring for real: {reason}", pytrace=False)
    pytest.skip(reason)


@contextmanager
def secret_service(tmp: Path) -> Iterator[SecretService]:
    require_binaries()
    home = tmp / "home"
    runtime = tmp / "run"
    for directory in (home, runtime):
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    bus = subprocess.Popen(
        ["dbus-daemon", "--session", "--nofork", "--print-address=1", "--nopidfile"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    keyring_daemon: subprocess.Popen[bytes] | None = None
    try:
        assert bus.stdout is not None
        address = bus.stdout.readline().strip()
        if not address:
            pytest.fail("dbus-daemon printed no bus address", pytrace=False)
        env = {"DBUS_SESSION_BUS_ADDRESS": address, "HOME": str(home),
               "XDG_DATA_HOME": str(home / "data"), "XDG_RUNTIME_DIR": str(runtime),
               "XDG_CONFIG_HOME": str(home / "config")}
        keyring_daemon = subprocess.Popen(
            ["gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, **env}, start_new_session=True)
        assert keyring_daemon.stdin is not None
        keyring_daemon.stdin.write(b"mcpkit-test-keyring")  # the throwaway login password
        keyring_daemon.stdin.close()
        _wait_for_service(env)
        yield SecretService(env)
    finally:
        for process in (keyring_daemon, bus):
            if process is not None:
                _stop(process)


def _wait_for_service(env: dict[str, str]) -> None:
    """Until the Secret Service answers a write on the bus (gnome-keyring creates the login
    collection right after it claims its name), bounded by START_TIMEOUT_S."""
    probe = ("import keyring.backends.SecretService as s; k = s.Keyring(); "
             "k.set_password('mcpkit-probe', 'p', 'x'); k.delete_password('mcpkit-probe', 'p')")
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        done = subprocess.run([sys.executable, "-c", probe], env={**os.environ, **env},
                              capture_output=True, timeout=START_TIMEOUT_S, check=False)
        if done.returncode == 0:
            return
        if time.monotonic() > deadline:
            pytest.fail("gnome-keyring did not answer on the private bus within "
                        f"{START_TIMEOUT_S:g} s: {done.stderr.decode()[-500:]}", pytrace=False)
        time.sleep(0.1)


def _stop(process: subprocess.Popen[Any]) -> None:
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)
    for pipe in (process.stdout, process.stdin):
        if pipe is not None:
            pipe.close()
