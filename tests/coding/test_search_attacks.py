"""Hostile patterns against a real `mcpkit serve` (Streamable HTTP on 127.0.0.1): no search or
glob may stall the server.

Each attack runs from one client while a second client's ordinary requests (`view`, another
`grep`) must be answered promptly (a generous liveness bound), and SIGTERM must stop the
server within a few seconds, leaving no search process behind. Attacks:

- `(a+)+$` over a line of `a`s and a `!` (exponential in Python's `re`), with ripgrep and
  with the Python fallback (`MCPKIT_GREP_ENGINE=python`, as when no `rg` is found);
- globs that backtrack when translated to regexes (`a*a*…*b`, a thousand `*`s) against a
  long file name, and the same shape planted in a `.gitignore` (an agent can write one);
- 22 `{a,b}` groups (4 million alternatives) as a glob, a grep `include` and an `ls` ignore,
  and patterns past the length caps: refused with the limit named, RSS unchanged.

The in-process tests below check the hard time limit of the Python worker (stuck inside one
`re.search`, it cannot stop itself) and that cancelling a call kills it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.procs import free_port, pid_gone, stop_process, wait_for_port

from mcpkit.client import Client, ConnectOptions
from mcpkit.coding.env import CodingEnv
from mcpkit.coding.search import braces
from mcpkit.coding.search import grep_engines as grep
from mcpkit.coding.server import build_server
from mcpkit.coding.workspace import Workspace

pytestmark = pytest.mark.anyio

LIVENESS_S = 5.0
"""A normal request is answered within this while an attack runs (it takes milliseconds)."""
SIGTERM_S = 10.0
"""SIGTERM stops the server within this (in-flight calls get the server's 5 s grace)."""
RSS_GROWTH_MIB = 40
"""A refused expansion may not grow the server by more than this (unrefused: > 1.4 GiB)."""
EVIL_LINE = "a" * 40 + "!"
LONG_NAME = "a" * 200


def make_workspace(root: Path) -> Path:
    ws = root / "ws"
    ws.mkdir()
    (ws / "small.txt").write_text("hello\n")
    (ws / "evil.txt").write_text(EVIL_LINE + "\n")
    (ws / LONG_NAME).write_text("x\n")
    return ws


class Served:
    def __init__(self, url: str, proc: subprocess.Popen[bytes]) -> None:
        self.url, self.proc = url, proc
        self.terminating = False

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")

    def children(self) -> list[int]:
        """Every live descendant of the server (the search engines lead their own groups,
        but stay its children)."""
        found: list[int] = []
        todo = [self.proc.pid]
        while todo:
            pid = todo.pop()
            try:
                kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            except OSError:
                continue
            for kid in map(int, kids):
                if not pid_gone(kid):
                    found.append(kid)
                    todo.append(kid)
        return found


ENGINES = pytest.mark.parametrize("engine", ["ripgrep", "python"], indirect=True)


@pytest.fixture
def engine(request: pytest.FixtureRequest) -> str:
    """The grep engine of the server: ripgrep unless a test asks for both (`ENGINES`)."""
    name: str = getattr(request, "param", "ripgrep")
    if name == "ripgrep" and grep.find_ripgrep() is None:
        pytest.skip("ripgrep (rg) is not installed")
    return name


@pytest.fixture
def served(tmp_path: Path, engine: str) -> Iterator[Served]:
    ws = make_workspace(tmp_path)
    port = free_port()
    env = dict(os.environ)
    env.pop(grep.ENGINE_ENV, None)
    if engine == "python":
        env[grep.ENGINE_ENV] = "python"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpkit", "serve", "--workspace", str(ws), "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(proc, port)
        yield Served(f"http://127.0.0.1:{port}/mcp", proc)
    finally:
        stop_process(proc)


@asynccontextmanager
async def two_clients(served: Served) -> AsyncIterator[tuple[Client, Client]]:
    async with Client(served.url) as attacker, Client(served.url) as bystander:
        yield attacker, bystander


async def answered_promptly(client: Client) -> None:
    """The bystander's ordinary calls, each within `LIVENESS_S`."""
    with anyio.fail_after(LIVENESS_S):
        result = await client.call_tool("view", {"file_path": "small.txt"})
    assert not result.is_error and "hello" in result.content[0].text  # type: ignore[union-attr]
    with anyio.fail_after(LIVENESS_S):
        result = await client.call_tool("grep", {"pattern": "hel+o", "output_mode": "count"})
    assert not result.is_error and result.structured_content["total_matches"] == 1


async def sigterm_stops(served: Served) -> None:
    """SIGTERM while calls may be in flight: the server and every search child are gone."""
    children = served.children()
    served.terminating = True
    served.proc.send_signal(signal.SIGTERM)
    with anyio.fail_after(SIGTERM_S):
        while served.proc.poll() is None:  # noqa: ASYNC110 (a process, not a task)
            await anyio.sleep(0.05)
    with anyio.fail_after(3):
        while not all(pid_gone(pid) for pid in children):  # noqa: ASYNC110
            await anyio.sleep(0.05)


async def under_attack(served: Served, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Start the attacks, check the bystander, then SIGTERM; the attacks' results that came
    before (a call the server's exit cuts off is not one)."""
    results: list[Any] = []

    async def attack(client: Client, tool: str, arguments: dict[str, Any]) -> None:
        try:
            results.append(await client.call_tool(tool, arguments))
        except Exception:  # the SIGTERM below ended the server under it
            assert served.terminating

    async with two_clients(served) as (attacker, bystander):
        async with anyio.create_task_group() as tg:
            for tool, arguments in calls:
                tg.start_soon(attack, attacker, tool, arguments)
            await anyio.sleep(0.3)  # let them get going
            await answered_promptly(bystander)
            await sigterm_stops(served)
    return results


@ENGINES
async def test_nested_quantifiers_do_not_stall_the_server(served: Served, engine: str) -> None:
    results = await under_attack(served, [("grep", {"pattern": "(a+)+$", "path": "evil.txt",
                                                    "output_mode": "content"})])
    if engine == "ripgrep":  # linear automata: answered at once, and correctly
        assert results and not results[0].is_error
        assert results[0].structured_content["total_matches"] == 0


@pytest.mark.parametrize("engine", ["python"], indirect=True)
async def test_two_hostile_regexes_over_the_whole_tree(served: Served) -> None:
    """Two stuck searches at once, each walking the tree, still leave the server answering."""
    results = await under_attack(served, [("grep", {"pattern": p})
                                          for p in ("(a+)+$", "(a|aa)+$")])
    assert results == []  # neither could have finished: `re` takes ~2^40 steps


HOSTILE_GLOBS = ["a*" * 14 + "b", "*" * 1000 + "x", "**/" + "*a" * 60 + "b",
                 "{a,b}*a*a*a*a*a*a*a*a*a*a*a*{c,d}", "**/" * 300 + "b"]


async def test_backtracking_globs_are_linear(served: Served) -> None:
    """Each shape as a `glob` pattern, a `grep` include and an `ls` ignore glob."""
    async with two_clients(served) as (attacker, bystander):
        for pattern in HOSTILE_GLOBS:
            with anyio.fail_after(LIVENESS_S):
                result = await attacker.call_tool("glob", {"pattern": pattern})
            assert not result.is_error and result.structured_content["files"] == [], pattern
            with anyio.fail_after(LIVENESS_S):
                result = await attacker.call_tool("grep", {"pattern": "x", "include": pattern})
            assert not result.is_error and result.structured_content["files"] == [], pattern
            with anyio.fail_after(LIVENESS_S):
                result = await attacker.call_tool("ls", {"ignore": [pattern]})
            text = result.content[0].text  # type: ignore[union-attr]
            assert not result.is_error and LONG_NAME in text, pattern
            await answered_promptly(bystander)
        with anyio.fail_after(LIVENESS_S):
            result = await attacker.call_tool("glob", {"pattern": "a*a*a*a*a*a*a*a"})
        assert result.structured_content["files"] == [LONG_NAME]  # and it still matches
    await sigterm_stops(served)


async def test_a_hostile_gitignore_is_matched_in_linear_time(served: Served,
                                                            tmp_path: Path) -> None:
    """.gitignore patterns are workspace content an agent can write: `a*a*…b` there meets
    every file name of the walk."""
    (tmp_path / "ws" / ".gitignore").write_text("a*" * 14 + "b\n" + "*a" * 40 + "b/\n")
    async with two_clients(served) as (attacker, bystander):
        for tool, args in (("glob", {"pattern": "**/*"}), ("grep", {"pattern": "x"}),
                           ("ls", {})):
            with anyio.fail_after(LIVENESS_S):
                result = await attacker.call_tool(tool, args)
            assert not result.is_error
            assert LONG_NAME in str(result.structured_content or result.content)
        await answered_promptly(bystander)


async def test_expansion_and_length_caps(served: Served) -> None:
    bomb = "{a,b}" * 22
    too_long = "a" * (braces.MAX_PATTERN_CHARS + 1)
    async with two_clients(served) as (attacker, bystander):
        before = served.rss_mib()
        calls: list[tuple[str, dict[str, Any], str]] = [
            ("glob", {"pattern": bomb}, f"the limit is {braces.MAX_EXPANSIONS}"),
            ("grep", {"pattern": "x", "include": bomb}, f"the limit is {braces.MAX_EXPANSIONS}"),
            ("ls", {"ignore": [bomb]}, f"the limit is {braces.MAX_EXPANSIONS}"),
            ("glob", {"pattern": too_long}, f"the limit is {braces.MAX_PATTERN_CHARS}"),
            ("grep", {"pattern": "a" * (grep.MAX_REGEX_CHARS + 1)},
             f"the limit is {grep.MAX_REGEX_CHARS}"),
            ("ls", {"ignore": ["*.x"] * 65}, "the limit is 64"),
            ("ls", {"ignore": ["{a,b}{c,d}{e,f}"] * 64}, "expand to 512 patterns in all"),
            ("glob", {"pattern": "a" * 900 + "{b,c}" * 5},
             f"the limit is {braces.MAX_EXPANDED_CHARS}"),
        ]
        for tool, args, said in calls:
            with anyio.fail_after(LIVENESS_S):
                result = await attacker.call_tool(tool, args)
            text = result.content[0].text  # type: ignore[union-attr]
            assert result.is_error and said in text and "\n" not in text, (tool, text)
        assert served.rss_mib() - before < RSS_GROWTH_MIB
        await answered_promptly(bystander)


async def test_a_huge_line_is_read_in_bounded_pieces(served: Served, tmp_path: Path) -> None:
    """A 3 MiB matching line: ripgrep prints it whole in one JSON event; the server neither
    buffers it whole nor quadratically, and shows it cut."""
    (tmp_path / "ws" / "huge.txt").write_text("needle" + "z" * (3 << 20) + "\nneedle two\n")
    async with two_clients(served) as (attacker, bystander):
        with anyio.fail_after(LIVENESS_S * 2):
            result = await attacker.call_tool("grep", {"pattern": "needle", "path": "huge.txt",
                                                       "output_mode": "content"})
        assert not result.is_error
        data = result.structured_content
        assert data["total_matches"] == 2
        texts = [line["text"] for line in data["lines"]]
        assert all(len(t) < 1000 for t in texts) and texts[-1] == "needle two"
        await answered_promptly(bystander)


# --- in process: the worker's hard limit and cancellation -------------------------------------


def parent_of(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def mine(pid: int) -> bool:
    """Whether `pid` descends from this test process (other tests' workers are not ours)."""
    for _ in range(16):
        pid = parent_of(pid)
        if pid == os.getpid():
            return True
        if pid <= 1:
            return False
    return False


def worker_pids() -> set[int]:
    """The live Python search workers this test process started, directly or through a
    server it started."""
    found = set()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"mcpkit.coding.search.grep_worker" in cmdline.read_bytes():
                found.add(int(cmdline.parent.name))
        except OSError:
            continue
    return {pid for pid in found if not pid_gone(pid) and mine(pid)}


@pytest.fixture
async def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Client]:
    monkeypatch.setenv(grep.ENGINE_ENV, "python")
    server = build_server(CodingEnv(Workspace.at(make_workspace(tmp_path))))
    async with Client(server) as c:
        yield c


async def test_a_stuck_worker_is_killed_at_the_hard_limit(
        local: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grep, "GREP_TIMEOUT_S", 0.5)
    monkeypatch.setattr(grep, "KILL_GRACE_S", 0.5)
    before = worker_pids()
    seen: set[int] = set()

    async def watch() -> None:
        while True:
            seen.update(worker_pids() - before)
            await anyio.sleep(0.02)

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        with anyio.fail_after(LIVENESS_S * 2):
            result = await local.call_tool("grep", {"pattern": "(a+)+$", "path": "evil.txt"})
        tg.cancel_scope.cancel()
    assert not result.is_error and result.structured_content["timed_out"] is True
    assert seen and all(pid_gone(pid) for pid in seen)  # it ran, and was killed


async def test_cancelling_a_search_kills_its_worker(local: Client) -> None:
    before = worker_pids()
    async with anyio.create_task_group() as tg:
        tg.start_soon(local.call_tool, "grep", {"pattern": "(a+)+$", "path": "evil.txt"})
        with anyio.fail_after(LIVENESS_S):
            while not (started := worker_pids() - before):  # noqa: ASYNC110 (a process)
                await anyio.sleep(0.02)
        tg.cancel_scope.cancel()
    with anyio.fail_after(3):
        while not all(pid_gone(pid) for pid in started):  # noqa: ASYNC110
            await anyio.sleep(0.02)


async def test_over_stdio_the_same_connection_keeps_answering(tmp_path: Path) -> None:
    """stdio has one connection: the attack and the ordinary calls share it. Closing it
    (stdin EOF) ends the server, and the stuck worker with it."""
    ws = make_workspace(tmp_path)
    env = {**os.environ, grep.ENGINE_ENV: "python"}
    before = worker_pids()
    command = [sys.executable, "-m", "mcpkit", "serve", "--transport", "stdio",
               "--workspace", str(ws)]
    async with Client(
        command,
        connect=ConnectOptions(env=env),
    ) as c, anyio.create_task_group() as tg:
        tg.start_soon(c.call_tool, "grep", {"pattern": "(a+)+$", "path": "evil.txt"})
        with anyio.fail_after(LIVENESS_S):
            while not (started := worker_pids() - before):  # noqa: ASYNC110 (a process)
                await anyio.sleep(0.02)
        await answered_promptly(c)
        tg.cancel_scope.cancel()
    with anyio.fail_after(SIGTERM_S):  # by pid: once the server is gone it is no child of ours
        while not all(pid_gone(pid) for pid in started):  # noqa: ASYNC110
            await anyio.sleep(0.05)
