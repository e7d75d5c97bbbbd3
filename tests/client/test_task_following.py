"""`Client.call_tool` follows a tool that must run as a task, in both eras, with no
hand-written request: the modern Tasks extension against mcpkit's own server (stdio and
Streamable HTTP), the 2025-11-25 `tasks` utility against the official TypeScript SDK's
server-everything (task augmentation, `tasks/get` polls, the question asked through
`tasks/result`, `tasks/cancel` when the caller gives up, the poll bound)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.interop.client_peers import EVERYTHING, needs_node_package, node_peer
from tests.procs import free_port, mcp_http_server

from mcpkit.client import Client, Limits, Responders, ServerError
from mcpkit.client import era as era_cache
from mcpkit.client.legacy_tasks import TaskPollLimit
from mcpkit.protocol import types
from mcpkit.protocol.versions import Era

pytestmark = pytest.mark.anyio
ASKING = str(Path(__file__).parent.parent / "manager" / "asking_server.py")
RESEARCH = "simulate-research-query"


@pytest.fixture(autouse=True)
def _fresh_era_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(era_cache, "_CACHE", {})


@pytest.fixture(scope="module")
def asking_http() -> Iterator[str]:
    port = free_port()
    with mcp_http_server([sys.executable, ASKING, "--http", str(port)], port) as url:
        yield url


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_required_task_is_followed_in_the_modern_era(
        transport: str, request: pytest.FixtureRequest) -> None:
    target: Any = ([sys.executable, ASKING] if transport == "stdio"
                   else request.getfixturevalue("asking_http"))
    async with Client(target) as client:  # tasks=False: declared on this call only
        assert client.era is Era.MODERN
        result = await client.call_tool("report", {"topic": "moths"})
        assert result.content[0].text == "report on moths"  # type: ignore[union-attr]
        # Without the extension the server refuses the tool (that is what was fixed).
        with pytest.raises(ServerError) as refused:
            await client.request("tools/call", {"name": "report", "arguments": {"topic": "x"}})
        assert refused.value.code == -32021
    async with Client(target, limits=Limits(task_polls=1)) as client:
        with pytest.raises(TaskPollLimit, match="still working after 1 polls"):
            await client.call_tool("report", {"topic": "moths", "seconds": 30})


@needs_node_package(EVERYTHING)
async def test_a_2025_11_25_task_is_followed_its_question_answered_and_cancelled() -> None:
    asked: list[types.ElicitRequestParams] = []

    async def elicit(params: types.ElicitRequestParams) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"interpretation": "snake"}}

    async with Client(
        node_peer(EVERYTHING, "stdio"),
        responders=Responders(elicitation=elicit),
    ) as client:
        assert (client.era, client.protocol_version) == (Era.LEGACY, "2025-11-25")
        # The habit the issue hit: a plain call is refused (as a tool error, -32601 inside).
        refused = await client.request("tools/call", {"name": RESEARCH,
                                                      "arguments": {"topic": "x"}})
        assert refused["isError"] is True
        assert "requires task augmentation" in refused["content"][0]["text"]

        with anyio.fail_after(30):
            result = await client.call_tool(RESEARCH, {"topic": "python", "ambiguous": True})
        text = result.content[0].text  # type: ignore[union-attr]
        assert text.startswith("# Research Report: python (snake)")
        assert len(asked) == 1 and "python" in asked[0].message

        # The caller gives up: the task is cancelled on the server.
        with pytest.raises(TimeoutError):
            await client.call_tool(RESEARCH, {"topic": "moths"}, max_timeout=0.5)
        statuses = {t["status"] for t in await client.list_tasks()}
        assert "cancelled" in statuses

    async with Client(node_peer(EVERYTHING, "stdio"), limits=Limits(task_polls=1)) as client:
        with pytest.raises(TaskPollLimit, match="after 1 polls of tasks/get"):
            await client.call_tool(RESEARCH, {"topic": "moths"})
        assert [t["status"] for t in await client.list_tasks()] == ["cancelled"]


@pytest.mark.parametrize("legacy", [True, False])
async def test_a_slow_answer_does_not_time_the_call_out(legacy: bool) -> None:
    """A person filling a form takes longer than the idle timeout: the call waits on the
    client meanwhile, it is not idle (the hard `max_timeout` still bounds it)."""

    async def slow_person(params: types.ElicitRequestParams) -> dict[str, Any]:
        await anyio.sleep(1.2)
        return {"action": "decline"}

    argv = [sys.executable, ASKING, *(["--legacy"] if legacy else [])]
    async with Client(argv, responders=Responders(elicitation=slow_person)) as client:
        result = await client.call_tool("profile", timeout=0.4)
        assert result.content[0].text == '{"action": "decline"}'  # type: ignore[union-attr]
        if legacy:  # the question arrives while tools/call is in flight: its bound holds
            with pytest.raises(TimeoutError):
                await client.call_tool("profile", timeout=0.4, max_timeout=0.8)
