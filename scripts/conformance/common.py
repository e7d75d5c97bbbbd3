"""Shared machinery of run_server_legs.py and run_client_legs.py (stdlib only).

- the legs (harness arguments per leg) and their expected-failures files;
- ports, starting a server under test in its own process group, waiting until it answers
  HTTP, stopping only that process group (SIGTERM, then SIGKILL after a grace period);
- running harness.sh with a wall-clock limit, its output kept in a log file;
- the per-leg and overall report.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import summarize

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
HARNESS = HERE / "harness.sh"
EXPECTED_DIR = HERE / "expected-failures"
DEFAULT_OUT = REPO_ROOT / "out" / "conformance"

# leg name -> harness arguments selecting its scenarios
LEGS: dict[str, list[str]] = {
    "2025-11-25": ["--suite", "all", "--spec-version", "2025-11-25"],
    "2026-07-28": ["--suite", "all", "--spec-version", "2026-07-28"],
    "all": ["--suite", "all"],  # every scenario, including pending/extension ones (tasks-*)
}


def spec_args(leg: str) -> list[str]:
    """The leg's --spec-version arguments (none for the bare `all` leg)."""
    args = LEGS[leg]
    if "--spec-version" not in args:
        return []
    i = args.index("--spec-version")
    return args[i : i + 2]


ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def log(msg: str) -> None:
    print(msg, flush=True)


class Interrupted(Exception):
    pass


def install_signal_handlers() -> None:
    """Turn SIGTERM/SIGINT/SIGHUP into an exception so every `finally` stops its processes."""

    def handler(signum: int, _frame: object) -> None:
        raise Interrupted(f"received signal {signal.Signals(signum).name}")

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, handler)


# --------------------------------------------------------------------------- ports


def port_in_use(port: int) -> bool:
    """True if something listens on the port (127.0.0.1 or ::1) or it cannot be bound."""
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.settimeout(0.5)
                if s.connect_ex((host, port)) == 0:
                    return True
        except OSError:
            pass  # no IPv6 on this machine
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))
    except OSError as exc:
        return exc.errno in (errno.EADDRINUSE, errno.EACCES)
    return False


def free_port(avoid: set[int]) -> int:
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in avoid and not port_in_use(port):
            return port
    raise RuntimeError("could not find a free port")


def pick_ports(n: int, base: int | None) -> list[int]:
    if base is not None:
        return [base + i for i in range(n)]
    ports: list[int] = []
    for _ in range(n):
        ports.append(free_port(set(ports)))
    return ports


# --------------------------------------------------------------------------- processes


def stop_group(proc: subprocess.Popen[bytes], grace: float = 5.0, what: str = "process") -> None:
    """SIGTERM the process group led by proc, SIGKILL it after `grace` seconds.

    Only that group is signalled: proc was started with start_new_session=True, so its pgid
    is its pid and holds just proc and whatever it spawned."""
    pgid = proc.pid

    def group_alive() -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    proc.poll()
    if proc.returncode is None or group_alive():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            proc.poll()
            if proc.returncode is not None and not group_alive():
                break
            time.sleep(0.05)
        else:
            log(f"  {what} did not stop within {grace:.0f}s of SIGTERM: SIGKILL")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def tail(path: Path, lines: int = 60) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(cannot read {path}: {exc})"
    rows = text.splitlines()
    head = f"(last {lines} of {len(rows)} lines)\n" if len(rows) > lines else ""
    return head + "\n".join(rows[-lines:]) if rows else "(empty)"


