"""The `diagnostics` tool: compiler and linter findings for one file or the whole workspace.

For each language present it runs the checkers that are installed and turns their output
into one form, `path:line:col severity message [source]` (paths relative to the workspace,
column 0 when the tool gives none), sorted and capped:

- Python: `ruff check` (JSON; on PATH or next to the Python running the server), else
  `pyflakes`; always an in-process `compile()` of each file (syntax errors and compile-time
  warnings exactly as this Python sees them; nothing is written);
- JavaScript/TypeScript: `tsc --noEmit` (the nearest tsconfig.json, else the .ts files) and
  `eslint -f json`, from the workspace's node_modules/.bin or PATH;
- Go: `go vet` (the module of the nearest go.mod, else the file) and `gofmt -l -e`;
- Rust: `cargo check --message-format short` for the nearest Cargo.toml;
- shell (.sh, .bash, or a shell shebang): `bash -n` per file and `shellcheck -f gcc`.

Missing tools are skipped and named in the header, never an error. Every tool runs with
stdin from /dev/null, cwd inside the workspace, a scrubbed environment and in a process
group of its own; the group is SIGKILLed on timeout (`TOOL_TIMEOUT_S`) or cancellation and
whatever it left behind is killed when it ends. Output kept per stream is bounded.
`ruff` runs with `--no-fix --no-cache`: checking never changes the workspace (cargo and go
keep their usual build caches).

Without `file_path` the workspace root is walked the way `glob` does (.gitignore honoured,
.git, virtualenvs, node_modules and caches skipped, symlinks not followed), for at most
`MAX_FILES` source files. Project-wide tools (tsc with a tsconfig, go vet, cargo) report on
their own project; with `file_path` only the findings in that file are shown.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
import threading
import warnings
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import anyio
import msgspec

from mcpkit.coding.deadline import Deadline, in_thread
from mcpkit.coding.env import CodingEnv
from mcpkit.coding.ignore import Walker, _WalkStopped
from mcpkit.coding.processes import open_in_group, signal_group
from mcpkit.coding.shell import scrubbed_env, strip_ansi
from mcpkit.coding.workspace import Workspace, WorkspaceError
from mcpkit.errors import UsageError
from mcpkit.server.results import text_block
from mcpkit.server.server import Server
from mcpkit.server.tools import ToolResult

TOOL_TIMEOUT_S = 60.0
"""Time limit of one external tool run (the whole process group is killed after it)."""
WALK_TIMEOUT_S = 30.0
MAX_SHOWN = 500
"""Diagnostics listed; the rest are counted."""
MAX_FILES = 5000
"""Source files a workspace-wide run checks."""
MAX_WALKED = 200_000
"""Directory entries a workspace-wide walk looks at before it stops."""
MAX_OUTPUT = 8 * 1024 * 1024
"""Bytes kept per output stream of one tool run (the rest is read and dropped)."""
MAX_ARG_BYTES = 96 * 1024
"""File arguments per tool run; more files mean more runs."""
MAX_COMPILE_BYTES = 10 * 1024 * 1024
"""Python files larger than this are not compiled in-process."""
MAX_MESSAGE = 500
MAX_PROJECTS = 8
"""Projects (tsconfig.json, go.mod, Cargo.toml) a workspace-wide run checks per tool."""
PARALLEL_TOOLS = 4
PARALLEL_FILES = 8
"""`bash -n` runs at once (it checks one file per process)."""

PRUNED_DIRS = frozenset({
    ".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".tox", ".nox", ".eggs", "site-packages", ".next",
    ".cache", "target",
})

PYTHON, JSTS, GO, RUST, SHELL = "python", "javascript/typescript", "go", "rust", "shell"
LANGUAGE_TOOLS = {
    PYTHON: "ruff or pyflakes",
    JSTS: "tsc, eslint",
    GO: "go",
    RUST: "cargo",
    SHELL: "bash, shellcheck",
}
EXTENSIONS = {
    ".py": PYTHON, ".pyi": PYTHON,
    ".js": JSTS, ".jsx": JSTS, ".mjs": JSTS, ".cjs": JSTS,
    ".ts": JSTS, ".tsx": JSTS, ".mts": JSTS, ".cts": JSTS,
    ".go": GO, ".rs": RUST, ".sh": SHELL, ".bash": SHELL,
}
TS_EXTENSIONS = frozenset({".ts", ".tsx", ".mts", ".cts"})
NODE_TOOLS = frozenset({"tsc", "eslint"})
SHEBANG = re.compile(rb"^#!\s*(?:/usr)?(?:/local)?/bin/(?:env\s+(?:-\S+\s+)*)?(\S+)")

READ_ONLY = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": False,
}

DIAGNOSTICS_OUTPUT = {
    "type": "object",
    "properties": {
        "diagnostics": {
            "type": "array",
            "description": "the diagnostics shown, sorted by path, line and column",
            "items": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "relative to the workspace"},
                    "line": {"type": "integer", "description": "1-based"},
                    "column": {"type": "integer", "description": "1-based; 0 if unknown"},
                    "severity": {"type": "string", "enum": ["error", "warning", "info"]},
                    "message": {"type": "string"},
                    "source": {"type": "string", "description": "the tool that reported it"},
                },
                "required": ["path", "line", "column", "severity", "message", "source"],
            },
        },
        "tools_run": {"type": "array", "items": {"type": "string"}},
        "tools_missing": {"type": "array", "items": {"type": "string"},
                          "description": "tools that would apply but are not installed"},
        "languages_without_tools": {"type": "array", "items": {"type": "string"}},
        "total": {"type": "integer", "description": "all diagnostics found"},
        "files_checked": {"type": "integer"},
        "truncated": {"type": "boolean",
                      "description": "diagnostics or files were left out (see the text)"},
    },
    "required": ["diagnostics", "tools_run", "truncated"],
}


class DiagnosticsError(UsageError):
    """A request the tool refuses (the message is meant for the model): a usage error, a
    `file_path` that does not exist or is a directory."""


class Diagnostic(msgspec.Struct, frozen=True, order=True):
    path: str
    line: int
    column: int
    severity: str
    message: str
    source: str


def one_line(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE] + " …"
    return text


# --- finding tools ---------------------------------------------------------------------------


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_tool(name: str, workspace: Workspace) -> str | None:
    """The executable for `name`: the workspace's node_modules/.bin first (tsc, eslint),
    then PATH, then the directory of the Python running the server (where pip puts ruff)."""
    if name in NODE_TOOLS:
        local = workspace.root / "node_modules" / ".bin" / name
        if _executable(local) and workspace.contains(Path(os.path.realpath(local))):
            return str(local)
    found = shutil.which(name)
    if found:
        return found
    beside = Path(sys.executable).parent / name
    if _executable(beside):
        return str(beside)
    return None


def pyflakes_argv() -> list[str] | None:
    """How to run pyflakes: in the server's Python when importable, else from PATH."""
    if importlib.util.find_spec("pyflakes") is not None:
        return [sys.executable, "-m", "pyflakes"]
    found = shutil.which("pyflakes")
    return [found] if found else None


