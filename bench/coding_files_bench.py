"""File-tools benchmark: `mcpkit serve` against the reference filesystem server.

    .venv/bin/python bench/coding_files_bench.py            # 10k-file tree, 20 calls per op
    .venv/bin/python bench/coding_files_bench.py --quick    # 10k-file tree, 5 calls per op
    .venv/bin/python bench/coding_files_bench.py --files 2000 --calls 10 --json

Builds a tree of `--files` small Python files (100 per directory, a few hundred bytes to a few
KB each, one "needle" per 100 files) in a temporary directory, starts both servers over stdio
on it and drives both with `mcpkit.Client`, so the differences are the servers':

  mcpkit     python -m mcpkit serve --transport stdio --workspace TREE
  reference  node @modelcontextprotocol/server-filesystem TREE   (tests/js/node_modules, from
             scripts/install_js_peers.sh)

Operations, mapped where the reference server has an equivalent:

  view  (2000-line file)  mcpkit view            reference read_text_file
  glob  **/mod_1*.py      mcpkit glob (limit 5000: every match, like the reference)
                                                 reference search_files
  ls    one directory     mcpkit ls depth=1      reference list_directory
  grep  needle            mcpkit grep            (the reference server has no content search)

Each operation is called twice to warm up, then `--calls` times; the median latency is
reported with the ratio reference/mcpkit (above 1: mcpkit is faster). Every call is bounded
(`--timeout`); both servers are local child processes stopped at the end; the tree is removed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from mcpkit.client import Client, ConnectOptions, Timeouts

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "tests/js/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
FILES_PER_DIR = 100
BIG_FILE = "big/module.py"


def build_tree(root: Path, files: int) -> None:
    for i in range(files):
        directory = root / f"pkg{i // FILES_PER_DIR:03}"
        if i % FILES_PER_DIR == 0:
            directory.mkdir(parents=True)
        body = "".join(f"def func_{i}_{j}(x):\n    return x * {j}  # value {j}\n"
                       for j in range(5 + i % 40))
        if i % 100 == 7:
            body += "NEEDLE = 'found'\n"
        (directory / f"mod_{i}.py").write_text(body)
    (root / "big").mkdir()
    (root / BIG_FILE).write_text("".join(f"line_{n} = {n}  # some text to read\n"
                                         for n in range(2000)))


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


Op = tuple[str, dict[str, Any]]


def operations(tree: Path) -> dict[str, tuple[Op, Op | None, Callable[[str], int]]]:
    """name -> (mcpkit call, reference call or None, counter of result items for a check)."""
    def lines(text: str) -> int:
        return len([line for line in text.splitlines() if line and not line.startswith("(")])

    return {
        "view 2000 lines": (("view", {"file_path": BIG_FILE}),
                            ("read_text_file", {"path": str(tree / BIG_FILE)}),
                            lambda text: text.count("line_")),
        "glob **/mod_1*.py": (("glob", {"pattern": "**/mod_1*.py", "limit": 5000}),
                              ("search_files", {"path": str(tree), "pattern": "**/mod_1*.py"}),
                              lines),
        "ls one directory": (("ls", {"path": "pkg000", "depth": 1}),
                             ("list_directory", {"path": str(tree / "pkg000")}),
                             lambda text: text.count("mod_")),
        "grep needle": (("grep", {"pattern": "NEEDLE", "limit": 5000}), None, lines),
    }


async def time_calls(call: Callable[[], Awaitable[str]], calls: int, limit_s: float
                     ) -> tuple[float, str]:
    text = ""
    for _ in range(2):
        with anyio.fail_after(limit_s):
            text = await call()
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        with anyio.fail_after(limit_s):
            text = await call()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000, text


async def run_server(command: list[str], ops: list[tuple[str, Op | None]], calls: int,
                     limit_s: float) -> dict[str, tuple[float, str] | None]:
    out: dict[str, tuple[float, str] | None] = {}
    async with Client(
        command,
        connect=ConnectOptions(cwd=str(ROOT)),
        timeouts=Timeouts(timeout=limit_s),
    ) as client:
        for name, op in ops:
            if op is None:
                out[name] = None
                continue
            tool, arguments = op

            async def call(tool: str = tool, arguments: dict[str, Any] = arguments) -> str:
                result = await client.call_tool(tool, arguments)
                if result.is_error:
                    raise RuntimeError(f"{tool} failed: {text_of(result)[:200]}")
                return text_of(result)

            out[name] = await time_calls(call, calls, limit_s)
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    node = shutil.which("node")
    tmp = Path(tempfile.mkdtemp(prefix="mcpkit-files-bench-"))
    try:
        tree = tmp / "tree"
        tree.mkdir()
        started = time.perf_counter()
        build_tree(tree, args.files)
        built_s = time.perf_counter() - started
        ops = operations(tree)
        mcpkit_cmd = [sys.executable, "-m", "mcpkit", "serve", "--transport", "stdio",
                      "--workspace", str(tree)]
        mine = await run_server(mcpkit_cmd, [(n, o[0]) for n, o in ops.items()],
                                args.calls, args.timeout)
        reference: dict[str, tuple[float, str] | None] = {}
        note = None
        if node is None or not REFERENCE.exists():
            note = ("reference server not run: " + ("node not on PATH" if node is None else
                    f"{REFERENCE} missing (run scripts/install_js_peers.sh)"))
        else:
            reference = await run_server([node, str(REFERENCE), str(tree)],
                                         [(n, o[1]) for n, o in ops.items()],
                                         args.calls, args.timeout)
        rows = []
        for name, (_, _, count) in ops.items():
            m = mine[name]
            r = reference.get(name)
            assert m is not None
            rows.append({
                "op": name,
                "mcpkit_ms": round(m[0], 2),
                "reference_ms": round(r[0], 2) if r else None,
                "ratio": round(r[0] / m[0], 2) if r else None,
                "mcpkit_items": count(m[1]),
                "reference_items": count(r[1]) if r else None,
            })
        return {"files": args.files, "calls": args.calls, "tree_build_s": round(built_s, 2),
                "rows": rows, "note": note}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def print_table(report: dict[str, Any]) -> None:
    print(f"tree: {report['files']} files (built in {report['tree_build_s']} s); "
          f"median of {report['calls']} calls per op, stdio, mcpkit.Client for both")
    header = f"{'operation':<20} {'mcpkit ms':>10} {'reference ms':>13} {'ref/mcpkit':>11}  items"
    print(header)
    print("-" * len(header))
    for row in report["rows"]:
        ref = f"{row['reference_ms']:.2f}" if row["reference_ms"] is not None else "n/a"
        ratio = f"{row['ratio']:.2f}x" if row["ratio"] is not None else "n/a"
        items = f"{row['mcpkit_items']}"
        if row["reference_items"] is not None:
            items += f" / {row['reference_items']}"
        print(f"{row['op']:<20} {row['mcpkit_ms']:>10.2f} {ref:>13} {ratio:>11}  {items}")
    if report["note"]:
        print(report["note"])
    print("grep: the reference server has no content search (n/a); glob: mcpkit honours "
          ".gitignore and sorts newest first, the reference lists in walk order.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="5 calls per operation")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per call")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.calls = 5
    os.environ.pop("MCPKIT_GREP_ENGINE", None)
    report = anyio.run(main_async, args)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
