"""Two `mcpkit hub serve` processes sharing PostgreSQL and Redis behind a round-robin
balancer: one MCP session alternates between them (legacy and modern), questions asked by
one replica are answered through the other, and when one replica is killed the session goes
on at the survivor. Also: a hub SIGKILLed during writes restarts with its registry intact."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.hub.hub_helpers import Api, Hub, call, fresh_user
from tests.hub.router.balancer import running_balancer
from tests.hub.router.support import register, text, upstream
from tests.procs import free_port, stop_process, wait_for_port

from mcpkit import Client
from mcpkit.client import Responders, Timeouts
from mcpkit.hub.crypto import SecretBox, generate_key
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Store

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[3]


@contextlib.contextmanager
def hub_process(database_url: str, key: str, data: Path, *, redis_url: str | None = None
                ) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    command = [sys.executable, "-m", "mcpkit", "hub", "serve", "--port", str(port),
               "--database-url", database_url, "--data-dir", str(data),
               "--allow-private-upstreams", "--log-level", "warning"]
    if redis_url:
        command += ["--redis-url", redis_url]
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)]))
    env = {**os.environ, "MCPKIT_HUB_SECRET_KEY": key, "PYTHONPATH": path}
    proc = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        wait_for_port(proc, port)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        stop_process(proc)


async def seed_admin(database_url: str, box: SecretBox) -> str:
    """Migrate the database, add an admin and return a token of theirs."""
    async with await Store.open(database_url, box) as store:
        user = await store.users.create("root", is_admin=True)
        return (await store.tokens.create(user.id, name="tests")).secret


async def model(params: Any) -> dict[str, Any]:
    return {"role": "assistant", "model": "m",
            "content": {"type": "text", "text": "forty-two"}}


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_one_session_alternates_between_replicas_and_outlives_one(
        postgres_db: Any, redis_server: Any, tmp_path: Path, era: str) -> None:
    key = generate_key()
    database_url = postgres_db.url
    admin = await seed_admin(database_url, SecretBox([key]))
    with contextlib.ExitStack() as stack:
        first, first_proc = stack.enter_context(
            hub_process(database_url, key, tmp_path / "a", redis_url=redis_server.url))
        second, _ = stack.enter_context(
            hub_process(database_url, key, tmp_path / "b", redis_url=redis_server.url))
        port = free_port()
        balancer = stack.enter_context(running_balancer([first, second], port))
        up = stack.enter_context(upstream("shared", legacy_only=True))
        front = f"http://127.0.0.1:{port}"
        hub = Hub(front, admin, database_url, HubSettings(), SecretBox([key]))
        _user, api = await fresh_user(hub)
        await register(api, "shared", up.url)
        async with Client(
            f"{front}/mcp",
            bearer_token=api.token,
            era=era,
            timeouts=Timeouts(timeout=20),
            responders=Responders(sampling=model),
        ) as client:
            before = dict(balancer.hits)
            for index in range(6):
                result = await client.call_tool("shared__echo", {"text": str(index)})
                assert text(result) == f"shared: {index}"
            assert {tool.name for tool in await client.list_tools()} >= {"shared__echo"}
            for _ in range(2):  # answered through whichever replica the balancer picks
                asked = await client.call_tool("shared__ask_model", {"question": "?"})
                assert text(asked) == "model said: forty-two"
            used = {backend for backend in balancer.hits if balancer.hits[backend]
                    > before.get(backend, 0)}
            assert used == {first, second}, balancer.hits

            # One replica dies in the middle of a call; the session goes on at the other.
            # The call itself ends promptly either way: answered (it was on the survivor) or
            # failed (its stream cannot be resumed elsewhere: 410), never left waiting.
            ended = anyio.Event()

            async def doomed_call() -> None:
                with contextlib.suppress(Exception):
                    await client.call_tool("shared__slow", {"seconds": 3, "steps": 3})
                ended.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(doomed_call)
                await anyio.sleep(0.5)
                first_proc.send_signal(signal.SIGKILL)
                first_proc.wait(10)
                with anyio.fail_after(30):
                    for index in range(4):
                        result = await client.call_tool("shared__echo", {"text": f"s{index}"})
                        assert text(result) == f"shared: s{index}"
                with anyio.fail_after(15):
                    await ended.wait()


async def test_a_hub_killed_during_writes_keeps_its_registry(tmp_path: Path) -> None:
    """Registrations acknowledged (201) before a SIGKILL are all there after a restart, and
    the database accepts writes again."""
    key = generate_key()
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    admin = await seed_admin(database_url, SecretBox([key]))
    acknowledged: list[str] = []
    enough = anyio.Event()
    with hub_process(database_url, key, tmp_path / "data") as (url, proc):
        hub = Hub(url, admin, database_url, HubSettings(), SecretBox([key]))
        _user, api = await fresh_user(hub)

        async def writer(worker: int) -> None:
            for index in range(1000):
                name = f"w{worker}-{index}"
                try:
                    reply = await api.post("/api/v1/users/mcp/upstreams", {
                        "name": name, "url": f"http://127.0.0.1:9/{name}",
                        "transport": "http", "headers": {"X-Secret": "s3cret"}})
                except Exception:
                    return  # the hub is gone
                if reply.status == 201:
                    acknowledged.append(name)
                    if len(acknowledged) >= 40:
                        enough.set()

        async with anyio.create_task_group() as tg:
            for worker in range(4):
                tg.start_soon(writer, worker)
            with anyio.fail_after(60):
                await enough.wait()
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
    with hub_process(database_url, key, tmp_path / "data") as (url, _proc):
        hub = Hub(url, admin, database_url, HubSettings(), SecretBox([key]))
        again = Api(hub, api.token, api.user_id)
        names: set[str] = set()
        cursor: str | None = None
        for _page in range(100):
            query = "?limit=200" + (f"&cursor={cursor}" if cursor else "")
            page = await again.get(f"/api/v1/users/mcp/upstreams{query}")
            assert page.status == 200, page.text
            names |= {item["name"] for item in page.body["items"]}
            cursor = page.body["next_cursor"]
            if cursor is None:
                break
        assert set(acknowledged) <= names
        fresh = await again.post("/api/v1/users/mcp/upstreams", {
            "name": "after-restart", "url": "http://127.0.0.1:9/x", "transport": "http"})
        assert fresh.status == 201, fresh.text
        health = await call("GET", f"{url}/readyz")
        assert health.status == 200
