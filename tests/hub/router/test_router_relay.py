"""What flows back through the hub mid-call, over real HTTP to real upstream processes:
progress, cancellation, log messages, sampling and elicitation (relayed to the caller whose
call caused them, in each combination of caller era and upstream era), and list_changed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from tests.hub.hub_helpers import Hub, fresh_user
from tests.hub.router.support import hub_client, register, router_hub, text, upstream
from tests.procs import eventually

from mcpkit.client import Notifications, Responders

pytestmark = pytest.mark.anyio

ERAS = ["legacy", "modern"]


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    database = tmp_path_factory.mktemp("relay") / "hub.db"
    with router_hub(f"sqlite+aiosqlite:///{database}") as running:
        yield running


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, str]]:
    with upstream("new") as modern, upstream("old", legacy_only=True) as legacy:
        yield {"new": modern.url, "old": legacy.url}


@pytest.fixture
async def api(hub: Hub, upstreams: dict[str, str]) -> Any:
    _user, user_api = await fresh_user(hub)
    await register(user_api, "new", upstreams["new"])
    await register(user_api, "old", upstreams["old"])
    return user_api


async def model(params: Any) -> dict[str, Any]:
    question = params.messages[0].content.text
    return {"role": "assistant", "model": "test-model",
            "content": {"type": "text", "text": f"an answer to {question}"}}


async def person(params: Any) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "Ada"}}


@pytest.mark.parametrize("caller", ERAS)
@pytest.mark.parametrize("up", ["new", "old"])
async def test_sampling_and_elicitation_reach_the_caller(
        hub: Hub, api: Any, caller: str, up: str) -> None:
    async with hub_client(
        hub,
        api,
        era=caller,
        responders=Responders(sampling=model, elicitation=person),
    ) as client:
        sampled = await client.call_tool(f"{up}__ask_model", {"question": "life"})
        assert text(sampled) == "model said: an answer to life", sampled
        elicited = await client.call_tool(f"{up}__ask_user", {})
        assert text(elicited) == "user said: Ada (accept)", elicited


@pytest.mark.parametrize("caller", ERAS)
async def test_concurrent_callers_each_get_their_own_questions(
        hub: Hub, api: Any, caller: str) -> None:
    """Two callers of one user share the hub's upstream connection: each question still
    goes to the caller whose call asked it."""
    answers: dict[str, str] = {}

    def named_model(who: str) -> Any:
        async def answer(params: Any) -> dict[str, Any]:
            await anyio.sleep(0.05)
            return {"role": "assistant", "model": who,
                    "content": {"type": "text", "text": who}}
        return answer

    async def run(who: str) -> None:
        async with hub_client(
            hub,
            api,
            era=caller,
            responders=Responders(sampling=named_model(who)),
        ) as client:
            for _ in range(3):
                result = await client.call_tool("old__ask_model", {"question": who})
                answers[who] = text(result)
                assert answers[who] == f"model said: {who}"

    async with anyio.create_task_group() as tg:
        for who in ("first", "second", "third"):
            tg.start_soon(run, who)
    assert answers == {who: f"model said: {who}" for who in ("first", "second", "third")}


@pytest.mark.parametrize("caller", ERAS)
@pytest.mark.parametrize("up", ["new", "old"])
async def test_progress_is_forwarded(hub: Hub, api: Any, caller: str, up: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with hub_client(hub, api, era=caller) as client:
        result = await client.request(
            "tools/call", {"name": f"{up}__slow", "arguments": {"seconds": 0.2, "steps": 4}},
            on_progress=on_progress)
    assert result["content"][0]["text"] == "slept"
    assert [step[0] for step in seen] == [1, 2, 3, 4]
    assert seen[-1] == (4, 4, "step 4")


@pytest.mark.parametrize("caller", ERAS)
@pytest.mark.parametrize("up", ["new", "old"])
async def test_cancelling_a_call_cancels_it_upstream(
        hub: Hub, api: Any, caller: str, up: str) -> None:
    """A modern upstream without progress to relay is called by `Client.exchange`: the
    caller's cancellation closes that POST; a legacy one is told by notification."""
    async with hub_client(hub, api, era=caller) as client:
        with anyio.move_on_after(0.5):
            await client.call_tool(f"{up}__slow", {"seconds": 30, "steps": 30})

        for _attempt in range(200):
            if "slow" in text(await client.call_tool(f"{up}__was_cancelled", {})):
                break
            await anyio.sleep(0.05)
        else:
            raise AssertionError("the upstream never saw the cancellation")


async def test_log_messages_reach_the_legacy_caller(hub: Hub, api: Any) -> None:
    logs: list[Any] = []

    async def on_log(params: Any) -> None:
        logs.append(params)

    async with hub_client(
        hub,
        api,
        era="legacy",
        notifications=Notifications(on_log=on_log),
    ) as client:
        await client.call_tool("old__chatty", {})
        await client.call_tool("new__chatty", {})

        await eventually(
            lambda: {"old is working", "new is working"} <= {str(p.data) for p in logs}, 10)
    assert "details" not in {str(p.data) for p in logs}  # debug is below the default level


@pytest.mark.parametrize("caller", ERAS)
async def test_an_upstreams_list_changed_reaches_the_caller(
        hub: Hub, upstreams: dict[str, str], caller: str) -> None:
    _user, api = await fresh_user(hub)
    with upstream("growing") as growing:
        await register(api, "grow", growing.url)
        changed: list[str] = []

        async def on_list_changed(kind: str) -> None:
            changed.append(kind)

        async with hub_client(
            hub,
            api,
            era=caller,
            notifications=Notifications(on_list_changed=on_list_changed),
        ) as client:
            if caller == "modern":
                await client.listen()
            assert "grow__extra" not in {t.name for t in await client.list_tools()}
            await client.call_tool("grow__grow", {})

            await eventually(lambda: "tools" in changed, 10)
            assert "grow__extra" in {t.name for t in await client.list_tools()}
            assert text(await client.call_tool("grow__extra", {})) == "extra!"


@pytest.mark.parametrize("caller", ERAS)
async def test_registering_an_upstream_tells_the_users_sessions(
        hub: Hub, upstreams: dict[str, str], caller: str) -> None:
    _user, api = await fresh_user(hub)
    changed: list[str] = []

    async def on_list_changed(kind: str) -> None:
        changed.append(kind)

    async with hub_client(
        hub,
        api,
        era=caller,
        notifications=Notifications(on_list_changed=on_list_changed),
    ) as client:
        if caller == "modern":
            await client.listen()
        assert await client.list_tools() == []
        await register(api, "late", upstreams["new"])
        await eventually(lambda: "tools" in changed, 10)
        assert "late__echo" in {tool.name for tool in await client.list_tools()}
