"""The search tools (`glob`, `grep`, `ls`) on real files: .gitignore (nested, negation,
dir-only), newest-first order, caps and "N more", grep modes over both engines (ripgrep and
the Python fallback), binary files, invalid regexes, symlinks out of the workspace, `../`,
and a few calls over a real stdio `mcpkit serve`."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.coding.processes import gone, hanging_tool

from mcpkit.client import Client
from mcpkit.coding.deadline import Deadline
from mcpkit.coding.env import CodingEnv
from mcpkit.coding.search import glob, grep_engines, ls, rg_json
from mcpkit.coding.search.globmatch import compile_glob, glob_depth, split_literal_prefix
from mcpkit.coding.server import build_server
from mcpkit.coding.workspace import Workspace

pytestmark = pytest.mark.anyio

FILES: dict[str, str | bytes] = {
    ".gitignore": "*.log\n!keep.log\nbuild/\n/top_only.txt\n",
    ".git/config": "needle in git\n",
    "a.py": "import os\nneedle = 1\n",
    "keep.log": "needle\n",
    "drop.log": "needle\n",
    "top_only.txt": "needle\n",
    "build/out.py": "needle\n",
    "src/.gitignore": "*.tmp\n!important.tmp\ngenerated/\n",
    "src/top_only.txt": "needle\n",
    "src/mod.py": "def needle():\n    return 1\n\n\nx = 2\ny = 3\nz = needle()\n",
    "src/generated/gen.py": "needle\n",
    "src/x.tmp": "needle\n",
    "src/important.tmp": "needle\n",
    "src/deep/inner.py": "NEEDLE upper\n",
    "data.bin": b"needle\x00\x01\x02binary",
}
VISIBLE_NEEDLE = {"a.py", "keep.log", "src/top_only.txt", "src/mod.py", "src/important.tmp"}


def make_tree(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    make_tree(root, FILES)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("needle secret\n")
    (root / "escape").symlink_to(outside, target_is_directory=True)
    (root / "escape.py").symlink_to(outside / "secret.py")
    return root


@pytest.fixture
async def client(tree: Path) -> AsyncIterator[Client]:
    server = build_server(CodingEnv(Workspace.at(tree)))
    async with Client(server) as c:
        yield c


@pytest.fixture(params=["ripgrep", "python"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    name: str = request.param
    if name == "python":
        monkeypatch.setenv(grep_engines.ENGINE_ENV, "python")
    else:
        monkeypatch.delenv(grep_engines.ENGINE_ENV, raising=False)
        if grep_engines.find_ripgrep() is None:
            pytest.skip("ripgrep (rg) is not installed")
    return name


async def call(client: Client, tool: str, **arguments: Any) -> tuple[str, Any, bool]:
    result = await client.call_tool(tool, arguments)
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    return text, result.structured_content, bool(result.is_error)


# --- glob ------------------------------------------------------------------------------------


async def test_glob_honours_gitignore_nested_and_negation(client: Client) -> None:
    _, data, is_error = await call(client, "glob", pattern="**/*")
    assert not is_error
    files = set(data["files"])
    assert {"a.py", "keep.log", ".gitignore", "src/.gitignore", "src/top_only.txt",
            "src/mod.py", "src/important.tmp", "src/deep/inner.py", "data.bin"} <= files
    for hidden in ("drop.log", "top_only.txt", "build/out.py", "src/generated/gen.py",
                   "src/x.tmp", ".git/config"):
        assert hidden not in files, hidden
    # The symlinks point out of the workspace: neither listed nor followed.
    assert not any(f.startswith("escape") for f in files)
    assert data["total"] == len(files) and data["truncated"] is False


async def test_glob_newest_first_and_patterns(client: Client, tree: Path) -> None:
    now = time.time()
    for age, rel in enumerate(["src/deep/inner.py", "a.py", "src/mod.py"]):
        os.utime(tree / rel, (now - 100 * age, now - 100 * age))
    text, data, _ = await call(client, "glob", pattern="**/*.py")
    assert data["files"] == ["src/deep/inner.py", "a.py", "src/mod.py"]
    assert text.splitlines() == data["files"]
    _, data, _ = await call(client, "glob", pattern="*.py")
    assert data["files"] == ["a.py"]  # `*` stays in the directory
    _, data, _ = await call(client, "glob", pattern="src/**/*.py")
    assert set(data["files"]) == {"src/mod.py", "src/deep/inner.py"}
    _, data, _ = await call(client, "glob", pattern="*.py", path="src")
    assert data["files"] == ["src/mod.py"]
    _, data, _ = await call(client, "glob", pattern="**/*.{log,tmp}")
    assert set(data["files"]) == {"keep.log", "src/important.tmp"}
    _, data, _ = await call(client, "glob", pattern=str(tree / "src" / "*.py"))
    assert data["files"] == ["src/mod.py"]
    text, data, is_error = await call(client, "glob", pattern="*.rs")
    assert not is_error and data["total"] == 0 and "No files match" in text
    assert "**/*.rs" in text


async def test_glob_cap_says_how_many_more(tmp_path: Path) -> None:
    make_tree(tmp_path, {f"d/f{i:03}.txt": "x" for i in range(250)})
    async with Client(build_server(CodingEnv(Workspace.at(tmp_path)))) as c:
        text, data, _ = await call(c, "glob", pattern="**/*.txt")
        assert len(data["files"]) == 200 and data["total"] == 250 and data["truncated"]
        assert text.splitlines()[-1].startswith("(50 more files not shown")
        _, data, _ = await call(c, "glob", pattern="**/*.txt", limit=10)
        assert len(data["files"]) == 10


async def test_glob_refusals(client: Client) -> None:
    for arguments in ({"pattern": "*.py", "path": "../"}, {"pattern": "../*.py"},
                      {"pattern": "*", "path": "/etc"}, {"pattern": "*", "path": "escape"},
                      {"pattern": "*", "path": "missing"}, {"pattern": "*", "path": "a.py"}):
        text, _, is_error = await call(client, "glob", **arguments)
        assert is_error, arguments
        assert len(text.splitlines()) == 1, text


def test_glob_translation() -> None:
    assert compile_glob("**/*.py").match("a.py") and compile_glob("**/*.py").match("x/y/a.py")
    assert not compile_glob("*.py").match("x/a.py")
    assert compile_glob("src/*.{ts,tsx}").match("src/a.tsx")
    assert compile_glob("a/**").match("a/b/c") and compile_glob("[!x]?.txt").match("ab.txt")
    assert not compile_glob("a/**").match("a")
    assert split_literal_prefix("src/pkg/**/*.py") == ("src/pkg", "**/*.py")
    assert split_literal_prefix("*.py") == ("", "*.py")
    assert glob_depth("*.py") == 1 and glob_depth("a/*/b") == 3 and glob_depth("**/x") is None


# --- grep ------------------------------------------------------------------------------------


async def test_grep_files_with_matches(client: Client, tree: Path, engine: str) -> None:
    now = time.time()
    for age, rel in enumerate(sorted(VISIBLE_NEEDLE)):
        os.utime(tree / rel, (now - 10 * age, now - 10 * age))
    text, data, is_error = await call(client, "grep", pattern="needle")
    assert not is_error, text
    assert data["engine"] == engine and data["mode"] == "files_with_matches"
    # .gitignore (nested, negated), .git, binary files and symlinks out are all skipped.
    assert data["files"] == sorted(VISIBLE_NEEDLE)  # newest first = the order of utime above
    assert text.splitlines() == data["files"]
    _, data, _ = await call(client, "grep", pattern="needle", case_insensitive=True)
    assert set(data["files"]) == VISIBLE_NEEDLE | {"src/deep/inner.py"}
    _, data, _ = await call(client, "grep", pattern="needle", include="*.py")
    assert set(data["files"]) == {"a.py", "src/mod.py"}
    _, data, _ = await call(client, "grep", pattern="needle", include="*.{log,tmp}")
    assert set(data["files"]) == {"keep.log", "src/important.tmp"}
    _, data, _ = await call(client, "grep", pattern="needle", path="src")
    assert set(data["files"]) == {"src/top_only.txt", "src/mod.py", "src/important.tmp"}
    text, data, _ = await call(client, "grep", pattern="nothing-like-this")
    assert data["files"] == [] and "No matches" in text


async def test_grep_content_and_context(client: Client, engine: str) -> None:
    text, data, _ = await call(client, "grep", pattern="needle", path="src/mod.py",
                               output_mode="content")
    assert text.splitlines() == ["src/mod.py:1:def needle():", "src/mod.py:7:z = needle()"]
    assert data["total_matches"] == 2
    text, _, _ = await call(client, "grep", pattern="needle", path="src/mod.py",
                            output_mode="content", context=1)
    assert text.splitlines() == [
        "src/mod.py:1:def needle():", "src/mod.py-2-    return 1",
        "--",
        "src/mod.py-6-y = 3", "src/mod.py:7:z = needle()",
    ]
    text, _, _ = await call(client, "grep", pattern="^NEEDLE", output_mode="content",
                            case_insensitive=False)
    assert text.splitlines() == ["src/deep/inner.py:1:NEEDLE upper"]


async def test_grep_count_and_limit(tmp_path: Path, engine: str) -> None:
    files = {f"f{i:02}.txt": "hit\n" * (i + 1) for i in range(30)}
    files["long.txt"] = "hit " + "x" * 5000 + "\n"
    make_tree(tmp_path, files)
    async with Client(build_server(CodingEnv(Workspace.at(tmp_path)))) as c:
        text, data, _ = await call(c, "grep", pattern="hit", output_mode="count")
        assert text.splitlines()[:2] == ["f00.txt:1", "f01.txt:2"]
        assert data["total_matches"] == sum(range(1, 31)) + 1 and data["total_files"] == 31
        text, data, _ = await call(c, "grep", pattern="hit", output_mode="count", limit=5)
        assert len(data["files"]) == 5 and "(26 more files not shown)" in text
        text, data, _ = await call(c, "grep", pattern="hit", output_mode="content", limit=3)
        lines = text.splitlines()
        assert lines[:3] == ["f00.txt:1:hit", "f01.txt:1:hit", "f01.txt:2:hit"]
        assert lines[-1].startswith(f"({data['total_matches'] - 3} more matching lines")
        assert data["truncated"] is True
        _, data, _ = await call(c, "grep", pattern="hit", limit=4)
        assert len(data["files"]) == 4 and data["total_files"] == 31
        text, _, _ = await call(c, "grep", pattern="hit", path="long.txt",
                                output_mode="content")
        assert "[line cut, 5004 chars]" in text and len(text) < 600


async def test_grep_errors(client: Client, engine: str) -> None:
    text, _, is_error = await call(client, "grep", pattern="foo(")
    assert is_error and text.startswith("invalid regex 'foo('") and "\n" not in text
    text, _, is_error = await call(client, "grep", pattern="needle", path="data.bin")
    assert is_error and "binary" in text
    for path in ("../", "escape", "escape.py", "/etc", "missing"):
        text, _, is_error = await call(client, "grep", pattern="needle", path=path)
        assert is_error and "\n" not in text, path


async def test_grep_timeout_stops_the_search(client: Client, engine: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grep_engines, "GREP_TIMEOUT_S", 0.0)
    text, data, is_error = await call(client, "grep", pattern="needle")
    assert not is_error and data["timed_out"] is True
    assert "results are incomplete" in text


# --- ls --------------------------------------------------------------------------------------


async def test_ls_tree_depth_and_ignores(client: Client, tree: Path) -> None:
    (tree / "node_modules" / "pkg").mkdir(parents=True)
    (tree / "__pycache__").mkdir()
    (tree / "inside").symlink_to(tree / "a.py")
    text, _, is_error = await call(client, "ls")
    assert not is_error
    lines = text.splitlines()
    assert lines[0] == "./"
    assert "  src/" in lines and "    deep/" in lines and "    mod.py" in lines
    assert "      inner.py" not in lines  # depth 2
    assert "  inside -> a.py" in lines
    for hidden in ("node_modules", "__pycache__", ".git", "escape"):
        assert not any(line.strip().split(" ")[0].rstrip("/") == hidden for line in lines)
    assert lines.index("  src/") < lines.index("  a.py")  # directories first
    text, _, _ = await call(client, "ls", depth=3)
    assert "      inner.py" in text.splitlines()
    text, _, _ = await call(client, "ls", path="src", ignore=["*.tmp", "deep"], depth=1)
    assert text.splitlines() == ["src/", "  generated/", "  .gitignore", "  mod.py",
                                 "  top_only.txt"]


async def test_ls_cap_and_errors(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ls, "LS_MAX_ENTRIES", 3)
    text, _, is_error = await call(client, "ls", depth=5)
    assert not is_error
    assert len(text.splitlines()) == 5 and "listing cut: more than 3 entries" in text
    for path in ("../", "escape", "a.py", "missing", "/etc"):
        text, _, is_error = await call(client, "ls", path=path)
        assert is_error and "\n" not in text, path


async def test_ls_over_the_inline_budget_starts_over_in_a_thread(
        client: Client, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tree / "inside").symlink_to(tree / "a.py")
    expected, _, _ = await call(client, "ls", depth=3, ignore=["*.tmp"])
    threaded: list[int] = []
    in_thread = ls.in_thread

    async def spy(fn: Any, deadline: Deadline) -> Any:
        threaded.append(1)
        return await in_thread(fn, deadline)

    monkeypatch.setattr(ls, "in_thread", spy)
    text, _, _ = await call(client, "ls", depth=3, ignore=["*.tmp"])
    assert text == expected and "  inside -> a.py" in text and threaded == []
    monkeypatch.setattr(ls, "LS_INLINE_ENTRIES", 5)
    text, _, _ = await call(client, "ls", depth=3, ignore=["*.tmp"])
    assert text == expected and threaded == [1]


def test_ls_budget_counts_entries_and_symlinks(tree: Path) -> None:
    env = CodingEnv(Workspace.at(tree))
    entries = len(os.listdir(tree))  # 2 of them symlinks (escape, escape.py)
    links = 2 * ls.LS_LINK_COST
    deadline = Deadline(30)
    listed = ls.run_ls(env, tree, [], 1, deadline, max_scanned=entries + links)
    assert listed == ls.run_ls(env, tree, [], 1, deadline)
    for depth, budget in ((1, entries + links - 1), (2, entries + links)):
        with pytest.raises(ls._ListingTooBig):
            ls.run_ls(env, tree, [], depth, deadline, max_scanned=budget)


# --- over a real stdio server ----------------------------------------------------------------


async def test_search_tools_over_stdio(tree: Path) -> None:
    command = [sys.executable, "-m", "mcpkit", "serve", "--transport", "stdio",
               "--workspace", str(tree)]
    async with Client(command) as c:
        tools = {t.name: t for t in await c.list_tools()}
        for name in ("glob", "grep", "ls"):
            annotations = tools[name].annotations
            assert annotations is not None and annotations.read_only_hint is True
            assert annotations.open_world_hint is False
        _, data, _ = await call(c, "glob", pattern="**/*.py")
        assert set(data["files"]) == {"a.py", "src/mod.py", "src/deep/inner.py"}
        _, data, _ = await call(c, "grep", pattern="needle")
        assert set(data["files"]) == VISIBLE_NEEDLE
        text, _, is_error = await call(c, "grep", pattern="(", path="src")
        assert is_error and "invalid regex" in text
        text, _, is_error = await call(c, "ls", path="../")
        assert is_error and "'..'" in text


# --- ripgrep is bounded: killed (with its children) on timeout and on cancel -----------------


def fake_ripgrep(tmp_path: Path) -> Path:
    return hanging_tool(tmp_path, "rg", "rg")


async def wait_until_gone(tmp_path: Path) -> None:
    for _ in range(200):
        if all(gone(tmp_path / name) for name in ("rg.pid", "child.pid")):
            return
        await anyio.sleep(0.01)
    raise AssertionError("ripgrep (or its child) is still running")


async def started(tmp_path: Path) -> None:
    for _ in range(500):
        if (tmp_path / "rg.pid").exists() and (tmp_path / "child.pid").exists():
            return
        await anyio.sleep(0.01)
    raise AssertionError("the fake rg did not start")


async def test_ripgrep_killed_on_timeout(client: Client, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    rg = fake_ripgrep(tmp_path)
    monkeypatch.setattr(grep_engines, "find_ripgrep", lambda: str(rg))
    monkeypatch.setattr(grep_engines, "GREP_TIMEOUT_S", 0.5)
    text, data, is_error = await call(client, "grep", pattern="needle")
    assert not is_error and data["timed_out"] is True and "incomplete" in text
    await wait_until_gone(tmp_path)


async def test_ripgrep_killed_on_cancel(client: Client, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    rg = fake_ripgrep(tmp_path)
    monkeypatch.setattr(grep_engines, "find_ripgrep", lambda: str(rg))
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: call(client, "grep", pattern="needle"))
        await started(tmp_path)
        tg.cancel_scope.cancel()
    await wait_until_gone(tmp_path)


# --- result counts are bounded in memory, not in what they report ------------------------------


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5), st.lists(st.tuples(st.integers(0, 5).map(float),
                                             st.text(alphabet="abc", max_size=3)), max_size=60))
def test_newest_keeps_only_what_it_shows(keep: int, items: list[tuple[float, str]]) -> None:
    newest = glob.Newest(keep)
    for mtime, path in items:
        newest.add(mtime, path)
        assert len(newest.items) < 2 * keep + 64
    assert newest.total == len(items)
    assert newest.ordered() == sorted(items, key=lambda f: (-f[0], f[1]))[:keep]


async def test_grep_counts_files_past_the_kept_ones(client: Client, engine: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rg_json, "MAX_FILES_KEPT", 2)
    text, data, is_error = await call(client, "grep", pattern="needle", output_mode="count")
    assert not is_error and data["total_files"] == len(VISIBLE_NEEDLE)
    assert len(data["counts"]) == 2 and data["truncated"] is True
    assert f"in {len(VISIBLE_NEEDLE)} files" in text and "3 more files with matches" in text


def test_the_worker_reports_its_own_failure() -> None:
    """A worker that fails says so (exit 2, one `error:` line), never "no match" (exit 1)."""
    done = subprocess.run([sys.executable, "-m", "mcpkit.coding.search.grep_worker", "{not json"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2 and done.stdout == ""
    message = grep_engines.error_line(done.stderr, "x", "python")
    assert message is not None and message.startswith("python failed: the Python search failed")
