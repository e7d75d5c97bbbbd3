"""The `agent` tool: a read-only sub-agent on the client's model through sampling with tools.

The client's model is a scripted fake (a sampling handler that answers each round from a
list of steps and keeps what it was sent). Both eras: in the modern era every sampling round
is an `input_required` round, and the handler must never be asked twice for one round."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import anyio
import msgspec
import pytest

from mcpkit.client import Client, Responders
from mcpkit.coding import agent
from mcpkit.coding.env import CodingEnv
from mcpkit.coding.server import build_server
from mcpkit.coding.workspace import Workspace
from mcpkit.protocol import types
from mcpkit.server.server import Server

pytestmark = pytest.mark.anyio

ERAS = pytest.mark.parametrize("era", ["legacy", "modern"])

EraName = Literal["legacy", "modern"]
Step = Callable[[dict[str, Any]], dict[str, Any]]


class FakeModel:
    """A sampling handler that answers round N with `steps[N]` (given the request)."""

    def __init__(self, *steps: Step, delay: float = 0.0) -> None:
        self.steps = steps
        self.delay = delay
        self.requests: list[dict[str, Any]] = []

    async def __call__(self, params: types.CreateMessageRequestParams) -> dict[str, Any]:
        request: dict[str, Any] = msgspec.to_builtins(params)
        self.requests.append(request)
        if self.delay:
            await anyio.sleep(self.delay)
        step = self.steps[min(len(self.requests), len(self.steps)) - 1]
        return step(request)


def tool_use(name: str, arguments: dict[str, Any], use_id: str = "u1",
             text: str | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    content.append({"type": "tool_use", "id": use_id, "name": name, "input": arguments})
    return {"role": "assistant", "model": "fake", "stopReason": "toolUse", "content": content}


def final(text: str) -> dict[str, Any]:
    return {"role": "assistant", "model": "fake", "stopReason": "endTurn",
            "content": {"type": "text", "text": text}}


def tool_results(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of the request's last message."""
    last = request["messages"][-1]
    assert last["role"] == "user"
    blocks = last["content"] if isinstance(last["content"], list) else [last["content"]]
    assert all(b["type"] == "tool_result" for b in blocks)
    return blocks


def result_text(block: dict[str, Any]) -> str:
    return "\n".join(c["text"] for c in block["content"] if c["type"] == "text")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "pay.py").write_text(
        "import os\n\n\ndef handle_payment(amount):\n    return amount * 2\n")
    (root / "src" / "other.py").write_text("x = 1\n")
    (root / "README.md").write_text("# demo\n")
    return root


def server_for(root: Path, **options: Any) -> Server:
    server = build_server(CodingEnv(Workspace.at(root)))
    if options:
        agent.register(server, CodingEnv(Workspace.at(root)), **options)
    return server


async def run_agent(client: Client, prompt: str = "Where are payments handled?"
                    ) -> tuple[str, bool, Any]:
    result = await client.call_tool("agent", {"prompt": prompt, "description": "find payments"})
    text = "\n".join(getattr(b, "text", "") for b in result.content)
    return text, bool(result.is_error), result.meta


def grep_then_view_then_answer() -> FakeModel:
    def round1(request: dict[str, Any]) -> dict[str, Any]:
        assert request["messages"][0]["content"]["text"] == "Where are payments handled?"
        return tool_use("grep", {"pattern": "handle_payment"}, "g1", text="Searching.")

    def round2(request: dict[str, Any]) -> dict[str, Any]:
        (block,) = tool_results(request)
        assert block["toolUseId"] == "g1" and not block.get("isError")
        assert "src/pay.py" in result_text(block)
        return tool_use("view", {"file_path": "src/pay.py"}, "v1")

    def round3(request: dict[str, Any]) -> dict[str, Any]:
        (block,) = tool_results(request)
        assert block["toolUseId"] == "v1" and not block.get("isError")
        assert "def handle_payment(amount):" in result_text(block)
        return final("Payments are handled in src/pay.py:4 (handle_payment).")

    return FakeModel(round1, round2, round3)