# --- running tools ---------------------------------------------------------------------------


@dataclass(slots=True)
class ToolRun:
    code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    cut: bool = False


def tool_env() -> dict[str, str]:
    env = scrubbed_env()
    env.update(NO_COLOR="1", FORCE_COLOR="0", CARGO_TERM_COLOR="never", TERM="dumb",
               PYTHONDONTWRITEBYTECODE="1")
    return env


async def run_tool(argv: list[str], cwd: Path) -> ToolRun:
    """Run one tool in its own process group, bounded in time and kept output."""
    timeout = TOOL_TIMEOUT_S
    process = await open_in_group(argv, cwd=cwd, env=tool_env())
    buffers = (bytearray(), bytearray())
    cut = False

    async def drain(stream: Any, buffer: bytearray) -> None:
        nonlocal cut
        async for chunk in stream:
            room = MAX_OUTPUT - len(buffer)
            if room > 0:
                buffer += chunk[:room]
            if len(chunk) > room:
                cut = True

    try:
        with anyio.move_on_after(timeout) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(drain, process.stdout, buffers[0])
                tg.start_soon(drain, process.stderr, buffers[1])
            await process.wait()
    finally:
        signal_group(process.pid)  # on timeout/cancel, and whatever the tool left behind
        with anyio.CancelScope(shield=True):
            await process.wait()
    out, err = (strip_ansi(bytes(b)).decode("utf-8", "replace") for b in buffers)
    return ToolRun(None if scope.cancelled_caught else process.returncode, out, err,
                   scope.cancelled_caught, cut)


