"""`mcpkit hub serve` as an operator runs it: a real process with a temporary data directory,
users and tokens made with the admin commands, an upstream registered over HTTP and listed;
its start-up errors (one line, exit 2), the generated key file, graceful shutdown that lets a
request in flight finish; HubSettings from options and MCPKIT_HUB_*; and `import mcpkit`
staying free of the hub's dependencies."""

from __future__ import annotations

import argparse
import ast
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from tests import stream_after_stop as stop_race
from tests.hub.hub_helpers import UPSTREAMS, Upstream, call, echo_server
from tests.procs import free_port, stop_process, wait_for_port

from mcpkit import Client
from mcpkit.hub.settings import HubSettings, SettingsError

STOP_BOUND_S = 10.0
"""How soon a hub with connected clients exits after SIGTERM (its grace is 30 s)."""

pytestmark = pytest.mark.anyio


def hub_env(data: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPKIT_HUB_")}
    env["MCPKIT_HUB_DATA"] = str(data)
    env.update(extra)
    return env


def hub_command(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcpkit", "hub", *args], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def start_serve(env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "mcpkit", "hub", "serve", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@contextlib.contextmanager
def serving_with_a_user(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], str, str]]:
    """`mcpkit hub serve` on a free port with the user dave: (the process, its /mcp URL,
    dave's API token); stopped after (its output left for the test to read)."""
    env = hub_env(tmp_path)
    assert hub_command(env, "user", "add", "dave").returncode == 0
    token = hub_command(env, "token", "create", "dave").stdout.strip()
    port = free_port()
    proc = start_serve(env, "--port", str(port))
    try:
        wait_for_port(proc, port, timeout=30)
        yield proc, f"http://127.0.0.1:{port}/mcp", token
    finally:
        stop_process(proc)


@pytest.fixture(scope="module")
def echo() -> Iterator[Upstream]:
    with echo_server() as upstream:
        yield upstream


async def test_serve_register_an_upstream_and_list_its_tools(
    tmp_path: Path, echo: Upstream
) -> None:
    data = tmp_path / "data"
    env = hub_env(data)
    assert hub_command(env, "user", "add", "alice").returncode == 0
    token = hub_command(env, "token", "create", "alice").stdout.strip()
    port = free_port()
    proc = start_serve(env, "--port", str(port), "--allow-private-upstreams")
    try:
        wait_for_port(proc, port, timeout=30)
        base = f"http://127.0.0.1:{port}"
        assert (await call("GET", base + "/readyz")).body == {"status": "ready"}
        created = await call("POST", base + UPSTREAMS, token=token,
                             json={"name": "echo", "url": echo.url, "bearer_token": "b" * 20})
        assert created.status == 201, created.text
        tools = await call("GET", f"{base}{UPSTREAMS}/{created.body['id']}/tools?refresh=true",
                           token=token)
        assert [tool["name"] for tool in tools.body["items"]] == ["echo"]
        assert (await call("GET", base + "/api/v1/users/me")).status == 401
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        _out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err.decode()
    log = err.decode()
    assert f"mcpkit hub on http://127.0.0.1:{port}" in log
    assert "upstreams: private addresses allowed" in log
    assert token not in log and "b" * 20 not in log  # no secret in the logs
    key = data / "secret.key"  # generated once, owner-only
    assert key.stat().st_mode & 0o777 == 0o600
    assert (data / "hub.db").exists()


async def test_the_key_comes_from_the_environment_and_upstreams_stay_readable(
    tmp_path: Path, echo: Upstream
) -> None:
    """Stop and start again with the same MCPKIT_HUB_SECRET_KEY: the registry and its sealed
    credentials survive; no key file is written."""
    from mcpkit.hub.crypto import generate_key

    data = tmp_path / "data"
    env = hub_env(data, MCPKIT_HUB_SECRET_KEY=generate_key())
    hub_command(env, "user", "add", "bob")
    token = hub_command(env, "token", "create", "bob").stdout.strip()
    port = free_port()
    upstream_id = ""
    for run in range(2):
        proc = start_serve(env, "--port", str(port), "--allow-private-upstreams")
        try:
            wait_for_port(proc, port, timeout=30)
            base = f"http://127.0.0.1:{port}{UPSTREAMS}"
            if run == 0:
                created = await call("POST", base, token=token, json={
                    "name": "echo", "url": echo.url, "headers": {"X-Key": "k" * 20}})
                upstream_id = created.body["id"]
            again = await call("POST", f"{base}/{upstream_id}/refresh", token=token)
            assert again.status == 200 and again.body["headers"] == {"X-Key": "…kkkk"}
        finally:
            stop_process(proc)
            proc.communicate(timeout=5)
    assert not (data / "secret.key").exists()


