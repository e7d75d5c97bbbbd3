#!/usr/bin/env python3
"""Summarise conformance-harness results written with ``-o DIR`` (stdlib only).

Usage: summarize.py DIR [--details] [--markdown] [--expected-failures FILE] [--mode server|client]

Each ``DIR/server-<scenario>-<timestamp>/checks.json`` (server mode) or
``DIR/<scenario>-<timestamp>/checks.json`` (client mode; auth scenarios live in
``DIR/auth/<name>-<timestamp>/``) is one scenario run; the latest run of a scenario wins.
Counts SUCCESS / FAILURE / WARNING checks per scenario (INFO and SKIPPED are ignored) and,
with ``--details``, prints the message of every FAILURE and WARNING.

With an expected-failures file, a scenario whose every failing/warning check is listed
(``scenario`` or ``scenario:check-id``) is shown as XFAIL, and a listed scenario (or check)
that passed is shown as STALE: the harness fails a run on those, so the lists can only shrink.
A WARNING counts as a failure here, as it does for the harness with ``--expected-failures``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

_TS = r"\d{4}-\d\d-\d\dT[\d-]+Z"
BAD = ("FAILURE", "WARNING")


@dataclass
class Scenario:
    name: str
    path: Path
    passed: int = 0
    failed: int = 0
    warnings: int = 0
    messages: list[str] = field(default_factory=list)
    bad_checks: list[str] = field(default_factory=list)  # ids of FAILURE/WARNING checks
    ok_checks: list[str] = field(default_factory=list)
    status: str = "PASS"  # PASS, FAIL, XFAIL


@dataclass
class Summary:
    root: Path
    scenarios: list[Scenario]
    stale: list[str]  # expected-failure entries that did not fail

    @property
    def checks(self) -> tuple[int, int, int]:
        return (
            sum(s.passed for s in self.scenarios),
            sum(s.failed for s in self.scenarios),
            sum(s.warnings for s in self.scenarios),
        )

    def count(self, status: str) -> int:
        return sum(1 for s in self.scenarios if s.status == status)

    @property
    def ok(self) -> bool:
        """No unexpected failure, no stale entry, at least one scenario ran."""
        return bool(self.scenarios) and self.count("FAIL") == 0 and not self.stale


def load_expected_failures(path: str | os.PathLike[str]) -> dict[str, list[str]]:
    """Parse the restricted YAML of an expected-failures file: ``server:`` and ``client:``,
    each an inline list (``[]``, ``[a, b]``) or a block list of ``- entry`` lines."""
    result: dict[str, list[str]] = {"server": [], "client": []}
    key: str | None = None

    def unquote(v: str) -> str:
        v = v.strip()
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            v = v[1:-1]
        return v

    for n, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not line.strip():
            continue
        top = re.match(r"^([A-Za-z_][\w-]*)\s*:\s*(.*)$", line)
        item = re.match(r"^\s*-\s+(.+)$", line)
        if top:
            key = top.group(1)
            if key not in result:
                raise ValueError(f"{path}:{n}: unknown key {key!r} (expected server/client)")
            rest = top.group(2).strip()
            if rest in ("", "[]"):
                continue
            if rest.startswith("[") and rest.endswith("]"):
                result[key] += [unquote(v) for v in rest[1:-1].split(",") if v.strip()]
                continue
            raise ValueError(f"{path}:{n}: expected a list after {key}:")
        elif item and key is not None:
            result[key].append(unquote(item.group(1)))
        else:
            raise ValueError(f"{path}:{n}: cannot parse line: {raw!r}")
    for entries in result.values():
        for e in entries:
            if not re.fullmatch(r"[^\s:]+(:[^\s:]+)?", e):
                raise ValueError(f"{path}: bad entry {e!r} (use scenario or scenario:check-id)")
    return result


def scenario_name(rel: str, mode: str) -> str:
    m = re.match(rf"^(.+)-({_TS})$", rel)
    name = m.group(1) if m else rel
    if mode == "server" and name.startswith("server-"):
        name = name[len("server-") :]
    return name


def crashed_scenarios(harness_log: str | os.PathLike[str]) -> dict[str, str]:
    """Scenarios the harness could not run at all (it logs "Failed to run scenario X: why"
    and writes no checks.json for them), from a saved harness output."""
    crashed: dict[str, str] = {}
    try:
        text = Path(harness_log).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return crashed
    for m in re.finditer(r"^Failed to run scenario (\S+?):\s*(.*)$", text, re.M):
        crashed[m.group(1)] = m.group(2).strip()
    return crashed


def summarize(
    root: str | os.PathLike[str],
    mode: str = "server",
    expected: list[str] | None = None,
    crashed: dict[str, str] | None = None,
) -> Summary:
    """Read DIR's results; `crashed` (scenario -> error) adds the scenarios that wrote none."""
    root = Path(root)
    latest: dict[str, Path] = {}
    found = []
    if root.is_dir():
        for dirpath, _dirs, files in os.walk(root):
            if "checks.json" in files:
                found.append(os.path.relpath(dirpath, root))
    for rel in sorted(found):  # sorted => the last timestamp of a scenario wins
        latest[scenario_name(rel, mode)] = root / rel / "checks.json"

    expected = expected or []
    whole = {e for e in expected if ":" not in e}
    per_check = {e for e in expected if ":" in e}
    scenarios = []
    for name, path in latest.items():
        s = Scenario(name=name, path=path)
        try:
            checks = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            why = f"unreadable: {exc}"
            checks = [{"id": "checks.json", "status": "FAILURE", "errorMessage": why}]
        for c in checks:
            st = c.get("status")
            cid = str(c.get("id"))
            if st == "SUCCESS":
                s.passed += 1
                s.ok_checks.append(cid)
            elif st in BAD:
                if st == "FAILURE":
                    s.failed += 1
                else:
                    s.warnings += 1
                s.bad_checks.append(cid)
                msg = c.get("errorMessage") or c.get("description", "")
                s.messages.append(f"{st} {cid}: {msg}")
        if s.bad_checks:
            listed = name in whole or all(f"{name}:{cid}" in per_check for cid in s.bad_checks)
            s.status = "XFAIL" if listed else "FAIL"
        scenarios.append(s)

    for name, why in (crashed or {}).items():
        if name in latest:
            continue
        s = Scenario(name=name, path=root, failed=1, bad_checks=["(scenario crashed)"])
        s.messages.append(f"FAILURE the harness could not run the scenario: {why}")
        s.status = "XFAIL" if name in whole else "FAIL"
        scenarios.append(s)
    scenarios.sort(key=lambda s: s.name)

    by_name = {s.name: s for s in scenarios}
    stale = []
    for e in expected:
        scen, _, cid = e.partition(":")
        ran = by_name.get(scen)
        if ran is None:
            continue  # not run in this leg: the harness ignores it too
        if cid:
            if cid not in ran.bad_checks and cid in ran.ok_checks:
                stale.append(e)
        elif not ran.bad_checks:
            stale.append(e)
    return Summary(root=root, scenarios=scenarios, stale=stale)


