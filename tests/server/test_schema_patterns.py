"""Hand-written tool schemas cannot stall the server (issue 20 §1's class, round two).

A tool author's inputSchema `pattern` meets caller-supplied arguments. With Python's
backtracking `re` (jsonschema's stock keyword), `^(a+)+$` against 'a'*40 + '!' held the GIL
for hours: the server answered nothing else and ignored SIGTERM. Patterns now run on RE2.

- real process: a stdio mcpkit server is sent the attack and, right behind it, a normal
  request; both are answered within a generous bound, and SIGTERM still stops it;
- a pattern RE2 cannot run (lookaround) is refused when the tool is registered;
- property: on patterns RE2 supports, the bounded validator agrees with jsonschema's stock one;
- uniqueItems over many distinct objects, `$ref` fan-out and `$ref` cycles stay bounded.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.procs import free_port, stop_process, wait_for_port

from mcpkit.client import Client, Timeouts
from mcpkit.server.server import Server
from mcpkit.validation import SchemaValidator

REDOS = "^(a+)+$"
ATTACK = "a" * 40 + "!"

SERVER = f"""
from mcpkit.server.server import Server

server = Server("patterns")
server.add_tool(lambda **kw: "matched", name="strict", input_schema={{
    "type": "object", "properties": {{"s": {{"type": "string", "pattern": {REDOS!r}}}}},
    "patternProperties": {{{REDOS!r}: {{}}}}, "additionalProperties": False}})

@server.tool()
def hello() -> str:
    return "hello"

import sys
if len(sys.argv) > 1:
    server.run_http(port=int(sys.argv[1]))
else:
    server.run_stdio()