def test_start_up_errors_are_one_line_and_exit_2(tmp_path: Path) -> None:
    env = hub_env(tmp_path)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    taken = busy.getsockname()[1]
    try:
        cases = [
            (["--database-url", "mysql://u@h/db"], "SQLite or PostgreSQL"),
            (["--database-url", "postgresql://u@127.0.0.1:1/x"], "cannot open the database"),
            (["--port", "70000"], "port"),
            (["--port", str(taken)], None),
        ]
        for args, message in cases:
            result = hub_command(env, "serve", *args)
            assert result.returncode == 2, (args, result.stderr)
            if message is not None:
                lines = result.stderr.strip().splitlines()
                assert lines[-1].startswith("mcpkit hub: error: ") and message in lines[-1], \
                    result.stderr
    finally:
        busy.close()
    bad_env = hub_command(hub_env(tmp_path, MCPKIT_HUB_PORT="eighty"), "serve")
    assert bad_env.returncode == 2 and "MCPKIT_HUB_PORT" in bad_env.stderr
    bad_key = hub_command(hub_env(tmp_path, MCPKIT_HUB_SECRET_KEY="nope"), "serve")
    assert bad_key.returncode == 2 and "MCPKIT_HUB_SECRET_KEY" in bad_key.stderr


def test_sigterm_lets_a_request_in_flight_finish(tmp_path: Path) -> None:
    """An upstream that takes a second to fail; SIGTERM arrives while the hub waits for it:
    the client still gets its whole answer (502), then the hub exits 0."""
    env = hub_env(tmp_path)
    hub_command(env, "user", "add", "carol")
    token = hub_command(env, "token", "create", "carol").stdout.strip()
    slow = socket.socket()
    slow.bind(("127.0.0.1", 0))
    slow.listen()
    slow_port = slow.getsockname()[1]
    accepted: list[socket.socket] = []

    def linger() -> None:  # accept, say nothing for a second, hang up
        slow.settimeout(10)
        try:
            connection, _ = slow.accept()
        except OSError:
            return
        accepted.append(connection)
        time.sleep(1.0)
        connection.close()

    waiter = threading.Thread(target=linger, daemon=True)
    waiter.start()
    port = free_port()
    proc = start_serve(env, "--port", str(port), "--allow-private-upstreams")
    try:
        wait_for_port(proc, port, timeout=30)
        base = f"http://127.0.0.1:{port}{UPSTREAMS}"

        async def scenario() -> tuple[int, str]:
            created = await call("POST", base, token=token, json={
                "name": "slow", "url": f"http://127.0.0.1:{slow_port}/mcp",
                "connect_timeout_s": 5, "call_timeout_s": 5})
            assert created.status == 201, created.text
            result: dict[str, tuple[int, str]] = {}

            async def refresh() -> None:
                reply = await call("POST", f"{base}/{created.body['id']}/refresh", token=token)
                result["reply"] = (reply.status, reply.text)

            async with anyio.create_task_group() as group:
                group.start_soon(refresh)
                with anyio.fail_after(10):
                    while not accepted:  # noqa: ASYNC110 (a thread sets it)
                        await anyio.sleep(0.02)
                os.kill(proc.pid, signal.SIGTERM)
            return result["reply"]

        status, text = anyio.run(scenario)
        assert status == 502 and "upstream_unavailable" in text
        proc.wait(timeout=15)
        assert proc.returncode == 0
    finally:
        stop_process(proc)
        proc.communicate(timeout=5)
        slow.close()
        waiter.join(5)


