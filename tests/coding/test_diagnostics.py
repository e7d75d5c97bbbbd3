"""The `diagnostics` tool on real files: Python syntax errors (in-process compile), ruff
findings, the pyflakes fallback, `bash -n`, `cargo check`, a workspace-wide run honouring
.gitignore, refusals, the cap, a hung tool killed with its children, and a real stdio
`mcpkit serve`. Tests of tools that are not installed are skipped."""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.coding.processes import gone, hanging_tool

from mcpkit.client import Client
from mcpkit.coding.diagnostics import render, run
from mcpkit.coding.env import CodingEnv
from mcpkit.coding.server import build_server
from mcpkit.coding.workspace import Workspace

pytestmark = pytest.mark.anyio

SYNTAX_ERROR = "x = 1\ndef f(:\n    pass\n"
CLEAN = "def f() -> int:\n    return 1\n"


def make_tree(root: Path, files: dict[str, str]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def has_tool(name: str, root: Path) -> bool:
    return run.find_tool(name, Workspace.at(root)) is not None


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
async def client(ws: Path) -> AsyncIterator[Client]:
    async with Client(build_server(CodingEnv(Workspace.at(ws)))) as c:
        yield c


@pytest.fixture
def no_linters(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither ruff nor pyflakes: only the in-process compile runs for Python."""
    real = run.find_tool
    monkeypatch.setattr(run, "find_tool",
                        lambda name, workspace: None if name == "ruff" else real(name, workspace))
    monkeypatch.setattr(run, "pyflakes_argv", lambda: None)


async def call(client: Client, **arguments: Any) -> tuple[str, Any, bool]:
    result = await client.call_tool("diagnostics", arguments)
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    return text, result.structured_content, bool(result.is_error)


def where(data: Any) -> list[tuple[str, int, int, str, str]]:
    return [(d["path"], d["line"], d["column"], d["severity"], d["source"])
            for d in data["diagnostics"]]


# --- Python ----------------------------------------------------------------------------------


async def test_python_syntax_error_line_and_column(client: Client, ws: Path) -> None:
    make_tree(ws, {"pkg/bad.py": SYNTAX_ERROR})
    text, data, is_error = await call(client, file_path="pkg/bad.py")
    assert not is_error
    compiled = [d for d in data["diagnostics"] if d["source"] == "python"]
    assert len(compiled) == 1
    assert (compiled[0]["path"], compiled[0]["line"], compiled[0]["column"]) == (
        "pkg/bad.py", 2, 7)
    assert compiled[0]["severity"] == "error" and "SyntaxError" in compiled[0]["message"]
    assert "pkg/bad.py:2:7 error SyntaxError" in text
    assert "python-compile" in data["tools_run"]
    # ruff's report of the same error is not listed twice.
    assert not any(d["line"] == 2 and d["source"] != "python" for d in data["diagnostics"])
    written = {p.name for p in ws.iterdir()}  # noqa: ASYNC240 - a tiny directory
    assert written == {"pkg"} and {p.name for p in (ws / "pkg").iterdir()} == {"bad.py"}


async def test_ruff_unused_import(client: Client, ws: Path) -> None:
    if not has_tool("ruff", ws):
        pytest.skip("ruff is not installed (on PATH or next to sys.executable)")
    make_tree(ws, {"u.py": "import os\n"})
    text, data, _ = await call(client, file_path="u.py")
    assert ("u.py", 1, 8, "warning", "ruff") in where(data)
    f401 = next(d for d in data["diagnostics"] if d["source"] == "ruff")
    assert f401["message"].startswith("F401") and "os" in f401["message"]
    assert data["tools_run"] == ["ruff", "python-compile"]
    assert text.splitlines()[0] == "Checked u.py; ran: ruff, python-compile."
    assert "u.py:1:8 warning F401" in text


async def test_ruff_never_fixes(client: Client, ws: Path) -> None:
    if not has_tool("ruff", ws):
        pytest.skip("ruff is not installed (on PATH or next to sys.executable)")
    make_tree(ws, {"pyproject.toml": "[tool.ruff]\nfix = true\n", "u.py": "import os\n"})
    _, data, _ = await call(client)
    assert ("u.py", 1, 8, "warning", "ruff") in where(data)
    assert (ws / "u.py").read_text() == "import os\n"


async def test_clean_file_has_no_diagnostics(client: Client, ws: Path) -> None:
    make_tree(ws, {"ok.py": CLEAN})
    text, data, is_error = await call(client, file_path="ok.py")
    assert not is_error
    assert data["diagnostics"] == [] and data["total"] == 0 and data["truncated"] is False
    assert "No diagnostics." in text


@pytest.mark.usefixtures("no_linters")
async def test_without_ruff_or_pyflakes_compile_still_runs(client: Client, ws: Path) -> None:
    make_tree(ws, {"u.py": "import os\n", "bad.py": SYNTAX_ERROR})
    text, data, _ = await call(client)
    assert data["tools_run"] == ["python-compile"]
    assert {"ruff", "pyflakes"} <= set(data["tools_missing"])
    assert "python" not in data["languages_without_tools"]  # compile covers it
    assert where(data) == [("bad.py", 2, 7, "error", "python")]
    assert "Not installed (skipped): ruff, pyflakes" in text


async def test_pyflakes_fallback(client: Client, ws: Path, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    real = run.find_tool
    monkeypatch.setattr(run, "find_tool",
                        lambda name, workspace: None if name == "ruff" else real(name, workspace))
    # A stand-in with pyflakes' output format (the real one may not be installed).
    fake = tmp_path / "fake_pyflakes.py"
    fake.write_text(
        "import sys\n"
        "for path in sys.argv[1:]:\n"
        "    if open(path).read().startswith('import os'):\n"
        "        print(f\"{path}:1:1: 'os' imported but unused\")\n"
        "        sys.exit(1)\n"
    )
    monkeypatch.setattr(run, "pyflakes_argv", lambda: [sys.executable, str(fake)])
    make_tree(ws, {"u.py": "import os\n", "ok.py": CLEAN})
    _, data, _ = await call(client)
    assert data["tools_run"] == ["pyflakes", "python-compile"]
    assert data["diagnostics"] == [{"path": "u.py", "line": 1, "column": 1,
                                    "severity": "warning", "source": "pyflakes",
                                    "message": "'os' imported but unused"}]
    assert "ruff" in data["tools_missing"] and "pyflakes" not in data["tools_missing"]


async def test_long_file_lists_are_split_into_runs(client: Client, ws: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert run.batches(["aaaa", "bb", "cc", "d"]) == [["aaaa", "bb", "cc", "d"]]
    monkeypatch.setattr(run, "MAX_ARG_BYTES", 8)
    assert run.batches(["aaaa", "bb", "cc", "d"]) == [["aaaa", "bb"], ["cc", "d"]]
    assert run.batches(["a" * 20, "b"]) == [["a" * 20], ["b"]]
    monkeypatch.setattr(run, "find_tool", lambda name, workspace: None)
    fake = tmp_path / "fake_pyflakes.py"
    fake.write_text("import sys\nfor path in sys.argv[1:]:\n    print(f'{path}:1:1: seen')\n")
    monkeypatch.setattr(run, "pyflakes_argv", lambda: [sys.executable, str(fake)])
    make_tree(ws, {f"m{i}.py": CLEAN for i in range(5)})
    _, data, _ = await call(client)
    assert [d["path"] for d in data["diagnostics"]] == [f"m{i}.py" for i in range(5)]


# --- shell, Rust -----------------------------------------------------------------------------


async def test_shell_syntax_error(client: Client, ws: Path) -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    make_tree(ws, {"scripts/b.sh": "echo start\nif x\nfi\n",
                   "scripts/ok.sh": "echo fine\n"})
    _, data, _ = await call(client, file_path="scripts/b.sh")
    bash = [d for d in data["diagnostics"] if d["source"] == "bash -n"]
    assert [(d["path"], d["line"], d["severity"]) for d in bash] == [
        ("scripts/b.sh", 3, "error")]
    assert "unexpected token" in bash[0]["message"]
    assert "bash -n" in data["tools_run"]
    _, data, _ = await call(client, file_path="scripts/ok.sh")
    assert not [d for d in data["diagnostics"] if d["source"] == "bash -n"]
    # Files without an extension are known by their shebang.
    make_tree(ws, {"bin/tool": "#!/usr/bin/env bash\nif x\nfi\n",
                   "bin/py": "#!/usr/bin/python3\n" + SYNTAX_ERROR})
    _, data, _ = await call(client, file_path="bin/tool")
    assert ("bin/tool", 3, 0, "error", "bash -n") in where(data)
    _, data, _ = await call(client, file_path="bin/py")
    assert ("bin/py", 3, 7, "error", "python") in where(data)


async def test_cargo_check(client: Client, ws: Path) -> None:
    if not has_tool("cargo", ws):
        pytest.skip("cargo is not installed")
    make_tree(ws, {
        "crate/Cargo.toml": '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n',
        "crate/src/main.rs": 'fn main() {\n    let y: u32 = "a";\n}\n',
    })
    text, data, _ = await call(client, file_path="crate/src/main.rs")
    if data["tools_run"] == ["cargo check"] and not data["diagnostics"] and "failed" in text:
        pytest.skip(f"cargo check does not work here: {text}")
    assert where(data) == [("crate/src/main.rs", 2, 18, "error", "cargo check")]
    assert data["diagnostics"][0]["message"].startswith("E0308 mismatched types")


# --- the whole workspace ---------------------------------------------------------------------


async def test_workspace_run_honours_gitignore(client: Client, ws: Path) -> None:
    make_tree(ws, {
        ".gitignore": "ignored/\ngenerated_*.py\n",
        "good.py": CLEAN,
        "bad.py": SYNTAX_ERROR,
        "sub/bad2.py": "def g():\n  return (\n",
        "sub/.gitignore": "local.py\n",
        "sub/local.py": SYNTAX_ERROR,
        "ignored/bad3.py": SYNTAX_ERROR,
        "generated_x.py": SYNTAX_ERROR,
        ".venv/lib/bad4.py": SYNTAX_ERROR,
        "node_modules/pkg/x.py": SYNTAX_ERROR,
        "run.sh": "if true; then\n  echo\n",
        "notes.txt": "def (:\n",
    })
    (ws / "linked.py").symlink_to(ws / "bad.py")
    text, data, is_error = await call(client)
    assert not is_error
    paths = {d["path"] for d in data["diagnostics"]}
    assert {"bad.py", "sub/bad2.py"} <= paths
    for hidden in ("sub/local.py", "ignored/bad3.py", "generated_x.py", ".venv/lib/bad4.py",
                   "node_modules/pkg/x.py", "notes.txt", "linked.py", "good.py"):
        assert hidden not in paths, hidden
    assert data["files_checked"] == 4  # good.py, bad.py, sub/bad2.py, run.sh
    if shutil.which("bash"):
        assert ("run.sh", 3, 0, "error", "bash -n") in where(data)
    assert text.splitlines()[0].startswith("Checked the workspace (4 files); ran: ")
    assert data["diagnostics"] == sorted(
        data["diagnostics"], key=lambda d: (d["path"], d["line"], d["column"]))


async def test_languages_without_tools_are_named(client: Client, ws: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    real = run.find_tool
    monkeypatch.setattr(run, "find_tool", lambda name, workspace: None if name in (
        "go", "gofmt", "tsc", "eslint") else real(name, workspace))
    make_tree(ws, {"main.go": "package main\n", "web/app.ts": "let x: number = 'a'\n",
                   "ok.py": CLEAN})
    text, data, is_error = await call(client)
    assert not is_error
    assert set(data["languages_without_tools"]) == {"go", "javascript/typescript"}
    assert {"go", "gofmt", "tsc", "eslint"} <= set(data["tools_missing"])
    assert "No tool installed for: javascript/typescript (tsc, eslint); go (go)." in text
    _, data, is_error = await call(client, file_path="web/app.ts")
    assert not is_error and data["tools_run"] == [] and data["diagnostics"] == []
    assert data["languages_without_tools"] == ["javascript/typescript"]


async def test_unknown_language_and_refusals(client: Client, ws: Path, tmp_path: Path) -> None:
    make_tree(ws, {"README.md": "# hi\n", "d/x.py": CLEAN})
    outside = tmp_path / "outside.py"
    outside.write_text(SYNTAX_ERROR)
    (ws / "escape.py").symlink_to(outside)
    text, data, is_error = await call(client, file_path="README.md")
    assert not is_error and data["tools_run"] == [] and "No diagnostics tools for" in text
    for path in (str(outside), "../outside.py", "escape.py", "/etc/passwd", "missing.py",
                 "d", "d/../d/x.py"):
        text, _, is_error = await call(client, file_path=path)
        assert is_error, path
        assert len(text.splitlines()) == 1, text


async def test_cap_says_how_many_more(client: Client, ws: Path) -> None:
    make_tree(ws, {"many.py": "x = 1 is 1\n" * 600})  # a SyntaxWarning per line
    text, data, _ = await call(client, file_path="many.py")
    assert data["total"] >= 600 and data["truncated"] is True
    assert len(data["diagnostics"]) == render.MAX_SHOWN
    shown = [line for line in text.splitlines() if line.startswith("many.py:")]
    assert len(shown) == render.MAX_SHOWN
    assert text.splitlines()[-1] == (f"({data['total'] - render.MAX_SHOWN} more not "
                                     "shown; give file_path to narrow)")


# --- external tools are bounded: killed (with their children) on timeout and on cancel -------


def fake_tool(tmp_path: Path) -> Path:
    return hanging_tool(tmp_path, "ruff", "tool")


async def wait_until_gone(tmp_path: Path) -> None:
    for _ in range(200):
        if all(gone(tmp_path / name) for name in ("tool.pid", "child.pid")):
            return
        await anyio.sleep(0.01)
    raise AssertionError("the tool (or its child) is still running")


async def test_hung_tool_killed_on_timeout(client: Client, ws: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    tool = fake_tool(tmp_path)
    monkeypatch.setattr(run, "find_tool",
                        lambda name, workspace: str(tool) if name == "ruff" else None)
    monkeypatch.setattr(run, "TOOL_TIMEOUT_S", 0.5)
    make_tree(ws, {"bad.py": SYNTAX_ERROR})
    text, data, is_error = await call(client)
    assert not is_error
    assert "ruff stopped after 0.5 s" in text
    assert where(data) == [("bad.py", 2, 7, "error", "python")]
    await wait_until_gone(tmp_path)


async def test_hung_tool_killed_on_cancel(client: Client, ws: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    tool = fake_tool(tmp_path)
    monkeypatch.setattr(run, "find_tool",
                        lambda name, workspace: str(tool) if name == "ruff" else None)
    make_tree(ws, {"ok.py": CLEAN})
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: call(client, file_path="ok.py"))
        for _ in range(500):
            if (tmp_path / "tool.pid").exists() and (tmp_path / "child.pid").exists():
                break
            await anyio.sleep(0.01)
        else:
            raise AssertionError("the fake tool did not start")
        tg.cancel_scope.cancel()
    await wait_until_gone(tmp_path)


# --- over a real stdio server ----------------------------------------------------------------


async def test_diagnostics_over_stdio(ws: Path) -> None:
    make_tree(ws, {"bad.py": SYNTAX_ERROR, "ok.py": CLEAN})
    command = [sys.executable, "-m", "mcpkit", "serve", "--transport", "stdio",
               "--workspace", str(ws)]
    async with Client(command) as c:
        tools = {t.name: t for t in await c.list_tools()}
        tool = tools["diagnostics"]
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
        assert tool.output_schema is not None
        assert "diagnostics" in tool.output_schema["properties"]
        text, data, is_error = await call(c, file_path="bad.py")
        assert not is_error and "bad.py:2:7 error SyntaxError" in text
        assert ("bad.py", 2, 7, "error", "python") in where(data)
        _, data, _ = await call(c)
        assert {d["path"] for d in data["diagnostics"]} == {"bad.py"}
        text, _, is_error = await call(c, file_path="../x.py")
        assert is_error and "'..'" in text
