"""`ServerManager` with real child processes and a real HTTP server."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.procs import eventually, free_port, pid_gone, stop_process, wait_for_port

from mcpkit.manager.config import ServerConfig, from_entry
from mcpkit.manager.errors import (
    PermissionDenied,
    RequiredServerFailed,
    ServerUnavailable,
    ToolNotAllowed,
    UnknownTool,
)
from mcpkit.manager.managed import RestartPolicy, Status
from mcpkit.manager.manager import ServerManager
from mcpkit.manager.permissions import ToolCallRequest

pytestmark = pytest.mark.anyio

FIXTURE = str(Path(__file__).with_name("fixture_server.py"))
FAST_RESTART = RestartPolicy(first_delay_s=0.05, max_delay_s=0.2)


def stdio(name: str, *flags: str, **entry: Any) -> ServerConfig:
    return from_entry(name, {"command": sys.executable,
                             "args": [FIXTURE, "--name", name, *flags], **entry})


def text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def starts(state: Path) -> list[int]:
    path = state / "starts"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


async def until(check: Any) -> Any:
    """`eventually` with room for a process restart on a loaded machine."""
    return await eventually(check, limit_s=10.0)


# --- starting ------------------------------------------------------------------------------------


async def test_parallel_start_survives_a_slow_and_a_broken_server(tmp_path: Path) -> None:
    servers = [
        stdio("fast"),
        stdio("slow", "--delay", "30", startup_timeout_sec=1.5),
        stdio("broken", "--fail"),
        stdio("off", enabled=False),
    ]
    with anyio.fail_after(20):
        async with ServerManager(servers) as manager:
            states = {name: s.status for name, s in manager.servers.items()}
            assert states == {"fast": Status.READY, "slow": Status.FAILED,
                              "broken": Status.FAILED, "off": Status.DISABLED}
            assert "startup_timeout_sec" in (manager.servers["slow"].error or "")
            broken = manager.servers["broken"].error or ""
            assert "exit code 3" in broken and "asked to fail" in broken  # the stderr tail
            names = {t.name for t in manager.tools()}
            assert "mcp__fast__echo" in names
            assert not any(n.startswith(("mcp__slow", "mcp__broken")) for n in names)
            assert text(await manager.call_tool("mcp__fast__echo", {"text": "hi"})) == "fast: hi"
            with pytest.raises(UnknownTool, match="broken is failed"):
                await manager.call_tool("mcp__broken__echo", {"text": "x"})


async def test_a_required_server_that_fails_stops_everything(tmp_path: Path) -> None:
    state = tmp_path / "ok"
    servers = [stdio("ok", "--state", str(state)), stdio("needed", "--fail", required=True)]
    manager = ServerManager(servers)
    with anyio.fail_after(20), pytest.raises(RequiredServerFailed, match="needed"):
        await manager.start()
    [pid] = starts(state)
    await until(lambda: pid_gone(pid))  # the healthy one was stopped too


# --- crashes and restarts --------------------------------------------------------------------


async def test_a_crashed_server_is_restarted(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with anyio.fail_after(30):
        async with ServerManager([stdio("fx", "--state", str(state))],
                                 restart=FAST_RESTART) as manager:
            with pytest.raises(ServerUnavailable, match="not retried"):
                await manager.call_tool("mcp__fx__crash")
            await until(lambda: len(starts(state)) == 2
                        and manager.servers["fx"].status is Status.READY)
            assert text(await manager.call_tool("mcp__fx__echo", {"text": "back"})) == "fx: back"
            assert manager.servers["fx"].restarts == 1
            first, second = starts(state)
            assert pid_gone(first) and not pid_gone(second)
        await until(lambda: pid_gone(second))  # closing stops the child


async def test_only_read_only_tools_are_retried_after_a_crash(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with anyio.fail_after(30):
        async with ServerManager([stdio("fx", "--state", str(state))],
                                 restart=FAST_RESTART) as manager:
            result = await manager.call_tool("mcp__fx__flaky_read", {"text": "a"})
            assert text(result) == "read a"  # crashed once, restarted, called again
            with pytest.raises(ServerUnavailable, match="not marked read-only"):
                await manager.call_tool("mcp__fx__flaky_write", {"text": "b"})
            await until(lambda: manager.servers["fx"].status is Status.READY)
            assert text(await manager.call_tool("mcp__fx__flaky_write", {"text": "b"})) == (
                "wrote b")
            assert len(starts(state)) == 3


async def test_a_server_that_keeps_crashing_is_given_up(tmp_path: Path) -> None:
    state = tmp_path / "state"
    policy = RestartPolicy(max_restarts=2, first_delay_s=0.05, max_delay_s=0.1)
    config = stdio("fx", "--state", str(state))
    with anyio.fail_after(30):
        async with ServerManager([config], restart=policy) as manager:
            server = manager.servers["fx"]
            for _ in range(3):
                await until(lambda: server.status in (Status.READY, Status.FAILED))
                if server.status is Status.FAILED:
                    break
                with pytest.raises(ServerUnavailable):
                    await manager.call_tool("mcp__fx__crash")
                await until(lambda: server.status is not Status.READY or server.client
                            is not None)
            await until(lambda: server.status is Status.FAILED)
            assert "crashed 3 times in a row" in (server.error or "")


# --- HTTP: a server that forgot its session ------------------------------------------------------


@pytest.fixture
def http_port() -> int:
    return free_port()


def start_http(port: int, name: str = "web") -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, FIXTURE, "--name", name, "--http", str(port)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_for_port(proc, port)
    return proc


@pytest.fixture
def http_server(http_port: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = [start_http(http_port)]
    yield procs
    for proc in procs:
        stop_process(proc)


async def test_an_http_server_that_forgot_the_session_is_reinitialized(
    http_port: int, http_server: list[subprocess.Popen[bytes]],
) -> None:
    config = from_entry("web", {"url": f"http://127.0.0.1:{http_port}/mcp"})
    with anyio.fail_after(30):
        async with ServerManager([config], client_options={"era": "legacy"}) as manager:
            assert text(await manager.call_tool("mcp__web__echo", {"text": "1"})) == "web: 1"
            stop_process(http_server[0])  # a restart: the new process knows no sessions
            http_server.append(start_http(http_port))
            assert text(await manager.call_tool("mcp__web__echo", {"text": "2"})) == "web: 2"
            assert manager.servers["web"].status is Status.READY


# --- what is exposed -------------------------------------------------------------------------


async def test_allow_and_deny_lists_apply_to_listing_and_calling() -> None:
    config = stdio("fx", enabled_tools=["echo", "env", "write_*"], disabled_tools=["env"])
    with anyio.fail_after(20):
        async with ServerManager([config]) as manager:
            assert sorted(t.name for t in manager.tools()) == [
                "mcp__fx__echo", "mcp__fx__write_note"]
            with pytest.raises(UnknownTool):
                await manager.call_tool("mcp__fx__env", {"variable": "PATH"})
            with pytest.raises(ToolNotAllowed):
                await manager.call_server_tool("fx", "crash")
            result = await manager.call_server_tool("fx", "echo", {"text": "ok"})
            assert text(result) == "fx: ok"


async def test_children_get_a_minimal_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPKIT_TEST_SECRET", "hunter2")
    monkeypatch.setenv("MCPKIT_TEST_PASSED", "passed-through")
    config = stdio("fx", env_vars=["MCPKIT_TEST_PASSED", "MCPKIT_TEST_MISSING"],
                   env={"MCPKIT_TEST_SET": "set"})
    with anyio.fail_after(20):
        async with ServerManager([config]) as manager:
            async def env(name: str) -> str:
                return text(await manager.call_tool("mcp__fx__env", {"variable": name}))

            assert await env("MCPKIT_TEST_SECRET") == "<unset>"
            assert await env("MCPKIT_TEST_PASSED") == "passed-through"
            assert await env("MCPKIT_TEST_SET") == "set"
            assert await env("MCPKIT_TEST_MISSING") == "<unset>"
            assert await env("PATH") == os.environ["PATH"]


async def test_colliding_names_are_told_apart() -> None:
    servers = [stdio("a.b", "--tools", "echo"), stdio("a_b", "--tools", "echo"),
               stdio("x" * 64, "--tools", "echo")]
    with anyio.fail_after(20):
        async with ServerManager(servers) as manager:
            tools = {t.name: t for t in manager.tools()}
            assert len(tools) == 3
            assert all(len(n) <= 64 and n.replace("_", "").replace("-", "").isalnum()
                       for n in tools)
            assert "mcp__a_b__echo" in tools
            assert manager.name_collisions
            for name, tool in tools.items():
                result = await manager.call_tool(name, {"text": "t"})
                assert text(result) == f"{tool.server}: t"


async def test_prompts_and_resources_per_server() -> None:
    with anyio.fail_after(20):
        async with ServerManager([stdio("one"), stdio("two")]) as manager:
            assert sorted(p.name for p in manager.prompts()) == [
                "mcp__one__greeting", "mcp__two__greeting"]
            got = await manager.get_prompt("mcp__two__greeting", {"who": "Ada"})
            assert "Hello Ada from two" in str(got.messages[0].content)
            uris = sorted((r.server, r.resource.uri) for r in manager.resources())
            assert uris == [("one", "fixture://one/about"), ("two", "fixture://two/about")]
            read = await manager.read_resource("one", "fixture://one/about")
            assert "about one" in str(read.contents[0])


async def test_list_changed_refreshes_the_catalog() -> None:
    changes: list[tuple[str, str]] = []
    with anyio.fail_after(20):
        async with ServerManager([stdio("fx")],
                                 on_change=lambda s, k: changes.append((s, k))) as manager:
            assert "mcp__fx__extra" not in {t.name for t in manager.tools()}
            await manager.call_tool("mcp__fx__add_tool")
            await until(lambda: "mcp__fx__extra" in {t.name for t in manager.tools()})
            assert ("fx", "tools") in changes
            assert text(await manager.call_tool("mcp__fx__extra")) == "extra!"


# --- hooks and budgets -----------------------------------------------------------------------


async def test_the_permission_hook_decides_each_call() -> None:
    seen: list[ToolCallRequest] = []
    asked: list[str] = []

    def hook(request: ToolCallRequest) -> str:
        seen.append(request)
        if request.read_only:
            return "allow"
        return "ask" if request.arguments.get("text") != "never" else "deny"

    async def ask(request: ToolCallRequest) -> bool:
        asked.append(request.name)
        return request.arguments.get("text") == "yes"

    with anyio.fail_after(20):
        async with ServerManager([stdio("fx")], permission=hook, ask=ask) as manager:
            assert text(await manager.call_tool("mcp__fx__echo", {"text": "r"})) == "fx: r"
            assert seen[0].annotations.get("readOnlyHint") is True
            assert text(await manager.call_tool("mcp__fx__write_note", {"text": "yes"})) == (
                "noted yes")
            with pytest.raises(PermissionDenied, match="declined"):
                await manager.call_tool("mcp__fx__write_note", {"text": "no"})
            with pytest.raises(PermissionDenied, match="denied"):
                await manager.call_tool("mcp__fx__write_note", {"text": "never"})
            assert asked == ["mcp__fx__write_note"] * 2
        async with ServerManager([stdio("fx")], permission=lambda r: "ask") as manager:
            with pytest.raises(PermissionDenied, match="nobody can be asked"):
                await manager.call_tool("mcp__fx__echo", {"text": "r"})


async def test_the_output_budget_keeps_head_and_tail() -> None:
    with anyio.fail_after(20):
        async with ServerManager([stdio("fx")], output_budget=2000) as manager:
            result = await manager.call_tool("mcp__fx__big", {"size": 60000})
            cut = text(result)
            assert len(cut) < 2400
            assert cut.startswith("line 000000") and "cut" in cut
            assert "line 004999" in cut  # the tail survives


async def test_an_unset_bearer_token_fails_only_its_server() -> None:
    web = from_entry("web", {"url": "http://127.0.0.1:9/mcp",
                             "bearer_token_env_var": "MCPKIT_TEST_UNSET_TOKEN"})
    with anyio.fail_after(20):
        async with ServerManager([stdio("fx"), web], environ={}) as manager:
            assert manager.servers["fx"].status is Status.READY
            assert manager.servers["web"].status is Status.FAILED
            assert "MCPKIT_TEST_UNSET_TOKEN is not set" in (manager.servers["web"].error or "")


async def test_the_adapters_drive_the_manager() -> None:
    from mcpkit.manager.adapters import (
        run_anthropic_tool_uses,
        run_openai_tool_calls,
        to_anthropic_tools,
        to_openai_tools,
    )

    with anyio.fail_after(20):
        async with ServerManager([stdio("fx", "--tools", "echo,write_note")],
                                 permission=lambda r: "allow" if r.read_only else "deny"
                                 ) as manager:
            names = {t["function"]["name"] for t in to_openai_tools(manager.tools())}
            assert names == {"mcp__fx__echo", "mcp__fx__write_note"}
            assert {t["name"] for t in to_anthropic_tools(manager.tools())} == names
            calls = [{"id": "c1", "type": "function",
                      "function": {"name": "mcp__fx__echo", "arguments": '{"text": "a"}'}},
                     {"id": "c2", "type": "function",
                      "function": {"name": "mcp__fx__write_note", "arguments": "{}"}}]
            echoed, denied = await run_openai_tool_calls(manager, calls)
            assert echoed == {"role": "tool", "tool_call_id": "c1", "content": "fx: a"}
            assert denied["tool_call_id"] == "c2" and "denied" in denied["content"]
            [used] = await run_anthropic_tool_uses(manager, [
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "u1", "name": "mcp__fx__echo",
                 "input": {"text": "b"}}])
            assert used["tool_use_id"] == "u1" and used["is_error"] is False
            assert used["content"][0]["text"] == "fx: b"