def batches(paths: list[str]) -> list[list[str]]:
    """File arguments split so that no command line gets near the kernel's limit."""
    out: list[list[str]] = [[]]
    size = 0
    for path in paths:
        if out[-1] and size + len(path) + 1 > MAX_ARG_BYTES:
            out.append([])
            size = 0
        out[-1].append(path)
        size += len(path) + 1
    return out


async def run_batched(prefix: list[str], paths: list[str], cwd: Path) -> list[ToolRun]:
    """`prefix + paths` in as many runs as the command line needs (stopping after a timeout)."""
    runs: list[ToolRun] = []
    for batch in batches(paths):
        run = await run_tool([*prefix, *batch], cwd)
        runs.append(run)
        if run.timed_out:
            break
    return runs


# --- what to check ---------------------------------------------------------------------------


def language_of(path: Path) -> str | None:
    language = EXTENSIONS.get(path.suffix.lower())
    if language is not None or path.suffix:
        return language
    try:
        with open(path, "rb") as f:
            head = f.read(128)
    except OSError:
        return None
    match = SHEBANG.match(head)
    if match is None:
        return None
    program = match.group(1).decode("ascii", "replace")
    if program in ("sh", "bash", "dash"):
        return SHELL
    if program.startswith("python"):
        return PYTHON
    if program in ("node", "deno", "bun"):
        return JSTS
    return None


@dataclass
class Plan:
    workspace: Workspace
    single: Path | None
    """The file asked about (None: the whole workspace)."""
    files: dict[str, list[Path]] = field(default_factory=dict)
    files_cut: bool = False
    walk_timed_out: bool = False

    @property
    def root(self) -> Path:
        return self.workspace.root

    def rel(self, path: Path) -> str:
        """A path argument for a tool running in the workspace root."""
        try:
            rel = path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)
        return "./" + rel if rel.startswith("-") else rel

    def count(self) -> int:
        return sum(len(f) for f in self.files.values())


def plan_workspace(workspace: Workspace, deadline: Deadline) -> Plan:
    plan = Plan(workspace, None)
    walked = 0

    def stop() -> bool:
        return deadline() or walked >= MAX_WALKED

    walker = Walker(workspace.root, workspace.contains, stop=stop)
    found = 0
    try:
        for entry in walker.files(workspace.root, include_links=False,
                                  prune=lambda rel: rel.rsplit("/", 1)[-1] in PRUNED_DIRS):
            walked += 1
            if walked >= MAX_WALKED:
                plan.files_cut = True
                break
            language = language_of(Path(entry.path))
            if language is None:
                continue
            if found >= MAX_FILES:
                plan.files_cut = True
                break
            plan.files.setdefault(language, []).append(Path(entry.path))
            found += 1
    except _WalkStopped:
        if deadline.timed_out:
            plan.walk_timed_out = True
        elif deadline.cancelled.is_set():
            raise
        else:
            plan.files_cut = True
    return plan


def plan_file(workspace: Workspace, file_path: str) -> Plan:
    target = workspace.resolve(file_path)
    if not target.exists():
        raise DiagnosticsError(f"{file_path} does not exist")
    if target.is_dir():
        raise DiagnosticsError(f"{file_path} is a directory; give a file, or no file_path "
                               "for the whole workspace")
    plan = Plan(workspace, target)
    language = language_of(target)
    if language is not None:
        plan.files[language] = [target]
    return plan


def nearest(plan: Plan, start: Path, names: Iterable[str]) -> Path | None:
    """The nearest of `names` from `start`'s directory up to the workspace root."""
    directory = start if start.is_dir() else start.parent
    wanted = tuple(names)
    while plan.workspace.contains(directory):
        for name in wanted:
            candidate = directory / name
            if candidate.is_file():
                return candidate
        if directory == plan.root or directory.parent == directory:
            break
        directory = directory.parent
    return None


def projects(plan: Plan, report: Report, files: list[Path], marker: str, tool: str
             ) -> tuple[list[Path], list[Path]]:
    """The project files (`marker`, nearest above each file) to run `tool` on, at most
    `MAX_PROJECTS`, and the files that have none."""
    found: dict[Path, None] = {}
    loose: list[Path] = []
    cache: dict[Path, Path | None] = {}
    for path in files:
        directory = path.parent
        if directory not in cache:
            cache[directory] = nearest(plan, directory, (marker,))
        project = cache[directory]
        if project is None:
            loose.append(path)
        else:
            found[project] = None
    chosen = sorted(found, key=lambda p: (len(p.parts), p))
    if len(chosen) > MAX_PROJECTS:
        report.notes.append(f"{tool} ran on the first {MAX_PROJECTS} of "
                            f"{len(chosen)} projects; give file_path to check the others.")
        chosen = chosen[:MAX_PROJECTS]
    return chosen, loose