@ERAS
async def test_grep_view_answer(workspace: Path, era: EraName) -> None:
    model = grep_then_view_then_answer()
    server = server_for(workspace)
    sealed: list[dict[str, Any]] = []
    seal = server.state_codec.seal

    def spy(method: str, params: dict[str, Any], **kw: Any) -> str:
        sealed.append(kw)
        return seal(method, params, **kw)

    server.state_codec.seal = spy  # type: ignore[method-assign]
    async with Client(
        server,
        era=era,
        responders=Responders(sampling=model, sampling_tools=True),
    ) as c:
        text, is_error, meta = await run_agent(c)
        assert not is_error
        assert text == "Payments are handled in src/pay.py:4 (handle_payment)."
        assert meta["agent"] == {"steps": 3, "toolCalls": 2}
        listed = {t.name: t for t in await c.list_tools()}
    assert len(model.requests) == 3  # modern: no round was asked twice
    if era == "modern":  # one input_required round per sampling round, carrying the
        # transcript in the state and no copy of the answers already processed
        assert [s["state"]["step"] for s in sealed] == [0, 1, 2]
        assert [len(s["state"]["messages"]) for s in sealed] == [0, 2, 4]
        assert all(s["answers"] == {} for s in sealed)
    else:
        assert sealed == []
    first = model.requests[0]
    assert [t["name"] for t in first["tools"]] == ["view", "glob", "grep", "ls"]
    for tool in first["tools"]:
        wire = listed[tool["name"]]
        assert tool["inputSchema"] == msgspec.to_builtins(wire.input_schema)
        assert tool["description"] == wire.description
    assert "toolChoice" not in first
    # The transcript grows by one assistant turn and one tool-result turn per round.
    assert [m["role"] for m in model.requests[2]["messages"]] == [
        "user", "assistant", "user", "assistant", "user"]
    assert model.requests[1]["messages"][1]["content"][0] == {
        "type": "text", "text": "Searching."}


@ERAS
async def test_only_read_only_tools_run(workspace: Path, era: EraName) -> None:
    def round1(request: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "model": "fake", "content": [
            {"type": "tool_use", "id": "b", "name": "bash",
             "input": {"command": "touch pwned"}},
            {"type": "tool_use", "id": "w", "name": "write",
             "input": {"file_path": "written.txt", "content": "x"}},
            {"type": "tool_use", "id": "l", "name": "ls", "input": {}},
            {"type": "tool_use", "id": "bad", "name": "view", "input": {"nope": 1}},
            {"type": "tool_use", "id": "out", "name": "view",
             "input": {"file_path": "/etc/passwd"}},
        ]}

    def round2(request: dict[str, Any]) -> dict[str, Any]:
        blocks = {b["toolUseId"]: b for b in tool_results(request)}
        assert list(blocks) == ["b", "w", "l", "bad", "out"]
        for refused in ("b", "w"):
            assert blocks[refused]["isError"] is True
            assert "not available to this sub-agent" in result_text(blocks[refused])
        assert not blocks["l"].get("isError") and "src/" in result_text(blocks["l"])
        assert blocks["bad"]["isError"] is True
        assert "Invalid arguments for tool view" in result_text(blocks["bad"])
        assert blocks["out"]["isError"] is True
        assert "outside the workspace" in result_text(blocks["out"])
        return final("done")

    model = FakeModel(round1, round2)
    async with Client(
        server_for(workspace),
        era=era,
        responders=Responders(sampling=model, sampling_tools=True),
    ) as c:
        text, is_error, _ = await run_agent(c)
    assert (text, is_error) == ("done", False)
    assert not (workspace / "pwned").exists() and not (workspace / "written.txt").exists()


@ERAS
async def test_step_budget(workspace: Path, era: EraName) -> None:
    model = FakeModel(lambda r: tool_use("grep", {"pattern": "x"}, f"g{len(r['messages'])}",
                                         text=f"note {len(r['messages'])}"))
    server = server_for(workspace, max_steps=3)
    async with Client(
        server,
        era=era,
        responders=Responders(sampling=model, sampling_tools=True),
    ) as c:
        text, is_error, meta = await run_agent(c)
    assert not is_error
    assert len(model.requests) == 3
    assert text.startswith("[The agent stopped before a final answer: the step budget "
                           "(3 sampling rounds) is used up, after 3 sampling rounds and 2 "
                           "tool calls.]")
    assert "note 1" in text and "note 3" in text and "Its last tool calls: grep(" in text
    assert meta["agent"]["stopped"].startswith("the step budget")
    # Only the last round disables tools and says so.
    assert [r.get("toolChoice") for r in model.requests] == [None, None, {"mode": "none"}]
    assert "last step" in model.requests[2]["systemPrompt"]
    assert "last step" not in model.requests[1]["systemPrompt"]


