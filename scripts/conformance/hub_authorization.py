"""The official harness's authorization-server scenarios against the hub's issuer (issue 24):

    python scripts/conformance/hub_authorization.py [--keep-log]

Starts `mcpkit hub serve` on a free 127.0.0.1 port with a temporary data directory, adds a
user with a password (`mcpkit hub user set-password`, from stdin), registers a public client
by DCR whose redirect URI is the harness's callback, then runs
`harness.sh authorization --url <issuer> --client-id <id> --resource <issuer>/mcp -p PORT`.
When the harness prints the authorization URL (it asks a person to open it in a browser), the
script signs in and consents over plain HTTP (tests/hub/oauth_login.py) and delivers the
redirect to the harness's callback listener. Exit status: the harness's. Every process it
starts is stopped by its process group at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import anyio  # noqa: E402
from common import free_port, stop_group  # noqa: E402
from tests.hub.oauth_login import HubLogin  # noqa: E402

USER, PASSWORD = "conformance", "conformance password 1"
LIMIT_S = 180.0


def _env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPKIT_HUB_")}
    env["MCPKIT_HUB_DATA"] = str(data)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                      os.environ.get("PYTHONPATH")]))
    return env


def _hub(env: dict[str, str], *args: str, stdin: str = "") -> None:
    subprocess.run([sys.executable, "-m", "mcpkit", "hub", *args], input=stdin, text=True,
                   env=env, check=True, capture_output=True, timeout=60)


def _wait_for(url: str, limit_s: float = 30.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"the hub did not answer at {url}")


def _register(issuer: str, redirect_uri: str) -> str:
    body = json.dumps({"redirect_uris": [redirect_uri], "client_name": "conformance"}).encode()
    request = urllib.request.Request(issuer + "/oauth/register", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return str(json.load(reply)["client_id"])


def _drive(authorization_url: str, redirect_uri: str) -> None:
    """Sign in and consent, then hand the redirect to the harness's callback listener."""
    back = anyio.run(HubLogin(USER, PASSWORD, redirect_uri=redirect_uri), authorization_url)
    with urllib.request.urlopen(back, timeout=10) as reply:
        reply.read()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    used: set[int] = set()
    hub_port, callback_port = free_port(used), 0
    used.add(hub_port)
    callback_port = free_port(used)
    issuer = f"http://127.0.0.1:{hub_port}"
    redirect_uri = f"http://127.0.0.1:{callback_port}/callback"
    with tempfile.TemporaryDirectory(prefix="hub-authz-") as tmp:
        env = _env(Path(tmp))
        _hub(env, "user", "add", USER)
        _hub(env, "user", "set-password", USER, stdin=PASSWORD + "\n")
        hub = subprocess.Popen([sys.executable, "-m", "mcpkit", "hub", "serve", "--port",
                                str(hub_port), "--log-level", "warning"], env=env,
                               start_new_session=True, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        harness: subprocess.Popen[str] | None = None
        try:
            _wait_for(issuer + "/.well-known/oauth-authorization-server")
            client_id = _register(issuer, redirect_uri)
            harness = subprocess.Popen(
                ["bash", str(HERE / "harness.sh"), "authorization", "--url", issuer,
                 "--client-id", client_id, "--resource", issuer + "/mcp",
                 "-p", str(callback_port)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                start_new_session=True)
            timer = threading.Timer(LIMIT_S, harness.kill)
            timer.start()
            assert harness.stdout is not None
            for line in harness.stdout:
                print(line, end="", flush=True)
                if line.startswith(issuer + "/oauth/authorize?"):
                    threading.Thread(target=_drive, args=(line.strip(), redirect_uri),
                                     daemon=True).start()
            timer.cancel()
            return harness.wait()
        finally:
            if harness is not None and harness.poll() is None:
                stop_group(harness, what="harness")  # type: ignore[arg-type]
            stop_group(hub, what="hub")  # type: ignore[arg-type]


if __name__ == "__main__":
    raise SystemExit(main())