# --- collecting results ----------------------------------------------------------------------


@dataclass
class Report:
    plan: Plan
    diagnostics: list[Diagnostic] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    covered: set[str] = field(default_factory=set)
    installed: set[str] = field(default_factory=set)
    """Languages with at least one of their tools installed."""
    notes: list[str] = field(default_factory=list)
    elsewhere: int = 0
    """Findings of project-wide tools in other files than the one asked about."""

    def shown_path(self, raw: str, base: Path) -> str:
        path = Path(os.path.normpath(raw if os.path.isabs(raw) else base / raw))
        return self.plan.workspace.display(path)

    def add(self, raw_path: str, base: Path, line: int, column: int, severity: str,
            message: str, source: str) -> None:
        path = self.shown_path(raw_path, base)
        if self.plan.single is not None and path != self.plan.workspace.display(
                self.plan.single):
            self.elsewhere += 1
            return
        self.diagnostics.append(Diagnostic(path, max(line, 0), max(column, 0), severity,
                                           one_line(message), source))

    def ran_tool(self, name: str, language: str, run: ToolRun | None = None) -> None:
        if name not in self.ran:
            self.ran.append(name)
        self.covered.add(language)
        self.installed.add(language)
        if run is not None and run.timed_out:
            self.notes.append(f"{name} stopped after {TOOL_TIMEOUT_S:g} s; its results are "
                              "incomplete.")
        if run is not None and run.cut:
            self.notes.append(f"{name} printed more than {MAX_OUTPUT >> 20} MB; the rest was "
                              "dropped.")

    def failed(self, name: str, run: ToolRun) -> None:
        if run.timed_out:
            return
        lines = [line.strip() for line in (run.stderr or run.stdout).splitlines()
                 if line.strip()]
        why = lines[-1] if lines else "no output"
        self.notes.append(f"{name} failed (exit {run.code}): {one_line(why)[:300]}")


FILE_LINE_COL = re.compile(r"^(?P<path>[^:\n]+?):(?P<line>\d+):(?:(?P<col>\d+):)?\s*"
                           r"(?P<rest>.*)$")


# --- Python ----------------------------------------------------------------------------------

_compile_lock = threading.Lock()


def compile_one(path: Path, shown: str) -> list[Diagnostic]:
    try:
        if path.stat().st_size > MAX_COMPILE_BYTES:
            return []
        source = path.read_bytes()
    except OSError:
        return []
    found: list[Diagnostic] = []
    with _compile_lock, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore")
        warnings.simplefilter("always", SyntaxWarning)
        warnings.simplefilter("always", DeprecationWarning)
        try:
            compile(source, shown, "exec", dont_inherit=True)
        except SyntaxError as exc:
            message = f"{type(exc).__name__}: {exc.msg}"
            found.append(Diagnostic(shown, exc.lineno or 1, exc.offset or 0, "error",
                                    one_line(message), "python"))
        except (ValueError, RecursionError, MemoryError) as exc:
            found.append(Diagnostic(shown, 1, 0, "error",
                                    one_line(f"{type(exc).__name__}: {exc}"), "python"))
    for warning in caught:
        if warning.filename == shown and issubclass(warning.category,
                                                    (SyntaxWarning, DeprecationWarning)):
            found.append(Diagnostic(shown, warning.lineno or 1, 0, "warning",
                                    one_line(f"{warning.category.__name__}: "
                                             f"{warning.message}"), "python"))
    return found


async def compile_python(plan: Plan, report: Report, files: list[Path]) -> list[Diagnostic]:
    deadline = Deadline(TOOL_TIMEOUT_S)
    display = plan.workspace.display

    def work() -> list[Diagnostic]:
        out: list[Diagnostic] = []
        for path in files:
            if deadline():
                break
            out.extend(compile_one(path, display(path)))
        return out

    found: list[Diagnostic] = await in_thread(work, deadline)
    report.ran_tool("python-compile", PYTHON)
    if deadline.timed_out:
        report.notes.append(f"python-compile stopped after {TOOL_TIMEOUT_S:g} s; not every "
                            "file was compiled.")
    return found