@ERAS
async def test_time_budget(workspace: Path, era: EraName) -> None:
    model = FakeModel(lambda r: tool_use("ls", {}, "l", text="looking"), delay=0.3)
    server = server_for(workspace, time_budget_s=0.5)
    async with Client(
        server,
        era=era,
        responders=Responders(sampling=model, sampling_tools=True),
    ) as c:
        text, is_error, _ = await run_agent(c)
    assert not is_error
    assert "the time budget (0.5 s) is used up" in text
    assert "looking" in text
    assert len(model.requests) <= 2


@pytest.mark.parametrize("sampling_tools", [False, True])
async def test_refused_without_sampling_tools(workspace: Path, sampling_tools: bool) -> None:
    model = FakeModel(lambda r: final("never"))
    eras: tuple[EraName, ...] = ("legacy", "modern")
    for era in eras:
        sampling = model if sampling_tools else FakeModel(lambda r: final("never"))
        responders = Responders(sampling=sampling) if not sampling_tools else Responders()
        async with Client(server_for(workspace), era=era, responders=responders) as c:
            text, is_error, _ = await run_agent(c)
        assert is_error
        assert "needs a client that supports sampling with tools" in text
    assert model.requests == []


@ERAS
async def test_sub_agent_reads_are_not_the_tasks(workspace: Path, era: EraName) -> None:
    model = FakeModel(lambda r: tool_use("view", {"file_path": "src/pay.py"}),
                      lambda r: final("seen"))
    async with Client(
        server_for(workspace),
        era=era,
        responders=Responders(sampling=model, sampling_tools=True),
    ) as c:
        assert (await run_agent(c))[0] == "seen"
        result = await c.call_tool("edit", {"file_path": "src/pay.py",
                                            "old_string": "* 2", "new_string": "* 3"})
        assert result.is_error
        assert "has not been read" in getattr(result.content[0], "text", "")


@ERAS
async def test_big_outputs_are_cut_and_old_ones_elided(workspace: Path, era: EraName) -> None:
    for i in range(8):
        (workspace / f"big{i}.txt").write_text(f"file {i}\n" + ("y" * 100 + "\n") * 2000)
    uses = [{"type": "tool_use", "id": f"v{i}", "name": "view",
             "input": {"file_path": f"big{i}.txt"}} for i in range(8)]

    def round2(request: dict[str, Any]) -> dict[str, Any]:
        blocks = tool_results(request)
        texts = [result_text(b) for b in blocks]
        assert all(len(t) < agent.MAX_RESULT_CHARS + 200 for t in texts)
        assert texts[0] == agent.ELIDED  # the oldest output went first
        assert "file 7" in texts[-1] and "output cut" in texts[-1]
        assert len(msgspec.json.encode(request["messages"])) < agent.MAX_TRANSCRIPT_BYTES
        return final("big")

    model = FakeModel(lambda r: {"role": "assistant", "model": "f", "content": uses}, round2)
    async with Client(
        server_for(workspace),
        era=era,
        responders=Responders(sampling=model, sampling_tools=True),
    ) as c:
        assert (await run_agent(c))[:2] == ("big", False)


async def test_agent_over_stdio(workspace: Path) -> None:
    model = grep_then_view_then_answer()
    command = [sys.executable, "-m", "mcpkit", "serve", "--transport", "stdio",
               "--workspace", str(workspace)]
    async with Client(command, responders=Responders(sampling=model, sampling_tools=True)) as c:
        tools = {t.name: t for t in await c.list_tools()}
        annotations = tools["agent"].annotations
        assert isinstance(annotations, types.ToolAnnotations)
        assert annotations.read_only_hint is True
        text, is_error, _ = await run_agent(c)
    assert (text, is_error) == ("Payments are handled in src/pay.py:4 (handle_payment).",
                                False)
    assert len(model.requests) == 3