def format_table(summary: Summary, details: bool = False, markdown: bool = False) -> str:
    out = []
    if markdown:
        out.append("| scenario | status | ok | fail | warn | notes |")
        out.append("|---|---|---|---|---|---|")
        for s in summary.scenarios:
            note = "; ".join(m[:160].replace("|", "/") for m in s.messages) if details else ""
            out.append(
                f"| {s.name} | {s.status} | {s.passed} | {s.failed} | {s.warnings} | {note} |"
            )
    else:
        width = max((len(s.name) for s in summary.scenarios), default=10)
        for s in summary.scenarios:
            out.append(
                f"  {s.status:<5} {s.name:<{width}}  ok {s.passed:>3}  fail {s.failed:>2}"
                f"  warn {s.warnings:>2}"
            )
            if details or s.status == "FAIL":
                out.extend("          " + m[:300] for m in s.messages)
    for e in summary.stale:
        out.append(
            f"  STALE {e}: listed as an expected failure but passes: remove it from the list"
        )
    p, f, w = summary.checks
    out.append(
        f"  scenarios: {summary.count('PASS')} pass, {summary.count('XFAIL')} expected-fail,"
        f" {summary.count('FAIL')} FAIL of {len(summary.scenarios)};"
        f" checks: {p} ok, {f} failing, {w} warning"
    )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--details", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--expected-failures", metavar="FILE")
    ap.add_argument(
        "--harness-log",
        metavar="FILE",
        help="the harness's saved output: adds the scenarios it could not run",
    )
    ap.add_argument(
        "--mode",
        choices=("server", "client"),
        default=None,
        help="default: server if DIR holds server-* results, else client",
    )
    a = ap.parse_args(argv)
    mode = a.mode
    if mode is None:
        server_dirs = any(p.name.startswith("server-") for p in Path(a.dir).glob("*"))
        mode = "server" if server_dirs else "client"
    expected = load_expected_failures(a.expected_failures)[mode] if a.expected_failures else []
    crashed = crashed_scenarios(a.harness_log) if a.harness_log else None
    summary = summarize(a.dir, mode, expected, crashed)
    print(format_table(summary, details=a.details, markdown=a.markdown))
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