class _RuffLocation(msgspec.Struct):
    row: int = 1
    column: int = 0


class _RuffItem(msgspec.Struct):
    filename: str
    message: str
    code: str | None = None
    location: _RuffLocation | None = None


_ruff_decoder = msgspec.json.Decoder(list[_RuffItem])


async def check_python(plan: Plan, report: Report) -> None:
    files = plan.files.get(PYTHON, [])
    compiled = await compile_python(plan, report, files)
    syntax_lines = {(d.path, d.line) for d in compiled if d.severity == "error"}
    report.diagnostics.extend(compiled)
    linted: list[tuple[str, int, int, str, str, str, bool]] = []

    ruff = find_tool("ruff", plan.workspace)
    if ruff is not None:
        items: list[_RuffItem] = []
        for run in await run_batched(
                [ruff, "check", "--output-format", "json", "--no-fix", "--no-cache",
                 "--force-exclude", "--quiet", "--"], [plan.rel(f) for f in files], plan.root):
            report.ran_tool("ruff", PYTHON, run)
            try:
                found = _ruff_decoder.decode(run.stdout) if run.stdout.strip() else []
                decoded = True
            except msgspec.DecodeError:
                found, decoded = [], False
            if not found and (not decoded or run.code not in (0, 1, None)):
                report.failed("ruff", run)
            items.extend(found)
        for item in items:
            loc = item.location or _RuffLocation()
            code = item.code or ""
            syntax = code in ("", "invalid-syntax") or code.startswith("E9")
            message = item.message if syntax else f"{code} {item.message}"
            linted.append((item.filename, loc.row, loc.column, "error" if syntax
                           else "warning", message, "ruff", syntax))
    else:
        report.missing.append("ruff")
        pyflakes = pyflakes_argv()
        if pyflakes is None:
            report.missing.append("pyflakes")
        else:
            for run in await run_batched(pyflakes, [plan.rel(f) for f in files], plan.root):
                report.ran_tool("pyflakes", PYTHON, run)
                count = len(linted)
                for stream, syntax in ((run.stdout, False), (run.stderr, True)):
                    for line in stream.splitlines():
                        match = FILE_LINE_COL.match(line)
                        if match is None or not match["path"].strip():
                            continue
                        linted.append((match["path"], int(match["line"]),
                                       int(match["col"] or 0),
                                       "error" if syntax else "warning", match["rest"],
                                       "pyflakes", syntax))
                if run.code not in (0, 1, None) and len(linted) == count:
                    report.failed("pyflakes", run)
    for path, row, column, severity, message, source, syntax in linted:
        # compile() already said where the syntax is wrong; keep the linters' other findings.
        if syntax and (report.shown_path(path, plan.root), row) in syntax_lines:
            continue
        report.add(path, plan.root, row, column, severity, message, source)


# --- JavaScript / TypeScript -----------------------------------------------------------------

TSC_LINE = re.compile(r"^(?P<path>.+?)\((?P<line>\d+),(?P<col>\d+)\): (?P<sev>error|warning|"
                      r"message) (?P<code>TS\d+): (?P<msg>.*)$")


class _EslintMessage(msgspec.Struct, rename="camel"):
    message: str
    rule_id: str | None = None
    severity: int = 2
    line: int = 1
    column: int = 0


class _EslintFile(msgspec.Struct, rename="camel"):
    file_path: str
    messages: list[_EslintMessage] = []


_eslint_decoder = msgspec.json.Decoder(list[_EslintFile])


