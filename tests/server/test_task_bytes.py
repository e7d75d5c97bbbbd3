"""The task store's byte budgets (issue 20 §3, memory bounded in bytes, not counts).

The store kept 100 finished task results per principal for their TTL whatever their size:
100 task-augmented calls returning 4 MiB each grew a stdio server by 408 MiB for ten
minutes. Results are now charged at their wire size against a per-result cap, a
per-principal budget and a total one; past a budget the oldest finished tasks are forgotten
(the storer's own first, then the biggest holder's), and a result over the cap fails its
task with -32603 instead of being kept.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.memory_bounds import MIB, ROOT, rss_bytes, settled_rss
from tests.procs import stop_process

from mcpkit.protocol import errors
from mcpkit.server import tasks
from mcpkit.server.tasks import COMPLETED, FAILED, Task, TaskStore

PRINCIPALS = ("alice", "bob", "carol", "")
TASK_SERVER = ROOT / "tests" / "server" / "task_flood_server.py"


def _task(principal: str) -> Task:
    return Task(secrets.token_hex(8), principal, ttl_ms=600_000, poll_interval_ms=100)


def _result(text_bytes: int) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "x" * text_bytes}]}


# An operation: ("start", principal) registers a running task; ("finish", index, size,
# failed) ends a running one with a result (or an error) of about `size` bytes.
# The error that replaces a result over the cap is ~170 bytes: every cap here leaves room.
operations = st.lists(
    st.one_of(
        st.tuples(st.just("start"), st.sampled_from(PRINCIPALS)),
        st.tuples(st.just("finish"), st.integers(0, 50), st.integers(0, 900), st.booleans()),
    ),
    max_size=80,
)


def _held(store: TaskStore) -> dict[str, int]:
    held: dict[str, int] = {}
    for task in store.tasks.values():
        held[task.principal] = held.get(task.principal, 0) + task.held_bytes
    return held


@settings(max_examples=200, deadline=None)
@given(ops=operations, cap=st.integers(200, 400), per_principal=st.integers(200, 800),
       extra=st.integers(0, 600))
def test_kept_results_stay_within_every_byte_budget(
    ops: list[tuple[Any, ...]], cap: int, per_principal: int, extra: int
) -> None:
    store = TaskStore(max_tasks=40, max_tasks_per_principal=20, max_result_bytes=cap,
                      max_bytes_per_principal=per_principal, max_bytes=per_principal + extra)
    effective_cap = min(cap, per_principal)
    for op in ops:
        if op[0] == "start":
            with contextlib.suppress(errors.McpError):  # the count caps: test_task_quotas
                store.register(_task(op[1]))
            continue
        running = [t for t in store.tasks.values() if not t.terminal]
        if not running:
            continue
        _, index, size, failed = op
        task = running[index % len(running)]
        others_running = {t.task_id for t in running if t is not task}
        before = {t.task_id: t for t in store.tasks.values()}
        if failed:
            error = errors.McpError(-32000, "m" * size).to_error()
            store.settle(task, FAILED, error=error, message="boom")
        else:
            store.settle(task, COMPLETED, result=_result(size))
        # the task just ended is kept, with what it ended with, or failed as too large
        assert store.tasks[task.task_id] is task and task.terminal
        assert task.held_bytes <= effective_cap
        if size > effective_cap + 64:  # far over the cap whatever the JSON around it
            assert task.status == FAILED and task.result is None
            assert task.error is not None and task.error["code"] == errors.INTERNAL_ERROR
            assert task.error["data"]["limit"] == effective_cap
        if task.status == COMPLETED:
            assert task.result == _result(size)
        # both budgets hold; a running task is never dropped
        held = _held(store)
        assert all(b <= per_principal for b in held.values()), held
        assert sum(held.values()) <= per_principal + extra
        assert others_running <= set(store.tasks)
        # another principal lost a task only once the storer had no other result to give
        dropped = [t for tid, t in before.items() if tid not in store.tasks]
        if any(t.principal != task.principal for t in dropped):
            assert not any(t.terminal and t.held_bytes and t is not task
                           for t in store.tasks.values() if t.principal == task.principal)


def test_the_storer_gives_up_its_own_oldest_result_first() -> None:
    store = TaskStore(max_result_bytes=100, max_bytes_per_principal=250, max_bytes=1000)
    kept = []
    for _ in range(3):
        task = _task("alice")
        store.register(task)
        store.settle(task, COMPLETED, result=_result(60))
        kept.append(task)
    assert kept[0].task_id not in store.tasks  # 3 x ~100 bytes > 250: the oldest went
    assert kept[1].task_id in store.tasks and kept[2].task_id in store.tasks


def test_a_full_store_takes_from_the_biggest_holder() -> None:
    store = TaskStore(max_result_bytes=100, max_bytes_per_principal=300, max_bytes=400)
    for principal, count in (("hog", 3), ("small", 1)):
        for _ in range(count):
            task = _task(principal)
            store.register(task)
            store.settle(task, COMPLETED, result=_result(60))
    newcomer = _task("new")
    store.register(newcomer)
    store.settle(newcomer, COMPLETED, result=_result(60))
    held = _held(store)
    assert held["hog"] < 300 and held["small"] > 0 and held["new"] > 0
    assert sum(held.values()) <= 400


def test_a_cancelled_task_keeps_no_late_result() -> None:
    store = TaskStore()
    task = _task("alice")
    store.register(task)
    store.cancel(task)
    store.settle(task, COMPLETED, result=_result(1000))
    assert task.status == tasks.CANCELLED and task.result is None and task.held_bytes == 0


# --- over a real process ------------------------------------------------------------------------

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {},
                                                    "extensions": {tasks.EXTENSION: {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "task-bytes-test", "version": "0"},
}
FLOOD_CALLS = 100
FLOOD_RESULT_BYTES = 2 * MIB
FLOOD_GROWTH_BOUND = tasks.DEFAULT_MAX_BYTES_PER_PRINCIPAL + 40 * MIB
"""The principal's byte budget (32 MiB) plus allocator slack and one result in transit;
without a byte budget the 100 results the count cap allows (200 MiB) were all kept."""


class StdioPeer:
    """A modern-era client of one stdio server process, one request at a time."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.next_id = 0

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method,
                   "params": {**params, "_meta": META}}
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        for _ in range(1000):  # a few notifications at most come before the answer
            line = self.proc.stdout.readline()
            assert line, "the server closed its output"
            answer: dict[str, Any] = json.loads(line)
            if answer.get("id") == self.next_id:
                return answer
        raise AssertionError("no answer")

    def call_as_task(self, name: str, **arguments: Any) -> str:
        answer = self.request("tools/call", {"name": name, "arguments": arguments})
        assert answer["result"]["resultType"] == "task", answer
        task_id: str = answer["result"]["taskId"]
        return task_id

    def wait_terminal(self, task_id: str) -> dict[str, Any]:
        for _ in range(500):
            task: dict[str, Any] = self.request("tasks/get", {"taskId": task_id})["result"]
            if task["status"] in tasks.TERMINAL:
                return task
        raise AssertionError(f"task {task_id} never ended")


