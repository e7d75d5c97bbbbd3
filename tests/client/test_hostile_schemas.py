"""A server's outputSchema cannot freeze the client (issue 20 §1's class, round two).

`Client.call_tool` checks structuredContent against the server's outputSchema
(validate_output=True by default: ServerManager and the CLI use it). The server chooses both the
schema and the value, so with Python's backtracking `re` a `^(a+)+$` pattern and
'a'*40 + '!' froze the client process, and every other server an agent was talking to with it.

Each case runs the client in its own process (so a regression fails on a bound instead of
hanging the test run) against a hostile stdio server script (support.RawServer).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .support import RawServer

REDOS = "^(a+)+$"

HOSTILE = """
TOOLS = [{{"name": "work", "inputSchema": {{"type": "object"}},
          "outputSchema": json.loads({schema!r})}}]

def on_call(message):
    result(message, {{"content": [], "structuredContent": json.loads({value!r})}})
"""

CLIENT = """
import json, sys, time
import anyio
from mcpkit.client import Client

async def main():
    async with Client(json.loads(sys.argv[1]), timeout=20) as client:
        started = time.monotonic()
        try:
            await client.call_tool("work", {})
            outcome = "ok"
        except Exception as exc:
            outcome = f"{type(exc).__name__}: {exc}"
        print(json.dumps({"outcome": outcome, "seconds": time.monotonic() - started}))

anyio.run(main)
"""


def call_hostile(tmp_path: Path, schema: dict[str, Any] | str, value: Any) -> str:
    """The client's outcome (JSON text may be given for a schema too deep to build here)."""
    schema_text = schema if isinstance(schema, str) else json.dumps(schema)
    server = RawServer(tmp_path, HOSTILE.format(schema=schema_text, value=json.dumps(value)))
    client = tmp_path / "client.py"
    client.write_text(CLIENT)
    # A generous liveness bound: the unbounded engine took hours here.
    done = subprocess.run([sys.executable, str(client), json.dumps(server.command)],
                          capture_output=True, timeout=30, check=True)
    outcome: str = json.loads(done.stdout)["outcome"]
    return outcome


def test_a_redos_output_schema_is_checked_in_linear_time(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": REDOS}}}
    outcome = call_hostile(tmp_path, schema, {"s": "a" * 40 + "!"})
    assert outcome.startswith("InvalidToolOutput: tool 'work' returned structuredContent that "
                              "does not match its outputSchema: s: ")
    assert f"does not match {REDOS!r}" in outcome


@pytest.mark.parametrize("keyword", ["additionalProperties", "unevaluatedProperties"])
def test_redos_pattern_properties_are_checked_in_linear_time(tmp_path: Path, keyword: str
                                                             ) -> None:
    schema = {"type": "object", "patternProperties": {REDOS: {}}, keyword: False}
    outcome = call_hostile(tmp_path, schema, {"a" * 40 + "!": 1})
    assert outcome.startswith("InvalidToolOutput:")


def test_a_pattern_re2_cannot_run_is_skipped_not_backtracked(tmp_path: Path) -> None:
    # (?=...) + nested quantifier: Python's re would backtrack on it; RE2 cannot compile it,
    # and the peer chose both sides, so the keyword is skipped (and logged).
    schema = {"type": "object", "properties": {"s": {"pattern": "^(?=a)(a+)+$"}}}
    assert call_hostile(tmp_path, schema, {"s": "a" * 40 + "!"}) == "ok"


def test_ref_fan_out_is_cut_off(tmp_path: Path) -> None:
    defs = {f"a{i}": {"anyOf": [{"$ref": f"#/$defs/a{i + 1}"}, {"$ref": f"#/$defs/a{i + 1}"}]}
            for i in range(40)}
    defs["a40"] = {"type": "integer"}
    schema = {"$defs": defs, "type": "object", "properties": {"x": {"$ref": "#/$defs/a0"}}}
    outcome = call_hostile(tmp_path, schema, {"x": "not an integer"})
    assert "not validated: checking it against the schema took more than" in outcome


def test_an_invalid_or_bottomless_schema_is_an_invalid_output(tmp_path: Path) -> None:
    outcome = call_hostile(tmp_path, {"type": 5}, {"x": 1})
    assert outcome.startswith("InvalidToolOutput:") and "(schema): invalid JSON Schema" in outcome
    depth = 600  # within the JSON decoders' nesting limits, past jsonschema's recursion
    deep = '{"type": "object", "properties": {"x": ' + '{"not": ' * depth + "{}" + "}" * depth
    outcome = call_hostile(tmp_path, deep + "}}", {"x": 1})
    assert outcome.startswith("InvalidToolOutput:")


def test_problems_quote_at_most_a_bounded_excerpt(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"s": {"pattern": "^b" + "[a-z]" * 200_000}}}
    outcome = call_hostile(tmp_path, schema, {"s": "a" * 1_000_000})
    assert outcome.startswith("InvalidToolOutput:") and len(outcome) < 2_000