async def check_jsts(plan: Plan, report: Report) -> None:
    files = plan.files.get(JSTS, [])
    tsc = find_tool("tsc", plan.workspace)
    if tsc is None:
        report.missing.append("tsc")
    else:
        report.installed.add(JSTS)
        ts_files = [f for f in files if f.suffix.lower() in TS_EXTENSIONS]
        configs, loose = projects(plan, report, ts_files, "tsconfig.json", "tsc")
        runs = [[tsc, "--noEmit", "--pretty", "false", "-p", plan.rel(config)]
                for config in configs]
        if loose:
            chunks = batches([plan.rel(f) for f in loose])
            if len(chunks) > 1:
                report.notes.append(f"tsc checked {len(chunks[0])} of the {len(loose)} "
                                    "TypeScript files outside any tsconfig.json project.")
            runs.append([tsc, "--noEmit", "--pretty", "false", *chunks[0]])
        for args in runs:
            run = await run_tool(args, plan.root)
            report.ran_tool("tsc", JSTS, run)
            count = 0
            for line in run.stdout.splitlines():
                match = TSC_LINE.match(line)
                if match is not None:
                    count += 1
                    severity = {"message": "info"}.get(match["sev"], match["sev"])
                    report.add(match["path"], plan.root, int(match["line"]),
                               int(match["col"]), severity, f"{match['code']} {match['msg']}",
                               "tsc")
            if run.code not in (0, 1, 2, None) or (run.code and not count):
                report.failed("tsc", run)
    eslint = find_tool("eslint", plan.workspace)
    if eslint is None:
        report.missing.append("eslint")
        return
    report.installed.add(JSTS)
    results: list[_EslintFile] = []
    for run in await run_batched([eslint, "-f", "json", "--no-color", "--"],
                                 [plan.rel(f) for f in files], plan.root):
        report.ran_tool("eslint", JSTS, run)
        try:
            found = _eslint_decoder.decode(run.stdout) if run.stdout.strip() else []
        except msgspec.DecodeError:
            found = []
        if run.code not in (0, 1, None) or (run.code == 1 and not found):
            report.failed("eslint", run)
        results.extend(found)
    for result in results:
        for message in result.messages:
            if message.rule_id is None and message.message.startswith("File ignored"):
                continue
            text = f"{message.rule_id} {message.message}" if message.rule_id else message.message
            report.add(result.file_path, plan.root, message.line, message.column,
                       "error" if message.severity >= 2 else "warning", text, "eslint")


# --- Go --------------------------------------------------------------------------------------


async def check_go(plan: Plan, report: Report) -> None:
    files = plan.files.get(GO, [])
    go = find_tool("go", plan.workspace)
    if go is None:
        report.missing.append("go")
    else:
        report.installed.add(GO)
        modules, loose = projects(plan, report, files, "go.mod", "go vet")
        runs: list[tuple[list[str], Path]] = []
        for module in modules:
            cwd = module.parent
            if plan.single is not None:
                package = plan.single.parent.relative_to(cwd).as_posix()
                runs.append(([go, "vet", "./" + package if package != "." else "."], cwd))
            else:
                runs.append(([go, "vet", "./..."], cwd))
        if loose and plan.single is not None:
            runs.append(([go, "vet", plan.rel(plan.single)], plan.root))
        elif loose:
            report.notes.append(f"go vet skipped {plural(len(loose), 'file')} outside any Go "
                                "module (no go.mod above them).")
        for args, cwd in runs:
            run = await run_tool(args, cwd)
            report.ran_tool("go vet", GO, run)
            count = 0
            for line in run.stderr.splitlines():
                typecheck = line.startswith("vet: ")
                match = FILE_LINE_COL.match(line.removeprefix("vet: "))
                if match is None or not match["path"].endswith(".go"):
                    continue
                count += 1
                report.add(match["path"], cwd, int(match["line"]), int(match["col"] or 0),
                           "error" if typecheck else "warning", match["rest"], "go vet")
            if run.code not in (0, 1, None) or (run.code and not count):
                report.failed("go vet", run)
    gofmt = find_tool("gofmt", plan.workspace)
    if gofmt is None:
        report.missing.append("gofmt")
        return
    report.installed.add(GO)
    for run in await run_batched([gofmt, "-l", "-e"], [plan.rel(f) for f in files],
                                 plan.root):
        report.ran_tool("gofmt", GO, run)
        for line in run.stdout.splitlines():
            if line.strip():
                report.add(line.strip(), plan.root, 1, 0, "warning",
                           "not gofmt-formatted (gofmt -w fixes it)", "gofmt")
        for line in run.stderr.splitlines():
            match = FILE_LINE_COL.match(line)
            if match is not None:
                report.add(match["path"], plan.root, int(match["line"]),
                           int(match["col"] or 0), "error", match["rest"], "gofmt")


# --- Rust ------------------------------------------------------------------------------------

CARGO_LINE = re.compile(r"^(?P<path>[^:\s][^:]*\.rs):(?P<line>\d+):(?P<col>\d+): "
                        r"(?P<sev>error|warning|note|help)(?:\[(?P<code>[^\]]+)\])?: "
                        r"(?P<msg>.*)$")


