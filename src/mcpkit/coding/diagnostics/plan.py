"""What to check: the source files of each language, for one file or the whole workspace.

Without `file_path` the workspace root is walked the way `glob` does (.gitignore honoured,
.git, virtualenvs, node_modules and caches skipped, symlinks not followed), for at most
`MAX_FILES` source files and `MAX_WALKED` directory entries, stopping at `WALK_TIMEOUT_S`.
A file's language comes from its extension, else from its shebang. Project-wide tools find
their project (tsconfig.json, go.mod, Cargo.toml) nearest above each file (`projects`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from mcpkit.coding.deadline import Deadline
from mcpkit.coding.ignore import Walker, _WalkStopped
from mcpkit.coding.workspace import Workspace
from mcpkit.errors import UsageError

WALK_TIMEOUT_S = 30.0
"""Wall-clock limit of a workspace-wide walk; past it the files found so far are checked."""
MAX_FILES = 5000
"""Source files a workspace-wide run checks."""
MAX_WALKED = 200_000
"""Directory entries a workspace-wide walk looks at before it stops."""
MAX_PROJECTS = 8
"""Projects (tsconfig.json, go.mod, Cargo.toml) a workspace-wide run checks per tool."""

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
SHEBANG = re.compile(rb"^#!\s*(?:/usr)?(?:/local)?/bin/(?:env\s+(?:-\S+\s+)*)?(\S+)")
LANGUAGES = (PYTHON, JSTS, GO, RUST, SHELL)
"""Every language the tool checks, in the order results name them."""


class DiagnosticsError(UsageError):
    """A request the tool refuses (the message is meant for the model): a usage error, a
    `file_path` that does not exist or is a directory."""


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


def projects(plan: Plan, notes: list[str], files: list[Path], marker: str, tool: str
             ) -> tuple[list[Path], list[Path]]:
    """The project files (`marker`, nearest above each file) to run `tool` on, at most
    `MAX_PROJECTS` (a note in `notes` says so when there are more), and the files that have
    none."""
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
        notes.append(f"{tool} ran on the first {MAX_PROJECTS} of "
                     f"{len(chosen)} projects; give file_path to check the others.")
        chosen = chosen[:MAX_PROJECTS]
    return chosen, loose