def indent(text: str, prefix: str = "    | ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


_NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_status(url: str, timeout: float = 2.0) -> int | None:
    """The HTTP status a GET on url answers with (any status), None if nothing answered."""
    try:
        with _NO_PROXY_OPENER.open(urllib.request.Request(url, method="GET"), timeout=timeout) as r:
            return int(r.status)  # headers are enough: the body may be an endless SSE stream
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (urllib.error.URLError, OSError, ValueError):
        return None
    except Exception:  # http.client errors on a half-started server: not an answer yet
        return None


class ServerError(Exception):
    pass


class Server:
    """A server under test, in its own process group, output to a log file."""

    def __init__(self, argv: list[str], log_path: Path, cwd: Path = REPO_ROOT) -> None:
        self.argv = argv
        self.log_path = log_path
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self._log = open(log_path, "wb")  # closed in stop()
        self._log.write(f"$ {shlex.join(argv)}\n".encode())
        self._log.flush()
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, url: str, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            if not self.alive():
                raise ServerError(self._died_message(url))
            status = http_status(url)
            if status is not None:
                if not self.alive():  # something else answered and ours died meanwhile
                    raise ServerError(self._died_message(url))
                return status
            if time.monotonic() > deadline:
                raise ServerError(
                    f"server not ready: nothing answered {url} within {timeout:.0f}s "
                    f"(the process is still running); log {self.log_path}:\n"
                    + indent(tail(self.log_path))
                )
            time.sleep(0.2)

    def _died_message(self, url: str) -> str:
        code = self.proc.returncode
        text = tail(self.log_path)
        hint = ""
        if "No module named" in text:
            hint = (
                "\n  hint: the server module is missing from this Python "
                f"({self.argv[0]}); is the project installed (pip install -e .) and does the "
                "module exist yet?"
            )
        return (
            f"server exited (exit code {code}) before answering {url}; "
            f"command: {shlex.join(self.argv)}; log {self.log_path}:\n" + indent(text) + hint
        )

    def stop(self) -> None:
        try:
            stop_group(self.proc, grace=5.0, what="server")
        finally:
            self._log.close()


# --------------------------------------------------------------------------- harness


def ensure_harness() -> None:
    t0 = time.monotonic()
    r = subprocess.run(["bash", str(HARNESS), "--install-only"], stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise SystemExit(f"conformance: installing the harness failed (exit {r.returncode})")
    dt = time.monotonic() - t0
    if dt > 2:
        log(f"conformance: harness ready ({dt:.0f}s)")


def run_harness(args: list[str], log_path: Path, limit: float, echo: bool) -> tuple[int, bool]:
    """Run harness.sh ARGS in its own process group, output into log_path (and to stdout
    with echo). Returns (exit code, timed out)."""
    with open(log_path, "wb") as out:
        out.write(f"$ harness.sh {shlex.join(args)}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            ["bash", str(HARNESS), *args],
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        assert proc.stdout is not None
        deadline = time.monotonic() + limit
        timed_out = False
        try:
            os.set_blocking(proc.stdout.fileno(), False)
            while True:
                chunk = proc.stdout.read(65536)
                if chunk:
                    out.write(chunk)
                    if echo:
                        sys.stdout.write(ANSI.sub("", chunk.decode(errors="replace")))
                        sys.stdout.flush()
                    continue
                if proc.poll() is not None and not chunk:
                    rest = proc.stdout.read()
                    if rest:
                        out.write(rest)
                        if echo:
                            sys.stdout.write(ANSI.sub("", rest.decode(errors="replace")))
                    break
                if time.monotonic() > deadline:
                    timed_out = True
                    note = f"\n[runner] leg exceeded {limit:.0f}s: stopping the harness\n"
                    out.write(note.encode())
                    break
                time.sleep(0.05)
        finally:
            stop_group(proc, grace=5.0, what="harness")
            proc.stdout.close()
    return (proc.returncode if proc.returncode is not None else -1), timed_out


def harness_verdict(log_path: Path, known_failures: set[str] | None = None) -> str:
    """The harness's own closing section (its baseline comparison), without colours. Lines
    naming a scenario in known_failures (already shown as FAIL) are counted, not repeated."""
    try:
        text = ANSI.sub("", log_path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return ""
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Total:"):
            kept, folded = [], 0
            for line in lines[i:]:
                m = re.match(r"^\s*[✗~]\s+(\S+)\s*$", line)
                if m and known_failures and m.group(1) in known_failures:
                    folded += 1
                    continue
                if line.strip():
                    kept.append(line)
            if folded:
                kept.append(f"({folded} lines naming FAIL/XFAIL rows above left out)")
            return "\n".join(kept)
    return "(no summary from the harness; the end of its output:)\n" + "\n".join(lines[-40:])


# --------------------------------------------------------------------------- legs


@dataclass
class LegResult:
    leg: str
    mode: str
    out_dir: Path
    ok: bool = False
    error: str = ""  # why the leg failed, apart from scenario failures
    harness_rc: int | None = None
    seconds: float = 0.0
    summary: summarize.Summary | None = None
    notes: list[str] = field(default_factory=list)


def prepare_leg(
    leg: str, mode: str, out_root: Path, expected_dir: Path = EXPECTED_DIR
) -> tuple[Path, list[str], LegResult]:
    name = leg if mode == "server" else f"client-{leg}"
    out_dir = out_root / name
    result = LegResult(leg=leg, mode=mode, out_dir=out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    ef = expected_dir / f"{leg}.yml"
    expected: list[str] = []
    try:
        expected = summarize.load_expected_failures(ef)[mode]
    except (OSError, ValueError) as exc:
        result.error = f"bad expected-failures file: {exc}"
    return ef, expected, result


def finish_leg(result: LegResult, expected: list[str], harness_log: Path) -> None:
    crashed = summarize.crashed_scenarios(harness_log)
    s = summarize.summarize(result.out_dir, result.mode, expected, crashed)
    result.summary = s
    if not result.error:
        if result.harness_rc != 0:
            result.error = f"harness exited {result.harness_rc}"
        elif not s.scenarios:
            result.error = "no scenario results were written (the harness ran nothing?)"
    result.ok = not result.error
    if result.ok and not s.ok:
        # The harness is the judge; say so if our reading of the results differs.
        result.notes.append(
            "note: the harness passed this leg but summarize.py sees "
            f"{s.count('FAIL')} unexpected failure(s) / {len(s.stale)} stale entr(y/ies)"
        )


def print_leg(result: LegResult, harness_log: Path | None, details: bool) -> None:
    label = f"{result.mode} leg {result.leg}"
    verdict = "ok" if result.ok else "FAILED"
    log(f"\n== {label}: {verdict} ({result.seconds:.1f}s) -> {result.out_dir}")
    if result.summary is not None and result.summary.scenarios:
        log(summarize.format_table(result.summary, details=details))
    for note in result.notes:
        log("  " + note)
    if not result.ok:
        log(f"  {label} failed: " + result.error.replace("\n", "\n  "))
        if harness_log is not None and harness_log.exists() and result.harness_rc not in (None, 0):
            failing = (
                {x.name for x in result.summary.scenarios if x.status in ("FAIL", "XFAIL")}
                if result.summary
                else set()
            )
            log(f"  the harness's verdict ({harness_log}):")
            log(indent(harness_verdict(harness_log, failing)))


def print_overall(results: list[LegResult], mode: str, expected_dir: Path = EXPECTED_DIR) -> int:
    log(f"\n== conformance {mode} legs ==")
    passed = failed = xfail = 0
    for r in results:
        s = r.summary
        n = len(s.scenarios) if s else 0
        p = s.count("PASS") if s else 0
        f = s.count("FAIL") if s else 0
        x = s.count("XFAIL") if s else 0
        st = len(s.stale) if s else 0
        passed += p
        xfail += x
        # every failed leg counts at least once, whatever it failed on
        failed += max(f + st, 0 if r.ok else 1)
        what = f"{n} scenarios: {p} pass, {x} expected-fail, {f} FAIL"
        if st:
            what += f", {st} stale"
        if not r.ok and not f and not st:
            what += " - " + r.error.splitlines()[0][:90]
        log(f"  {r.leg:<11} {'ok' if r.ok else 'FAILED':<7} {what}  ({r.seconds:.0f}s)")
    if xfail:
        log(f"  ({xfail} scenario(s) fail as listed in {expected_dir}/*.yml)")
    log(f"conformance: {passed} passed, {failed} failed")
    return 0 if all(r.ok for r in results) else 1


def default_python(arg: str | None) -> str:
    return arg or sys.executable


def server_argv(template: str | None, python: str, module: str, port: int) -> list[str]:
    if template:
        return shlex.split(template.format(python=shlex.quote(python), port=port))
    return [python, "-m", module, "--port", str(port)]