async def check_rust(plan: Plan, report: Report) -> None:
    cargo = find_tool("cargo", plan.workspace)
    if cargo is None:
        report.missing.append("cargo")
        return
    report.installed.add(RUST)
    manifests, loose = projects(plan, report, plan.files.get(RUST, []), "Cargo.toml",
                                "cargo check")
    if loose:
        report.notes.append(f"cargo check skipped {plural(len(loose), 'file')} outside any "
                            "crate (no Cargo.toml above them).")
    for manifest in manifests:
        cwd = manifest.parent
        run = await run_tool([cargo, "check", "--message-format", "short", "--quiet",
                              "--manifest-path", str(manifest)], cwd)
        report.ran_tool("cargo check", RUST, run)
        count = 0
        for line in run.stderr.splitlines():
            match = CARGO_LINE.match(line)
            if match is None:
                continue
            count += 1
            severity = {"note": "info", "help": "info"}.get(match["sev"], match["sev"])
            message = f"{match['code']} {match['msg']}" if match["code"] else match["msg"]
            report.add(match["path"], cwd, int(match["line"]), int(match["col"]), severity,
                       message, "cargo check")
        if run.code not in (0, 101, None) or (run.code and not count):
            report.failed("cargo check", run)


# --- shell -----------------------------------------------------------------------------------

BASH_LINE = re.compile(r"^(?P<path>.+?): line (?P<line>\d+): (?P<msg>.*)$")


async def check_shell(plan: Plan, report: Report) -> None:
    files = plan.files.get(SHELL, [])
    bash = find_tool("bash", plan.workspace)
    if bash is None:
        report.missing.append("bash")
    else:
        limiter = anyio.CapacityLimiter(PARALLEL_FILES)
        runs: list[ToolRun] = []

        async def one(path: Path) -> None:
            async with limiter:
                run = await run_tool([bash, "-n", "--", plan.rel(path)], plan.root)
            runs.append(run)
            for line in run.stderr.splitlines():
                match = BASH_LINE.match(line)
                if match is None:
                    continue
                message = match["msg"]
                if message.startswith("`") and message.endswith("'"):
                    continue  # bash echoing the offending line after the message
                report.add(match["path"], plan.root, int(match["line"]), 0, "error",
                           message, "bash -n")

        async with anyio.create_task_group() as tg:
            for path in files:
                tg.start_soon(one, path)
        report.ran_tool("bash -n", SHELL)
        if any(run.timed_out for run in runs):
            report.notes.append(f"bash -n stopped after {TOOL_TIMEOUT_S:g} s on some files.")
    shellcheck = find_tool("shellcheck", plan.workspace)
    if shellcheck is None:
        report.missing.append("shellcheck")
    elif files:
        for run in await run_batched([shellcheck, "-f", "gcc", "--"],
                                     [plan.rel(f) for f in files], plan.root):
            report.ran_tool("shellcheck", SHELL, run)
            count = 0
            for line in run.stdout.splitlines():
                match = FILE_LINE_COL.match(line)
                if match is None:
                    continue
                severity, _, message = match["rest"].partition(": ")
                if severity not in ("error", "warning", "note"):
                    continue
                count += 1
                report.add(match["path"], plan.root, int(match["line"]),
                           int(match["col"] or 0), "info" if severity == "note" else severity,
                           message, "shellcheck")
            if run.code not in (0, 1, None) or (run.code and not count):
                report.failed("shellcheck", run)


CHECKERS: dict[str, Callable[[Plan, Report], Awaitable[None]]] = {
    PYTHON: check_python, JSTS: check_jsts, GO: check_go, RUST: check_rust,
    SHELL: check_shell,
}


async def run_checks(plan: Plan) -> Report:
    report = Report(plan)
    limiter = anyio.CapacityLimiter(PARALLEL_TOOLS)

    async def one(language: str) -> None:
        async with limiter:
            await CHECKERS[language](plan, report)

    async with anyio.create_task_group() as tg:
        for language in CHECKERS:
            if plan.files.get(language):
                tg.start_soon(one, language)
    return report


