"""Hub benchmark: `tools/call` through the hub's `/mcp` against straight to the mcpkit echo
server, and against the `mcp-proxy` package proxying the same server.

    .venv/bin/python bench/hub_bench.py            # 2000 calls at 1 in flight, 5000 at 32, x3
    .venv/bin/python bench/hub_bench.py --quick    # 500 / 1500 calls, 1 run (~15 s)
    .venv/bin/python bench/hub_bench.py --json     # machine-readable results on stdout
    # also: --in-flight 1 32, --calls N [N ...], --warmup N, --repeat N, --no-mcp-proxy,
    #       --mcp-proxy PATH, --mcp-proxy-venv DIR, --relay, --asyncio, --profile-hub FILE,
    #       --quiet

Targets ("tools/call echo" `{"text": "hello, world"}`, answer text checked), all on
127.0.0.1, all started by this script and stopped by PID at the end (even on failure):
  direct     `python -m mcpkit.testing.echo_server --transport http` (Streamable HTTP)
  hub        the hub's `/mcp` with that same echo server registered as the upstream `echo`
             (tool `echo__echo`); the hub runs in its own process (this file with
             --serve-hub): a fresh SQLite file in a temp dir, a generated
             MCPKIT_HUB_SECRET_KEY, private upstreams allowed, rate limits raised so they never
             throttle (MCPKIT_HUB_RATE_LIMIT / _RATE_BURST), uvicorn on uvloop as
             `mcpkit hub serve` runs it (log level warning: no access log), app built like
             the router tests' (`McpEndpoint` mounted at /mcp, plus the health checker as
             `serve` adds it). The admin is seeded straight into the database; the user, their
             token and the upstream are made through the REST API.
  mcp-proxy  the `mcp-proxy` PyPI package (sparfenyuk/mcp-proxy, built on the official
             Python SDK 1.x) serving Streamable HTTP at /mcp (stateful, JSON replies) in
             front of `python -m mcpkit.testing.echo_server --transport stdio`, its child.
  tcp-relay  (--relay) `bench/tcp_relay.py`: bytes copied both ways between the client and
             the same echo server, no parsing - what one more Python process in the path
             costs before the hop does any work of its own.

mcp-proxy is a bench-only dependency and is NOT installed into the project venv: it pins
`mcp<2`, which would replace the `mcp` 2.x the other benches and tests use. Unless --mcp-proxy
names an executable (or `mcp-proxy` sits next to this interpreter), the script makes a venv of
its own (default ~/.cache/mcpkit-bench/mcp-proxy-venv) and `pip install`s mcp-proxy, uvloop
and httptools into it. If that fails, the mcp-proxy column is skipped with the reason.

One client for every target: `mcpkit.Client(url, era="legacy")` (the `initialize` handshake;
mcp-proxy speaks only the legacy era, so all three targets are measured in it), a fresh
connection per cell, on uvloop unless --asyncio. The hub itself picks the era it speaks to its
upstream (auto: modern with the mcpkit echo server). A cell: one checked call, `--warmup` calls,
then a fixed number of calls with N tasks in flight, each call timed; calls/s, median and p99
latency, and the CPU % of the client and of each target's processes over the measured calls.
Cells are interleaved across targets and repeated; the median run (by calls/s) is reported.

Ratios: hub/direct calls/s (target >= 50 %), hub added median latency = hub median - direct
median (target <= 1 ms), hub/mcp-proxy calls/s, tcp-relay/direct calls/s. The client, the
hub, the echo server (and mcp-proxy with its child) all share the machine's CPUs - on a
2-core machine that is the dominant effect at 32 in flight, and the output says so.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from client_bench import children_of, stop_process  # shared: stop by PID, children too

from mcpkit.client import Timeouts

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
TEXT = "hello, world"
TARGETS = ("direct", "hub", "mcp-proxy", "tcp-relay")
STEP_TIMEOUT = 30.0
MAX_ERRORS = 100
TARGET_THROUGHPUT_PCT = 50.0
TARGET_ADDED_MEDIAN_MS = 1.0
RATE_LIMIT = 100_000_000  # per minute: far above anything this machine can send
RATE_BURST = 10_000_000
DEFAULT_PROXY_VENV = Path.home() / ".cache" / "mcpkit-bench" / "mcp-proxy-venv"
ECHO_HTTP = [PY, "-m", "mcpkit.testing.echo_server", "--transport", "http",
             "--host", "127.0.0.1", "--port"]
ECHO_STDIO = [PY, "-m", "mcpkit.testing.echo_server", "--transport", "stdio"]


def log(msg: str, quiet: bool = False) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


# ================================================================ processes


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of `pid` (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def self_cpu() -> float:
    t = os.times()
    return t.user + t.system


def wait_listening(proc: subprocess.Popen[Any], port: int, what: str,
                   logfile: Path | None = None) -> None:
    deadline = time.monotonic() + STEP_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}" + _tail(logfile))
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.02)
    raise TimeoutError(f"{what} is not listening on port {port}" + _tail(logfile))


def _tail(logfile: Path | None) -> str:
    if logfile is None or not logfile.exists():
        return ""
    lines = logfile.read_text(errors="replace").strip().splitlines()[-15:]
    return ("\n  " + "\n  ".join(lines)) if lines else ""


@dataclass
class Running:
    """A started target: its URL, the processes whose CPU it costs, and the bearer token."""

    url: str
    procs: dict[str, int]
    """name -> PID of each process a call costs CPU in (children are found when measuring)"""
    token: str | None = None
    tool: str = "echo"


def start(stack: contextlib.ExitStack, argv: list[str], what: str, logfile: Path,
          env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    out = stack.enter_context(logfile.open("wb"))
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out,
                            stderr=subprocess.STDOUT, start_new_session=True)
    stack.callback(stop_process, proc)  # stopped by PID even when a later step fails
    return proc


# ================================================================ the hub (its own process)


def serve_hub(port: int, database_url: str, profile: str | None) -> None:
    """`--serve-hub`: the hub's app with `/mcp` mounted, under uvicorn on uvloop, the way
    `mcpkit hub serve` runs it. Settings from MCPKIT_HUB_* (the secret key, rate limits)."""
    import asyncio

    import uvicorn

    from mcpkit.hub.api import create_app
    from mcpkit.hub.router import McpEndpoint
    from mcpkit.hub.settings import HubSettings

    settings = HubSettings.from_env(database_url=database_url, host="127.0.0.1", port=port,
                                    allow_private_upstreams=True, log_level="warning")
    endpoint = McpEndpoint()
    components: list[Any] = []
    with contextlib.suppress(ImportError):  # what `serve` adds, when this tree has it
        from mcpkit.hub.health import health_checker

        components.append(health_checker)
    components.append(endpoint.component)
    app = create_app(settings, components=components, mounts={"/mcp": endpoint})
    options = {"host": settings.host, "port": settings.port, "log_level": settings.log_level,
               "lifespan": "on", "timeout_graceful_shutdown": 5, "server_header": False}
    try:  # what `serve` uses, when this tree has it (an older tree is measured as it ran)
        from mcpkit.transports.server.http.serve import uvicorn_config

        config = uvicorn_config(app, **options)
    except ImportError:
        config = uvicorn.Config(app, **options)

    from mcpkit.hub.serve import graceful_server_class

    server = graceful_server_class()(config)
    factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop
    with contextlib.suppress(ImportError):
        import uvloop

        factory = uvloop.new_event_loop
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(server.serve())
    finally:
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile)


def seed_admin(database_url: str, key: str) -> str:
    """Migrate the database, add the admin `root`; a token of theirs (as the hub tests do)."""
    import anyio

    from mcpkit.hub.crypto import SecretBox
    from mcpkit.hub.store import Store

    async def seed() -> str:
        async with await Store.open(database_url, SecretBox([key])) as store:
            user = await store.users.create("root", is_admin=True)
            return (await store.tokens.create(user.id, name="bench")).secret

    return anyio.run(seed)


def rest(base: str, method: str, path: str, token: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=STEP_TIMEOUT) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        raise RuntimeError(f"{method} {path}: {error.code} {error.read()[:300]!r}") from None


def wait_ready(base: str, proc: subprocess.Popen[Any], logfile: Path) -> None:
    deadline = time.monotonic() + STEP_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the hub exited with {proc.returncode}" + _tail(logfile))
        with contextlib.suppress(OSError), urllib.request.urlopen(base + "/readyz",
                                                                  timeout=2) as response:
            if response.status == 200:
                return
        time.sleep(0.05)
    raise TimeoutError("the hub is not ready" + _tail(logfile))


def start_hub(stack: contextlib.ExitStack, tmp: Path, echo_url: str,
              profile: str | None) -> Running:
    from mcpkit.hub.crypto import generate_key

    key = generate_key()
    database_url = f"sqlite+aiosqlite:///{tmp / 'hub.db'}"
    admin = seed_admin(database_url, key)
    port = free_port()
    env = {**os.environ, "MCPKIT_HUB_SECRET_KEY": key, "MCPKIT_HUB_DATA": str(tmp),
           "MCPKIT_HUB_RATE_LIMIT": str(RATE_LIMIT), "MCPKIT_HUB_RATE_BURST": str(RATE_BURST)}
    argv = [PY, str(Path(__file__).resolve()), "--serve-hub", "--port", str(port),
            "--database-url", database_url]
    if profile:
        argv += ["--profile-hub", str(Path(profile).resolve())]
    logfile = tmp / "hub.log"
    proc = start(stack, argv, "the hub", logfile, env)
    base = f"http://127.0.0.1:{port}"
    wait_listening(proc, port, "the hub", logfile)
    wait_ready(base, proc, logfile)
    user = rest(base, "POST", "/api/v1/admin/users", admin, {"name": "bench", "is_admin": False})
    token = rest(base, "POST", f"/api/v1/admin/users/{user['id']}/tokens", admin,
                 {"name": "bench"})["secret"]
    rest(base, "POST", "/api/v1/users/mcp/upstreams", token,
         {"name": "echo", "url": echo_url, "transport": "http"})
    return Running(f"{base}/mcp", {"hub": proc.pid}, token=token, tool="echo__echo")


# ================================================================ mcp-proxy


def find_mcp_proxy(args: argparse.Namespace) -> tuple[str | None, str]:
    """The mcp-proxy executable (installing it into its own venv if needed), or None and why."""
    if args.mcp_proxy:
        path = shutil.which(args.mcp_proxy)
        return (path, "") if path else (None, f"--mcp-proxy {args.mcp_proxy}: not found")
    beside = Path(PY).parent / "mcp-proxy"
    if beside.exists():
        return str(beside), ""
    venv = Path(args.mcp_proxy_venv).expanduser()
    exe = venv / "bin" / "mcp-proxy"
    if exe.exists():
        return str(exe), ""
    log(f"installing mcp-proxy into {venv} (its own venv: it pins mcp<2) ...", args.quiet)
    try:
        subprocess.run([PY, "-m", "venv", str(venv)], check=True, capture_output=True,
                       timeout=120)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                        "mcp-proxy", "uvloop", "httptools"],
                       check=True, capture_output=True, text=True, timeout=300)
    except (subprocess.SubprocessError, OSError) as error:
        detail = getattr(error, "stderr", "") or ""
        lines = [x for x in str(detail).splitlines() if "WARNING" not in x] or [str(error)]
        return None, f"mcp-proxy could not be installed: {lines[-1][:300]}"
    return (str(exe), "") if exe.exists() else (None, "mcp-proxy installed no executable")


def proxy_version(exe: str) -> str:
    with contextlib.suppress(subprocess.SubprocessError, OSError):
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
        return (out.stdout or out.stderr).strip().splitlines()[-1].split()[-1]
    return "?"


def start_mcp_proxy(stack: contextlib.ExitStack, tmp: Path, exe: str) -> Running:
    port = free_port()
    argv = [exe, "--host", "127.0.0.1", "--port", str(port), "--log-level", "WARNING",
            "--cwd", str(ROOT), "--", *ECHO_STDIO]
    logfile = tmp / "mcp-proxy.log"
    proc = start(stack, argv, "mcp-proxy", logfile)
    wait_listening(proc, port, "mcp-proxy", logfile)
    return Running(f"http://127.0.0.1:{port}/mcp", {"mcp-proxy": proc.pid})


def start_relay(stack: contextlib.ExitStack, tmp: Path, echo_port: int,
                echo_pid: int) -> Running:
    port = free_port()
    logfile = tmp / "tcp-relay.log"
    proc = start(stack, [PY, str(Path(__file__).with_name("tcp_relay.py")), str(port),
                         str(echo_port)], "the TCP relay", logfile)
    wait_listening(proc, port, "the TCP relay", logfile)
    return Running(f"http://127.0.0.1:{port}/mcp", {"tcp-relay": proc.pid, "echo": echo_pid})


def with_children(procs: dict[str, int]) -> dict[str, int]:
    """`procs` and their children (mcp-proxy's stdio echo server: "mcp-proxy child")."""
    out = dict(procs)
    for name, pid in procs.items():
        for i, kid in enumerate(children_of(pid)):
            out[f"{name} child" + (f" {i + 1}" if i else "")] = kid
    return out


# ================================================================ measuring


@dataclass
class Cell:
    target: str
    in_flight: int
    run: int
    calls: int = 0
    seconds: float = 0.0
    calls_per_s: float = 0.0
    median_ms: float = 0.0
    p99_ms: float = 0.0
    errors: int = 0
    client_cpu_pct: float = 0.0
    server_cpu_pct: float = 0.0
    cpu_pct: dict[str, float] = field(default_factory=dict)
    """CPU % (of one core) of each of the target's processes over the measured calls"""
    failed: str = ""


@dataclass
class Results:
    cells: list[Cell] = field(default_factory=list)
    ratios: list[dict[str, Any]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(q * len(sorted_values)) - 1))
    return sorted_values[index]


