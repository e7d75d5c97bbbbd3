"""The Rust checker: `cargo check --message-format short` for the nearest Cargo.toml of the
files (cargo keeps its usual build cache)."""

from __future__ import annotations

import re

from mcpkit.coding.diagnostics import run
from mcpkit.coding.diagnostics.plan import RUST, Plan, projects
from mcpkit.coding.diagnostics.report import Report, plural

CARGO_LINE = re.compile(r"^(?P<path>[^:\s][^:]*\.rs):(?P<line>\d+):(?P<col>\d+): "
                        r"(?P<sev>error|warning|note|help)(?:\[(?P<code>[^\]]+)\])?: "
                        r"(?P<msg>.*)$")


async def check_rust(plan: Plan, report: Report) -> None:
    cargo = report.tool("cargo", RUST)
    if cargo is None:
        return
    manifests, loose = projects(plan, report.notes, plan.files.get(RUST, []), "Cargo.toml",
                                "cargo check")
    if loose:
        report.notes.append(f"cargo check skipped {plural(len(loose), 'file')} outside any "
                            "crate (no Cargo.toml above them).")
    for manifest in manifests:
        cwd = manifest.parent
        tool_run = await run.run_tool([cargo, "check", "--message-format", "short", "--quiet",
                                       "--manifest-path", str(manifest)], cwd)
        report.ran_tool("cargo check", RUST, tool_run)
        count = 0
        for line in tool_run.stderr.splitlines():
            match = CARGO_LINE.match(line)
            if match is None:
                continue
            count += 1
            severity = {"note": "info", "help": "info"}.get(match["sev"], match["sev"])
            message = f"{match['code']} {match['msg']}" if match["code"] else match["msg"]
            report.add(match["path"], cwd, int(match["line"]), int(match["col"]), severity,
                       message, "cargo check")
        if tool_run.code not in (0, 101, None) or (tool_run.code and not count):
            report.failed("cargo check", tool_run)