# --- the result ------------------------------------------------------------------------------


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def render(plan: Plan, report: Report) -> ToolResult:
    diagnostics = sorted(set(report.diagnostics))
    languages = [lang for lang in CHECKERS if plan.files.get(lang)]
    without = [lang for lang in languages
               if lang not in report.covered and lang not in report.installed]
    order = {"python-compile": 1}
    ran = sorted(report.ran, key=lambda n: (order.get(n, 0), report.ran.index(n)))
    missing = list(dict.fromkeys(report.missing))
    target = (plan.workspace.display(plan.single) if plan.single is not None
              else "the workspace")
    lines: list[str] = []
    files = plan.count()
    if plan.single is not None and not languages:
        lines.append(f"No diagnostics tools for {target} (its language is not one of "
                     f"{', '.join(CHECKERS)}).")
    elif not languages:
        lines.append("No source files to check in the workspace.")
    else:
        lines.append(f"Checked {target}" + ("" if plan.single else
                                            f" ({plural(files, 'file')})")
                     + f"; ran: {', '.join(ran) if ran else 'nothing'}.")
    if missing:
        lines.append(f"Not installed (skipped): {', '.join(missing)}.")
    if without:
        lines.append("No tool installed for: " + "; ".join(
            f"{lang} ({LANGUAGE_TOOLS[lang]})" for lang in without) + ".")
    if plan.files_cut:
        lines.append(f"Only the first {plural(files, 'source file')} were checked; give "
                     "file_path to check others.")
    if plan.walk_timed_out:
        lines.append(f"The walk stopped after {WALK_TIMEOUT_S:g} s; not every file was "
                     "checked.")
    lines.extend(report.notes)
    if report.elsewhere:
        lines.append(f"({plural(report.elsewhere, 'finding')} in other files of the project "
                     "not shown; run without file_path to see them.)")
    total = len(diagnostics)
    if languages:
        if total:
            errors = sum(1 for d in diagnostics if d.severity == "error")
            warns = sum(1 for d in diagnostics if d.severity == "warning")
            infos = total - errors - warns
            parts = [plural(errors, "error"), plural(warns, "warning")]
            if infos:
                parts.append(f"{infos} info")
            lines.append(f"{plural(total, 'diagnostic')}: {', '.join(parts)}.")
        else:
            lines.append("No diagnostics.")
    shown = diagnostics[:MAX_SHOWN]
    for d in shown:
        lines.append(f"{d.path}:{d.line}:{d.column} {d.severity} {d.message} [{d.source}]")
    if total > len(shown):
        lines.append(f"({total - len(shown)} more not shown; give file_path to narrow)")
    structured = {
        "diagnostics": [msgspec.structs.asdict(d) for d in shown],
        "tools_run": ran,
        "tools_missing": missing,
        "languages_without_tools": without,
        "total": total,
        "files_checked": files,
        "truncated": total > len(shown) or plan.files_cut or plan.walk_timed_out,
    }
    return ToolResult(content=[text_block("\n".join(lines))], structured_content=structured)


def error(message: str) -> ToolResult:
    return ToolResult(content=[text_block(message)], is_error=True)


# --- registration ----------------------------------------------------------------------------


def register(server: Server, env: CodingEnv) -> None:
    workspace = env.workspace

    async def diagnostics(
        file_path: Annotated[str | None, "File to check (default: every source file of the "
                                         "workspace)"] = None,
    ) -> ToolResult:
        try:
            if file_path:
                plan = plan_file(workspace, file_path)
            else:
                deadline = Deadline(WALK_TIMEOUT_S)
                plan = await in_thread(lambda: plan_workspace(workspace, deadline), deadline)
            report = await run_checks(plan)
        except (WorkspaceError, DiagnosticsError) as exc:
            return error(str(exc))
        except OSError as exc:
            return error(f"diagnostics failed: {exc.strerror or exc}")
        return render(plan, report)

    server.add_tool(
        diagnostics, name="diagnostics", title="Compiler and linter diagnostics",
        description=(
            "Run the compilers and linters installed for a file's language (or for every "
            "language in the workspace when file_path is omitted) and list their findings "
            "as `path:line:col severity message [tool]`, sorted, at most "
            f"{MAX_SHOWN}. Python: ruff (or pyflakes) plus a syntax check; JS/TS: tsc, "
            "eslint; Go: go vet, gofmt; Rust: cargo check; shell: bash -n, shellcheck. "
            "The header says which tools ran and which are not installed. Honours "
            ".gitignore; changes no source file."),
        output_schema=DIAGNOSTICS_OUTPUT, annotations=READ_ONLY,
    )
