"""The `diagnostics` tool itself: its schema, its description and its registration; the
work is planned (`plan.py`), checked per language (`checks.py`) and rendered (`render.py`)."""

from __future__ import annotations

from typing import Annotated

from mcpkit.coding.deadline import Deadline, in_thread
from mcpkit.coding.diagnostics.checks import run_checks
from mcpkit.coding.diagnostics.plan import (
    WALK_TIMEOUT_S,
    DiagnosticsError,
    plan_file,
    plan_workspace,
)
from mcpkit.coding.diagnostics.render import MAX_SHOWN, render
from mcpkit.coding.env import CodingEnv
from mcpkit.coding.workspace import WorkspaceError
from mcpkit.server.results import text_block
from mcpkit.server.server import Server
from mcpkit.server.tools import ToolResult

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