async def measure(target: str, running: Running, in_flight: int, calls: int, warmup: int,
                  run: int) -> Cell:
    import anyio

    from mcpkit import Client

    cell = Cell(target, in_flight, run)
    latencies: list[float] = []
    limit = STEP_TIMEOUT + (calls + warmup) * 0.05  # bounded even for a very slow target
    with anyio.fail_after(limit):
        async with Client(
            running.url,
            era="legacy",
            bearer_token=running.token,
            timeouts=Timeouts(timeout=STEP_TIMEOUT),
        ) as client:

            async def call() -> bool:
                result = await client.call_tool(running.tool, {"text": TEXT})
                return (result.is_error is not True
                        and getattr(result.content[0], "text", None) == TEXT)

            if not await call():
                raise RuntimeError(f"{target}: the echo call returned a wrong answer")

            async def batch(total: int, timed: bool) -> None:
                left = [total]

                async def worker() -> None:
                    perf = time.perf_counter
                    while left[0] > 0:
                        left[0] -= 1
                        t0 = perf()
                        ok = await call()
                        if timed:
                            latencies.append(perf() - t0)
                        if not ok:
                            cell.errors += 1
                            if cell.errors > MAX_ERRORS:
                                raise RuntimeError(f"more than {MAX_ERRORS} wrong answers")

                async with anyio.create_task_group() as tg:
                    for _ in range(min(in_flight, max(1, total))):
                        tg.start_soon(worker)

            await batch(warmup, timed=False)
            procs = with_children(running.procs)
            srv0 = {name: cpu_seconds(pid) for name, pid in procs.items()}
            cpu0, t0 = self_cpu(), time.perf_counter()
            await batch(calls, timed=True)
            elapsed = time.perf_counter() - t0
            cpu1 = self_cpu()
            srv1 = {name: cpu_seconds(pid) for name, pid in procs.items()}
    latencies.sort()
    cell.calls, cell.seconds = len(latencies), round(elapsed, 4)
    cell.calls_per_s = len(latencies) / elapsed if elapsed > 0 else 0.0
    cell.median_ms = statistics.median(latencies) * 1000 if latencies else 0.0
    cell.p99_ms = percentile(latencies, 0.99) * 1000
    cell.client_cpu_pct = 100 * (cpu1 - cpu0) / elapsed if elapsed > 0 else 0.0
    if elapsed > 0:
        cell.cpu_pct = {name: round(100 * (srv1[name] - srv0[name]) / elapsed, 1)
                        for name in procs}
        cell.server_cpu_pct = sum(cell.cpu_pct.values())
    return cell