@contextlib.contextmanager
def task_server_stdio() -> Iterator[StdioPeer]:
    proc = subprocess.Popen([sys.executable, str(TASK_SERVER), "--transport", "stdio"],
                            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    try:
        yield StdioPeer(proc)
    finally:
        stop_process(proc)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def test_many_big_task_results_are_held_to_the_byte_budget() -> None:
    with task_server_stdio() as peer:
        peer.wait_terminal(peer.call_as_task("blob", size=10))  # warmed up
        before = settled_rss(peer.proc.pid)
        ids = [peer.call_as_task("blob", size=FLOOD_RESULT_BYTES) for _ in range(FLOOD_CALLS)]
        newest = peer.wait_terminal(ids[-1])
        after = settled_rss(peer.proc.pid)
        print(f"\n{FLOOD_CALLS} task results of {FLOOD_RESULT_BYTES // MIB} MiB: RSS "
              f"{before / MIB:.1f} -> {after / MIB:.1f} MiB")
        assert after - before < FLOOD_GROWTH_BOUND
        # the newest result is whole; the oldest was forgotten to pay for it
        assert newest["status"] == "completed"
        assert len(newest["result"]["content"][0]["text"]) == FLOOD_RESULT_BYTES
        oldest = peer.request("tasks/get", {"taskId": ids[0]})
        assert oldest["error"]["code"] == errors.INVALID_PARAMS
        assert rss_bytes(peer.proc.pid) > 0  # still serving


def test_a_result_over_the_cap_fails_its_task_and_the_server_goes_on() -> None:
    with task_server_stdio() as peer:
        too_big = tasks.DEFAULT_MAX_RESULT_BYTES + MIB
        failed = peer.wait_terminal(peer.call_as_task("blob", size=too_big))
        assert failed["status"] == "failed" and "result" not in failed
        assert failed["error"]["code"] == errors.INTERNAL_ERROR
        assert failed["error"]["data"]["limit"] == tasks.DEFAULT_MAX_RESULT_BYTES
        assert "over the" in failed["error"]["message"]
        fine = peer.wait_terminal(peer.call_as_task("echo", text="still here"))
        assert fine["status"] == "completed"
        assert fine["result"]["content"][0]["text"] == "still here"


# --- answers (tasks/update) ---------------------------------------------------------------------


def _waiting(store: TaskStore, principal: str) -> Task:
    """A task of `principal` waiting for the answer to one elicitation ("q")."""
    task = _task(principal)
    store.register(task)
    task.pending = {"q": {"method": "elicitation/create", "params": {}}}
    task.set_status(tasks.INPUT_REQUIRED)
    return task


def _answer(size: int, key: str = "q") -> dict[str, Any]:
    return {key: {"action": "accept", "content": {"x": "a" * size}}}


def test_answers_are_capped_per_task_and_charged_to_the_budgets() -> None:
    store = TaskStore(max_result_bytes=100, max_bytes_per_principal=300, max_bytes=1000,
                      max_answer_bytes=150)
    too_big = _waiting(store, "alice")
    try:
        store.update(too_big, _answer(200))
    except errors.McpError as refused:
        assert refused.code == errors.INVALID_PARAMS and refused.data == {"limit": 150}
    else:
        raise AssertionError("an answer over the per-task cap was taken")
    assert too_big.pending and not too_big.answers and too_big.answer_bytes == 0
    finished = _task("alice")
    store.register(finished)
    store.settle(finished, COMPLETED, result=_result(40))
    waiting = [_waiting(store, "alice") for _ in range(3)]
    for task in waiting[:2]:
        store.update(task, _answer(100))  # the finished result is forgotten to pay
    assert finished.task_id not in store.tasks
    try:
        store.update(waiting[2], _answer(100))
    except errors.McpError as refused:
        assert refused.code == errors.SERVER_BUSY
    else:
        raise AssertionError("answers past the principal's budget were taken")
    assert store.held_bytes("alice") <= 300
    store.settle(waiting[0], COMPLETED, result=_result(10))  # its answers go as it ends
    assert waiting[0].answers == {} and waiting[0].answer_bytes == 0
    store.update(waiting[2], _answer(100))
    assert waiting[2].answers and store.held_bytes("alice") <= 300


ANSWERS = 60
ANSWER_BYTES = 900_000
ANSWERS_GROWTH_BOUND = 24 * MIB
"""Answers are dropped as their task ends; they were kept for the TTL (60 x 0.9 MiB: ~55 MiB
for one principal; 100 tasks x 4 MiB was within reach)."""


def test_answers_are_not_kept_once_their_task_has_ended() -> None:
    with task_server_stdio() as peer:
        peer.wait_terminal(peer.call_as_task("blob", size=10))
        before = settled_rss(peer.proc.pid)
        over = peer.call_as_task("ask")
        _wait_input(peer, over)
        refused = peer.request("tasks/update", {
            "taskId": over, "inputResponses": _answer(tasks.DEFAULT_MAX_ANSWER_BYTES, "question")})
        assert refused["error"]["code"] == errors.INVALID_PARAMS
        assert refused["error"]["data"]["limit"] == tasks.DEFAULT_MAX_ANSWER_BYTES
        for _ in range(ANSWERS):
            task_id = peer.call_as_task("ask")
            _wait_input(peer, task_id)
            answer = _answer(ANSWER_BYTES, "question")
            taken = peer.request("tasks/update", {"taskId": task_id, "inputResponses": answer})
            assert "result" in taken, taken
            assert peer.wait_terminal(task_id)["status"] == "completed"
        after = settled_rss(peer.proc.pid)
        print(f"\n{ANSWERS} task answers of {ANSWER_BYTES / MIB:.1f} MiB: RSS "
              f"{before / MIB:.1f} -> {after / MIB:.1f} MiB")
        assert after - before < ANSWERS_GROWTH_BOUND


def _wait_input(peer: StdioPeer, task_id: str) -> None:
    for _ in range(500):
        status = peer.request("tasks/get", {"taskId": task_id})["result"]["status"]
        if status == tasks.INPUT_REQUIRED:
            return
    raise AssertionError(f"task {task_id} never asked for input")