"""


class StdioPeer:
    """JSON lines to and from a real server process, every read bounded in time."""

    def __init__(self, script: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=dict(os.environ))
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(json.loads(line))

    def close(self) -> None:
        stop_process(self.proc)
        self.reader.join(timeout=5)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def answers(self, ids: set[int], limit_s: float) -> dict[int, dict[str, Any]]:
        deadline, found = time.monotonic() + limit_s, {}
        while set(found) != ids:
            message = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if message.get("id") in ids:
                found[message["id"]] = message
        return found


def call(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}


def test_a_redos_argument_neither_stalls_the_server_nor_blocks_sigterm(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    peer = StdioPeer(script)
    try:
        peer.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}})
        peer.answers({0}, limit_s=15)
        peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        peer.send(call(1, "strict", {"s": ATTACK}))         # pattern
        peer.send(call(2, "strict", {ATTACK: 1}))           # additionalProperties' lookup
        peer.send(call(3, "hello", {}))                     # the normal request behind them
        started = time.monotonic()
        answers = peer.answers({1, 2, 3}, limit_s=5)  # a liveness bound, not a benchmark
        assert time.monotonic() - started < 5
        assert answers[3]["result"]["content"][0]["text"] == "hello"
        first = answers[1]["result"]
        assert first["isError"] is True
        assert f"does not match {REDOS!r}" in first["content"][0]["text"]
        second = answers[2]["result"]
        assert second["isError"] is True and "do not match any of the regexes" in (
            second["content"][0]["text"])
        peer.send(call(4, "strict", {"s": "aaaa", "aaa": 1}))
        assert "isError" not in peer.answers({4}, limit_s=5)[4]["result"]
        peer.send(call(5, "strict", {"s": ATTACK * 1000}))  # long: still linear
        peer.proc.send_signal(signal.SIGTERM)
        assert peer.proc.wait(timeout=5) is not None
    finally:
        peer.close()


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    """The same server over Streamable HTTP on 127.0.0.1; its URL."""
    script, port = tmp_path / "server.py", free_port()
    script.write_text(SERVER)
    proc = subprocess.Popen([sys.executable, str(script), str(port)], env=dict(os.environ))
    try:
        wait_for_port(proc, port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(proc)


@pytest.mark.anyio
async def test_over_http_a_redos_argument_and_a_normal_call_are_both_answered(http_server: str
                                                                             ) -> None:
    answers: dict[str, Any] = {}
    async with Client(http_server, timeouts=Timeouts(timeout=10)) as client:

        async def ask(name: str, arguments: dict[str, Any]) -> None:
            answers[name] = await client.call_tool(name, arguments)

        with anyio.fail_after(5):  # a liveness bound: the backtracking match took hours
            async with anyio.create_task_group() as group:
                group.start_soon(ask, "strict", {"s": ATTACK})
                group.start_soon(ask, "hello", {})
    assert answers["strict"].is_error is True
    assert answers["hello"].content[0].text == "hello"


def test_a_pattern_re2_cannot_run_is_refused_at_registration() -> None:
    server = Server("refuse")
    with pytest.raises(ValueError, match=r"pattern '\(\?=a\)b' cannot be matched in linear "
                                         r"time.*lookaround or backreferences"):
        server.add_tool(lambda **kw: "x", name="look", input_schema={
            "type": "object", "properties": {"s": {"type": "string", "pattern": "(?=a)b"}}})
    with pytest.raises(ValueError, match=r"pattern '\(a\)\\\\1'"):
        server.add_tool(lambda **kw: "x", name="back", input_schema={
            "type": "object", "patternProperties": {"(a)\\1": {}}})


# --- agreement with jsonschema on what RE2 runs --------------------------------------------

ATOMS = st.sampled_from(["a", "b", ".", "[ab]", "[^a]", "\\d", "x"])


def _regex(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(children, children).map("".join),
        st.tuples(children, children).map(lambda p: f"{p[0]}|{p[1]}"),
        st.tuples(children, st.sampled_from(["*", "+", "?", "{1,2}"])).map(
            lambda p: f"({p[0]}){p[1]}"),
    )


PATTERNS = st.tuples(st.sampled_from(["", "^"]), st.recursive(ATOMS, _regex, max_leaves=6),
                     st.sampled_from(["", "$"])).map("".join)
TEXTS = st.text(alphabet="ab1x", max_size=8)


@settings(max_examples=300, deadline=None)
@given(PATTERNS, TEXTS)
def test_bounded_patterns_agree_with_jsonschema(pattern: str, text: str) -> None:
    for schema, value in (({"pattern": pattern}, text),
                          ({"patternProperties": {pattern: {"type": "integer"}},
                            "additionalProperties": False}, {text: 1}),
                          ({"patternProperties": {pattern: True},
                            "unevaluatedProperties": False}, {text: 1})):
        stock = jsonschema.Draft202012Validator(schema).is_valid(value)
        assert (SchemaValidator(schema).errors(value) == []) is stock, (schema, value)


JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([1.0, 2.5])
                    | st.text("ab", max_size=2),
                    lambda kids: st.lists(kids, max_size=3)
                    | st.dictionaries(st.text("ab", max_size=2), kids, max_size=3),
                    max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(st.lists(JSON, max_size=6))
def test_unique_items_agrees_with_jsonschema(items: list[Any]) -> None:
    schema = {"uniqueItems": True}
    stock = jsonschema.Draft202012Validator(schema).is_valid(items)
    assert (SchemaValidator(schema).errors(items) == []) is stock, items


# --- the other expansions -------------------------------------------------------------------

def test_unique_items_over_many_distinct_objects_is_linear() -> None:
    # Stock jsonschema compares every pair of unsortable items: 5e9 comparisons here.
    items = [{"n": i} for i in range(100_000)]
    assert SchemaValidator({"uniqueItems": True}).errors(items) == []
    assert SchemaValidator({"uniqueItems": True}).errors([*items, {"n": 7.0}]) != []


def test_ref_fan_out_is_cut_off_by_the_step_budget() -> None:
    defs = {f"a{i}": {"allOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]}
            for i in range(40)}
    defs["a40"] = {"type": "string"}
    validator = SchemaValidator({"$defs": defs, "$ref": "#/$defs/a0"}, max_steps=5_000)
    (problem,) = validator.errors("x")
    assert "took more than 5020 keyword evaluations (max_steps=5000" in problem


def test_a_ref_cycle_is_reported_not_raised() -> None:
    assert SchemaValidator({"$ref": "#"}).errors(1) == [
        "(root): not validated: the schema refers to itself without end"]