async def test_sigterm_does_not_wait_on_connected_clients_streams(tmp_path: Path) -> None:
    """Two MCP clients hold SSE streams open (legacy: the session's GET stream, modern: the
    listen stream): SIGTERM ends the streams first, so the hub exits 0 well within its 30 s
    grace (it used to wait out the whole grace on the open streams)."""
    with serving_with_a_user(tmp_path) as (proc, url, token):
        async with Client(url, bearer_token=token, era="legacy") as legacy, \
                Client(url, bearer_token=token, era="modern") as modern:
            assert await legacy.list_tools() == [] and await modern.list_tools() == []
            await modern.listen()
            os.kill(proc.pid, signal.SIGTERM)
            with anyio.fail_after(STOP_BOUND_S):  # a liveness bound, far below the grace
                while proc.poll() is None:  # noqa: ASYNC110 (another process)
                    await anyio.sleep(0.05)
        assert proc.returncode == 0
    proc.communicate(timeout=5)


async def test_a_listen_stream_asked_for_once_stopping_is_ended_at_once(tmp_path: Path) -> None:
    """A `subscriptions/listen` request that reaches the hub just after SIGTERM
    (tests/stream_after_stop.py makes the timing exact) is acknowledged and ended at once
    with its result, and the hub exits well within its 30 s grace. Before, it missed the
    "end every stream" step and was held until the grace ran out (the flaky test above)."""
    with serving_with_a_user(tmp_path) as (proc, url, token):
        async with stop_race.one_connection(token) as http:
            await stop_race.modern_ping(http, url)
            body, headers = stop_race.modern_listen()
            answer = await stop_race.post_while_stopping(proc, http, url, body, headers)
        stop_race.assert_listen_ended(answer, body["id"])
        assert await stop_race.wait_exit(proc, STOP_BOUND_S) == 0
    _out, err = proc.communicate(timeout=5)
    assert b"graceful shutdown exceeded" not in err, err.decode()


# --- settings ---------------------------------------------------------------------------------


def test_settings_from_defaults_environment_and_options(tmp_path: Path) -> None:
    defaults = HubSettings.from_env({})
    assert (defaults.host, defaults.port) == ("127.0.0.1", 8765)
    assert not defaults.allow_private_upstreams and not defaults.allow_stdio
    environ = {
        "MCPKIT_HUB_PORT": "9000", "MCPKIT_HUB_HOST": "0.0.0.0",
        "MCPKIT_HUB_ALLOW_PRIVATE_UPSTREAMS": "yes", "MCPKIT_HUB_DATA": str(tmp_path),
        "MCPKIT_HUB_MAX_BODY_BYTES": "2048", "MCPKIT_HUB_REDIS_URL": "redis://127.0.0.1:6379/0",
        "MCPKIT_HUB_HEALTH_INTERVAL": "15", "MCPKIT_HUB_RATE_LIMIT": "100",
    }
    from_env = HubSettings.from_env(environ)
    assert from_env.port == 9000 and from_env.host == "0.0.0.0"
    assert from_env.allow_private_upstreams and from_env.max_body_bytes == 2048
    assert from_env.redis_url == "redis://127.0.0.1:6379/0"
    assert from_env.health_interval_s == 15.0 and from_env.rate_limit_per_minute == 100
    assert from_env.resolved_database_url == f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    args = argparse.Namespace(host=None, port=9100, database_url="postgresql://u:pw@db/hub",
                              allow_private_upstreams=False, allow_stdio=True, redis_url=None,
                              log_level=None, data_dir=tmp_path / "other")
    merged = HubSettings.from_args(args, environ)
    assert merged.port == 9100 and merged.host == "0.0.0.0"  # the option wins, else the env
    assert merged.allow_private_upstreams  # an absent flag does not turn the env's off
    assert merged.allow_stdio and merged.database_url == "postgresql://u:pw@db/hub"
    assert "pw" not in merged.describe() and "db/hub" in merged.describe()
    assert merged.data_dir == tmp_path / "other"
    for bad in ({"MCPKIT_HUB_PORT": "x"}, {"MCPKIT_HUB_PORT": "70000"},
                {"MCPKIT_HUB_ALLOW_STDIO": "perhaps"}, {"MCPKIT_HUB_PAGE_SIZE": "0"},
                {"MCPKIT_HUB_DNS_TIMEOUT": "nan"}, {"MCPKIT_HUB_MAX_PAGE_SIZE": "10000"}):
        with pytest.raises(SettingsError):
            HubSettings.from_env(bad)