async def measure_all(args: argparse.Namespace, running: dict[str, Running]) -> list[Cell]:
    cells: list[Cell] = []
    for run in range(args.repeat):  # interleaved, so machine noise hits every target
        for in_flight, calls in zip(args.in_flight, args.calls, strict=True):
            warmup = args.warmup if args.warmup is not None else max(100, calls // 10)
            for target in (t for t in TARGETS if t in running):
                try:
                    cell = await measure(target, running[target], in_flight, calls, warmup,
                                         run)
                except Exception as error:  # reported in the table; the run goes on
                    cell = Cell(target, in_flight, run,
                                failed=f"{type(error).__name__}: {error}"[:300])
                cells.append(cell)
                log(f"  run {run + 1}/{args.repeat} x{in_flight:<3} {target:9} " + (
                    f"FAILED: {cell.failed}" if cell.failed else
                    f"{cell.calls_per_s:8,.0f} calls/s  median {cell.median_ms:6.3f} ms  "
                    f"p99 {cell.p99_ms:7.3f} ms  (client cpu {cell.client_cpu_pct:3.0f}%, "
                    f"{cpu_text(cell)}, errors {cell.errors})"),
                    args.quiet)
    return cells


def cpu_text(cell: Cell) -> str:
    """"hub 68% (440 µs/call) + echo 13% (84 µs/call)": CPU per call is steadier than calls/s
    on a loaded machine."""
    return " + ".join(f"{name} {pct:.0f}% ({cpu_us(cell, pct):.0f} µs/call)"
                      for name, pct in cell.cpu_pct.items())


def pick_medians(cells: list[Cell]) -> list[Cell]:
    """The median run (by calls/s) of each target and in-flight count."""
    groups: dict[tuple[str, int], list[Cell]] = {}
    for cell in cells:
        groups.setdefault((cell.target, cell.in_flight), []).append(cell)
    out = []
    for group in groups.values():
        ok = sorted((c for c in group if not c.failed), key=lambda c: c.calls_per_s)
        out.append(ok[len(ok) // 2] if ok else group[-1])
    return out


def cpu_us(cell: Cell, pct: float) -> float:
    """A CPU % over the cell's measured calls, as µs of CPU per call."""
    return pct / 100 * cell.seconds / cell.calls * 1e6 if cell.calls else 0.0


def cpu_accounting(direct: Cell, hub: Cell) -> dict[str, float]:
    """Where a call's CPU goes, from the two cells' own measurements.

    The hub is an MCP server (for the caller) and an MCP client (of the upstream) in one
    process. Its floor is what one MCP server plus one MCP client cost for the same calls at
    the same rate: the echo server plus the client, measured in the hub cell itself (the same
    code costs more per call at a lower rate - fewer calls per loop wake-up - so the direct
    cell's figures would flatter the floor). `hub_over_floor` is how far the hub is from
    doing nothing but being a server and a client. A call through the hub costs the client,
    the hub and the echo server; a direct call the client and the echo server. When the run
    is CPU-bound (2 cores at 32 in flight) or serial (1 in flight, where latency is mostly
    CPU), hub/direct calls/s cannot exceed `ceiling_pct` = direct CPU per call / hub-path CPU
    per call. A hub costing exactly its floor doubles the path's CPU: its ceiling is 50%,
    the target itself."""
    client_h = cpu_us(hub, hub.client_cpu_pct)
    echo_h = cpu_us(hub, hub.cpu_pct.get("echo", 0.0))
    hub_us = cpu_us(hub, hub.cpu_pct.get("hub", 0.0))
    direct_path = cpu_us(direct, direct.client_cpu_pct + direct.server_cpu_pct)
    hub_path = cpu_us(hub, hub.client_cpu_pct + hub.server_cpu_pct)
    floor = client_h + echo_h
    return {
        "direct_path_us": direct_path,
        "hub_path_us": hub_path,
        "hub_us": hub_us,
        "hub_floor_us": floor,
        "hub_over_floor": hub_us / floor if floor else 0.0,
        "ceiling_pct": 100 * direct_path / hub_path if hub_path else 0.0,
    }


def ratios(cells: list[Cell]) -> list[dict[str, Any]]:
    by = {(c.target, c.in_flight): c for c in cells if not c.failed}
    out = []
    for in_flight in sorted({c.in_flight for c in cells}):
        direct, hub, proxy, relay = (by.get((t, in_flight)) for t in TARGETS)
        row: dict[str, Any] = {"in_flight": in_flight}
        if direct and hub and direct.calls_per_s:
            row["hub_over_direct_pct"] = 100 * hub.calls_per_s / direct.calls_per_s
            row["hub_added_median_ms"] = hub.median_ms - direct.median_ms
            row["hub_added_p99_ms"] = hub.p99_ms - direct.p99_ms
            row["meets_throughput"] = row["hub_over_direct_pct"] >= TARGET_THROUGHPUT_PCT
            row["meets_latency"] = row["hub_added_median_ms"] <= TARGET_ADDED_MEDIAN_MS
            row["cpu"] = cpu_accounting(direct, hub)
            # Little's law: in a closed loop the median latency is about in_flight / calls/s,
            # so "added median <= target" is a throughput floor in disguise.
            row["latency_target_as_pct"] = 100 * in_flight / (
                in_flight + TARGET_ADDED_MEDIAN_MS / 1000 * direct.calls_per_s)
        if hub and proxy and proxy.calls_per_s:
            row["hub_over_mcp_proxy"] = hub.calls_per_s / proxy.calls_per_s
            row["mcp_proxy_over_direct_pct"] = (100 * proxy.calls_per_s / direct.calls_per_s
                                                if direct and direct.calls_per_s else None)
        if relay and direct and direct.calls_per_s:
            row["tcp_relay_over_direct_pct"] = 100 * relay.calls_per_s / direct.calls_per_s
        out.append(row)
    return out


def table(res: Results) -> str:
    cells = sorted(res.cells, key=lambda c: (c.in_flight, TARGETS.index(c.target)))
    out = ["| in flight | target | calls | calls/s | median | p99 | client CPU | target CPU |",
           "|---:|---|---:|---:|---:|---:|---:|---:|"]
    for c in cells:
        if c.failed:
            out.append(f"| {c.in_flight} | {c.target} | failed: {c.failed} | | | | | |")
            continue
        out.append(f"| {c.in_flight} | {c.target} | {c.calls:,} | {c.calls_per_s:,.0f} | "
                   f"{c.median_ms:.3f} ms | {c.p99_ms:.3f} ms | {c.client_cpu_pct:.0f}% | "
                   f"{cpu_text(c)} |")
    out += ["", "| in flight | hub/direct calls/s | hub added median | hub added p99 "
            "| hub/mcp-proxy calls/s | mcp-proxy/direct calls/s | tcp-relay/direct calls/s |",
            "|---:|---:|---:|---:|---:|---:|---:|"]

    def pct(v: Any, ok: Any = None) -> str:
        return "-" if v is None else f"{v:.0f}%" + ("" if ok is None else
                                                      (" ok" if ok else " MISS"))

    for r in res.ratios:
        added = r.get("hub_added_median_ms")
        out.append(
            f"| {r['in_flight']} | {pct(r.get('hub_over_direct_pct'), r.get('meets_throughput'))}"
            f" | " + ("-" if added is None else f"{added:+.3f} ms"
                      + (" ok" if r["meets_latency"] else " MISS"))
            + " | " + ("-" if r.get("hub_added_p99_ms") is None
                       else f"{r['hub_added_p99_ms']:+.3f} ms")
            + " | " + ("-" if r.get("hub_over_mcp_proxy") is None
                       else f"{r['hub_over_mcp_proxy']:.2f}x")
            + f" | {pct(r.get('mcp_proxy_over_direct_pct'))}"
            + f" | {pct(r.get('tcp_relay_over_direct_pct'))} |")
    accounted = [r for r in res.ratios if "cpu" in r]
    if accounted:
        out += ["", "| in flight | direct CPU/call (client + echo) | hub path CPU/call "
                "(client + hub + echo) | hub CPU/call | hub floor (server + client) "
                "| hub/floor | hub/direct ceiling (CPU) |",
                "|---:|---:|---:|---:|---:|---:|---:|"]
        for r in accounted:
            a = r["cpu"]
            out.append(f"| {r['in_flight']} | {a['direct_path_us']:.0f} µs | "
                       f"{a['hub_path_us']:.0f} µs | {a['hub_us']:.0f} µs | "
                       f"{a['hub_floor_us']:.0f} µs | {a['hub_over_floor']:.2f}x | "
                       f"{a['ceiling_pct']:.0f}% |")
        out.append("hub floor = the echo server's plus the client's CPU per call in the hub "
                   "cell: one MCP server and one MCP client at the hub's rate, which the hub "
                   "is. ceiling = direct "
                   "CPU/call over hub-path CPU/call, the most hub/direct calls/s can be when "
                   "the run is CPU-bound or serial. A hub costing exactly its floor doubles "
                   "the path's CPU, so its ceiling is 50%: the throughput target is met only "
                   "by a hub cheaper than a standalone MCP server plus client.")
    equivalents = [f"{r['latency_target_as_pct']:.0f}% at {r['in_flight']} in flight"
                   for r in res.ratios if "latency_target_as_pct" in r]
    if equivalents:
        out += ["", "Each client task sends its next call when the last is answered, so the "
                "median latency is about in-flight / calls/s (Little's law) and +"
                f"{TARGET_ADDED_MEDIAN_MS:g} ms at the median is the same as hub/direct "
                f"calls/s of at least {', '.join(equivalents)}: at 1 in flight it measures "
                "the hop; with many in flight it is queueing, set by the throughput."]
    s = res.settings
    out += ["", f"targets: hub >= {TARGET_THROUGHPUT_PCT:.0f}% of direct calls/s, "
            f"<= {TARGET_ADDED_MEDIAN_MS:g} ms added at the median. CPU % is of one core; "
            "target CPU = each process a call goes through, with its CPU per call.",
            f"({s['cpus']} CPUs shared by the client, the hub, the echo server and mcp-proxy; "
            f"client on {s['client_loop']}, era {s['era']}; Python {s['python']}; "
            f"mcp-proxy {s.get('mcp_proxy_version', '-')}; median of {s['repeat']} run(s); "
            f"load average {s['loadavg_start']:.2f} -> {s.get('loadavg_end', 0):.2f})"]
    out += res.notes
    return "\n".join(out)


# ================================================================ the run


def bench(args: argparse.Namespace) -> Results:
    res = Results(settings={
        "in_flight": args.in_flight, "calls": args.calls, "warmup": args.warmup,
        "repeat": args.repeat, "cpus": os.cpu_count(), "python": sys.version.split()[0],
        "client": "mcpkit.Client", "era": "legacy (2025-11-25 initialize) for all targets",
        "client_loop": "asyncio" if args.asyncio else "uvloop",
        "loadavg_start": os.getloadavg()[0],
    })
    if (os.cpu_count() or 1) <= 2:
        res.notes.append(f"note: only {os.cpu_count()} CPU cores, shared by the client, the hub, "
                         "the echo server and mcp-proxy: where the client plus a target's "
                         "processes need more than that, a figure is the machine's limit, not "
                         "the target's. The hub and mcp-proxy are each one Python process "
                         "(one core at most); a hub process at ~100% is the hub's own limit.")
    proxy_exe: str | None = None
    if args.no_mcp_proxy:
        res.notes.append("mcp-proxy: skipped (--no-mcp-proxy)")
    else:
        proxy_exe, why = find_mcp_proxy(args)
        if proxy_exe is None:
            log(f"mcp-proxy column skipped: {why}", args.quiet)
            res.notes.append(f"mcp-proxy: skipped - {why}")
        else:
            res.settings["mcp_proxy_version"] = proxy_version(proxy_exe)
    with tempfile.TemporaryDirectory(prefix="hub-bench-") as tmp_name, \
            contextlib.ExitStack() as stack:
        tmp = Path(tmp_name)
        port = free_port()
        echo = start(stack, [*ECHO_HTTP, str(port)], "the echo server", tmp / "echo.log")
        wait_listening(echo, port, "the echo server", tmp / "echo.log")
        echo_url = f"http://127.0.0.1:{port}/mcp"
        running = {"direct": Running(echo_url, {"echo": echo.pid})}
        hub = start_hub(stack, tmp, echo_url, args.profile_hub)
        hub.procs["echo"] = echo.pid  # a call through the hub costs the echo server's CPU too
        running["hub"] = hub
        if proxy_exe is not None:
            try:
                running["mcp-proxy"] = start_mcp_proxy(stack, tmp, proxy_exe)
            except (RuntimeError, TimeoutError, OSError) as error:
                log(f"mcp-proxy column skipped: {error}", args.quiet)
                res.notes.append(f"mcp-proxy: skipped - {error}")
        if args.relay:
            running["tcp-relay"] = start_relay(stack, tmp, port, echo.pid)
        log(f"targets: {', '.join(f'{k} {v.url}' for k, v in running.items())}", args.quiet)
        # Seeding the hub imported its store (SQLAlchemy) into this process. Left in the
        # collector's generations, that heap made each full collection of the client ~60 ms,
        # about one a second at 32 in flight, landing in every target's p99 (found by timing
        # every call: the stalls hit all 32 in flight at once, at the client's collections).
        gc.collect()
        gc.freeze()
        if args.asyncio:
            import asyncio

            all_cells = asyncio.run(measure_all(args, running))
        else:
            import uvloop

            all_cells = uvloop.run(measure_all(args, running))
    # the ExitStack has stopped every process (hub first: its profile is written on SIGTERM)
    res.cells = pick_medians(all_cells)
    res.ratios = ratios(res.cells)
    res.settings["loadavg_end"] = os.getloadavg()[0]
    if args.profile_hub:
        res.notes.append(f"hub profile (cProfile, whole run): {args.profile_hub} - "
                         "the hub's figures are not comparable when profiled")
    return res


def print_profile(path: str, limit: int = 30) -> None:
    import pstats

    with contextlib.suppress(OSError):
        stats = pstats.Stats(path, stream=sys.stderr)
        stats.strip_dirs().sort_stats("tottime").print_stats(limit)
        stats.sort_stats("cumulative").print_stats(limit)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="500 / 1500 calls (1 / 32 in flight), 1 run")
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.add_argument("--in-flight", nargs="+", type=int, default=[1, 32])
    parser.add_argument("--calls", nargs="+", type=int, default=None,
                        help="measured calls per cell: one value, or one per --in-flight "
                             "(default 2000 at 1 in flight, 5000 above)")
    parser.add_argument("--warmup", type=int, default=None,
                        help="calls before measuring (default: a tenth, at least 100)")
    parser.add_argument("--repeat", type=int, default=None,
                        help="interleaved runs; the median is reported (default 3, 1 --quick)")
    parser.add_argument("--no-mcp-proxy", action="store_true", help="skip the mcp-proxy column")
    parser.add_argument("--mcp-proxy", metavar="PATH", help="the mcp-proxy executable to use")
    parser.add_argument("--mcp-proxy-venv", metavar="DIR", default=str(DEFAULT_PROXY_VENV),
                        help="where to install mcp-proxy when it is missing (default %(default)s)")
    parser.add_argument("--relay", action="store_true",
                        help="also measure a bare TCP relay (bench/tcp_relay.py) in front of "
                             "the echo server: the cost of the hop itself")
    parser.add_argument("--asyncio", action="store_true",
                        help="run the client on plain asyncio (default uvloop)")
    parser.add_argument("--profile-hub", metavar="FILE",
                        help="run the hub under cProfile and write the stats to FILE (then "
                             "print the top entries to stderr; slows the hub down)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--serve-hub", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--database-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_hub:
        serve_hub(args.port, args.database_url, args.profile_hub)
        return
    if args.calls is None:
        quick = (500, 1500)
        full = (2000, 5000)
        args.calls = [(quick if args.quick else full)[0 if n <= 1 else 1]
                      for n in args.in_flight]
    elif len(args.calls) == 1:
        args.calls = args.calls * len(args.in_flight)
    if len(args.calls) != len(args.in_flight) or min(args.calls) < 1 or min(args.in_flight) < 1:
        parser.error("--calls: one value, or one per --in-flight value, each at least 1")
    args.repeat = args.repeat or (1 if args.quick else 3)
    res = bench(args)
    if args.profile_hub:
        print_profile(args.profile_hub)
    if args.json:
        print(json.dumps(asdict(res), indent=2))
    else:
        print(table(res))


if __name__ == "__main__":
    main()
