"""The official TypeScript SDK client (tests/js/node_modules) against mcpkit servers.

Runs tests/interop/js/ts_sdk_client.mjs with `node`; it prints a JSON summary that is checked
here. Needs `bash scripts/install_js_peers.sh` (CI runs it); skipped without node_modules.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import JS_NODE_MODULES, ROOT

SCRIPT = Path(__file__).parent / "js" / "ts_sdk_client.mjs"
SDK = JS_NODE_MODULES / "@modelcontextprotocol" / "sdk" / "package.json"

pytestmark = [
    pytest.mark.interop,
    pytest.mark.skipif(
        not SDK.exists(),
        reason="tests/js/node_modules is missing: run `bash scripts/install_js_peers.sh`",
    ),
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not on PATH"),
]


def _run(*args: str) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None
    proc = subprocess.run(
        [node, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=30,
        stdin=subprocess.DEVNULL,
    )
    lines = proc.stdout.strip().splitlines()
    assert lines, f"no output (rc={proc.returncode}); stderr:\n{proc.stderr}"
    out: dict[str, Any] = json.loads(lines[-1])
    assert out.get("ok"), f"{out.get('error')}\nstderr:\n{proc.stderr}"
    assert proc.returncode == 0, proc.stderr
    return out


def _check(out: dict[str, Any]) -> None:
    assert out["serverName"] == "mcpkit-conformance-server"
    assert {"test_simple_text", "test_tool_with_progress", "test_sampling",
            "test_elicitation"} <= set(out["tools"])
    assert out["simpleText"] == "This is a simple text response for testing."
    assert out["progressResult"] == "Progress test completed"
    assert [p[0] for p in out["progress"]] == [0, 50, 100]
    assert all(p[1] == 100 for p in out["progress"])
    assert out["sampling"] == "LLM response: four"
    assert out["seen"] == {"sampling": [1], "elicitation": ["Who are you?"]}
    assert out["elicitation"].startswith("User response: action=accept")
    assert "alice@example.com" in out["elicitation"]
    assert out["static"] == [{"uri": "test://static-text", "mimeType": "text/plain",
                              "text": "This is the content of the static text resource."}]
    assert out["template"][0]["uri"] == "test://template/42/data"
    assert json.loads(out["template"][0]["text"])["id"] == "42"
    assert out["simplePrompt"] == ["This is a simple prompt for testing."]
    assert out["argsPrompt"] == ["Prompt with arguments: arg1='one', arg2='two'"]


def test_ts_sdk_stdio() -> None:
    _check(_run("stdio", sys.executable, "-m", "mcpkit.testing.conformance_server",
                "--transport", "stdio"))


def test_ts_sdk_streamable_http(conformance_http_url: str) -> None:
    out = _run("http", conformance_http_url)
    _check(out)
    assert out["protocolVersion"] == "2025-11-25"
