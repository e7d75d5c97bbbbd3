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

One module per concept: `plan.py` finds what to check (the files of each language),
`run.py` finds and runs the tools bounded, one checker per language (`python.py`,
`typescript.py`, `go.py`, `rust.py`, `shell.py`) turns a tool's output into `Diagnostic`s
on a `Report` (`report.py`), `checks.py` runs the checkers side by side, `render.py` writes
the answer and `tool.py` registers the tool.
"""

from __future__ import annotations

from mcpkit.coding.diagnostics.tool import register

__all__ = ["register"]