def test_allowed_hosts_and_origins_from_the_environment_and_options() -> None:
    environ = {"MCPKIT_HUB_ALLOWED_HOSTS": "hub.example.com, hub.internal:8443,",
               "MCPKIT_HUB_ALLOWED_ORIGINS": "https://app.example.com"}
    from_env = HubSettings.from_env(environ)
    assert from_env.allowed_hosts == ("hub.example.com", "hub.internal:8443")
    assert from_env.allowed_origins == ("https://app.example.com",)
    args = argparse.Namespace(allowed_hosts=["proxy.example.com"], allowed_origins=None)
    merged = HubSettings.from_args(args, environ)  # the repeated option wins over the env
    assert merged.allowed_hosts == ("proxy.example.com",)
    assert merged.allowed_origins == ("https://app.example.com",)
    assert HubSettings.from_env({}).allowed_hosts == ()  # loopback only
    with pytest.raises(SettingsError, match="allowed_hosts"):
        HubSettings(allowed_hosts=("two words",))


SERVER_GC_PROBE = """
import asyncio, gc, sys, uvicorn
from mcpkit.hub.serve import GC_THRESHOLDS, graceful_server_class

async def app(scope, receive, send):
    pass

async def main():
    config = uvicorn.Config(app, host="127.0.0.1", port=int(sys.argv[1]), lifespan="off",
                            log_level="warning")
    server = graceful_server_class()(config)
    before = gc.get_threshold()
    serving = asyncio.ensure_future(server.serve())
    for _ in range(500):
        if server.started:
            break
        await asyncio.sleep(0.01)
    print(repr((before, gc.get_threshold(), GC_THRESHOLDS, gc.get_freeze_count() > 0)))
    server.should_exit = True
    await asyncio.wait_for(serving, 10)

asyncio.run(main())
"""


def test_the_served_process_freezes_start_up_and_collects_less_often() -> None:
    """In a process of its own: what the server does to the collector is for the whole
    process, so never in the test runner's."""
    done = subprocess.run([sys.executable, "-c", SERVER_GC_PROBE, str(free_port())],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    before, after, wanted, frozen = ast.literal_eval(done.stdout.strip())
    assert after == wanted == (10_000, 20, 20) and before != after
    assert frozen  # start-up's objects left the collector's generations


def test_import_mcpkit_loads_none_of_the_hubs_dependencies() -> None:
    code = (
        "import sys, mcpkit, mcpkit.cli, mcpkit.hub, mcpkit.hub.cli, mcpkit.hub.settings;"
        "mcpkit.cli.build_parser();"
        "print(sorted(m for m in ('fastapi', 'pydantic', 'sqlalchemy', 'alembic', 'starlette',"
        " 'cryptography', 'schemathesis') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout


async def test_on_port_0_the_oauth_issuer_is_the_bound_address(tmp_path: Path) -> None:
    """Without --public-url the issuer is the URL the hub listens on, as bound: with --port 0
    it names the port the system picked, in the metadata and in /mcp's challenge."""
    proc = start_serve(hub_env(tmp_path / "data"), "--port", "0")
    try:
        assert proc.stderr is not None
        first = ""
        for _ in range(200):  # the start-up lines; the URL is on the first summary line
            first = proc.stderr.readline().decode()
            if first.startswith("mcpkit hub on ") or not first:
                break
        base = first.split()[3]
        assert base.startswith("http://127.0.0.1:") and not base.endswith(":0"), first
        metadata = await call("GET", base + "/.well-known/oauth-authorization-server")
        assert metadata.body["issuer"] == base
        refused = await call("POST", base + "/mcp", json={"jsonrpc": "2.0", "id": 1,
                                                         "method": "ping"})
        assert (f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"'
                in refused.headers["WWW-Authenticate"])
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=15)
    assert proc.returncode == 0
