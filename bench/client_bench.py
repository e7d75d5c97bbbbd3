"""Client benchmark: mcpkit's `Client` against the official Python SDK's client, same server.

    .venv/bin/python bench/client_bench.py            # full: 3 s per cell after 0.5 s warm-up, x3
    .venv/bin/python bench/client_bench.py --quick    # short run
    .venv/bin/python bench/client_bench.py --json     # machine-readable results on stdout

Every client talks to the same server, `python -m mcpkit.testing.echo_server` (dual-era), so
the differences are the clients'. Measures `tools/call echo` calls/s at 1 and 32 calls in
flight (concurrent tasks sharing one connection) over stdio and Streamable HTTP, and the
connect time (stdio: spawn + handshake; HTTP: handshake to a running server) and close time.

Clients ("variants"):
  mcpkit         mcpkit.Client(target)                 era auto: probes, picks modern here
  mcpkit-legacy  mcpkit.Client(target, era="legacy")   initialize handshake, 2025-11-25
  official       mcp stdio_client / streamable_http_client + ClientSession.initialize()
                                                       (legacy, 2025-11-25)
  official-auto  mcp.Client(target, mode="auto")       the SDK's high-level client: probes,
                                                       picks modern here

Each cell runs in a fresh worker process (this file with --worker), so neither client's
imports, caches or garbage affect the other; cells are interleaved and repeated, the median
run is reported. HTTP cells get a fresh server on a free 127.0.0.1 port. Every wait is
bounded and every process started is stopped (the worker's stdio server included).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import importlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
SERVER_STDIO = [PY, "-m", "mcpkit.testing.echo_server", "--transport", "stdio"]
SERVER_HTTP = [PY, "-m", "mcpkit.testing.echo_server", "--transport", "http",
               "--host", "127.0.0.1", "--port", "{port}"]
VARIANTS = ("mcpkit", "mcpkit-legacy", "official", "official-auto")
RATIOS = (  # (label, numerator, denominator)
    ("mcpkit/official", "mcpkit", "official"),
    ("mcpkit-legacy/official", "mcpkit-legacy", "official"),
    ("mcpkit/official-auto", "mcpkit", "official-auto"),
)
TEXT = "hello, world"
STEP_TIMEOUT = 15.0
MAX_ERRORS = 100


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def self_cpu() -> float:
    t = os.times()
    return t.user + t.system


def children_of(pid: int) -> list[int]:
    """Direct children of `pid` (from /proc; empty if it is gone)."""
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                out += [int(c) for c in (task / "children").read_text().split()]
    return out


def stop_process(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM, wait up to 5 s, then SIGKILL; also stops what `proc` started (both SDKs
    run a stdio server in its own session, so killing the worker alone would orphan it)."""
    kids = children_of(proc.pid)
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(5)
    for kid in kids:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not Path(f"/proc/{kid}").exists():
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(kid, sig)
            deadline = time.monotonic() + 3
            while Path(f"/proc/{kid}").exists() and time.monotonic() < deadline:
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(kid, os.WNOHANG)
                time.sleep(0.02)


# ================================================================ worker (one cell)

Call = Callable[[], Awaitable[bool]]


def _import_client(variant: str) -> None:
    names = (("mcpkit.client",) if variant.startswith("mcpkit") else
             ("mcp", "mcp.client.session", "mcp.client.stdio", "mcp.client.streamable_http"))
    for name in names:
        importlib.import_module(name)


def stdio_server_pid() -> int | None:
    """The echo server this worker's client spawned (None for HTTP cells)."""
    for pid in children_of(os.getpid()):
        with contextlib.suppress(OSError):
            if b"echo_server" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
    return None


def _connect_in(cwd: Path) -> dict[str, Any]:
    """`Client` keywords for a stdio child in `cwd`: the grouped form, or the flat one of a
    tree from before issue 22 (the benchmark compares trees: `PYTHONPATH=old/src`)."""
    try:
        from mcpkit.client import ConnectOptions
    except ImportError:
        return {"cwd": str(cwd)}
    return {"connect": ConnectOptions(cwd=str(cwd))}


@contextlib.asynccontextmanager
async def open_client(variant: str, transport: str, url: str | None) -> AsyncIterator[Call]:
    """Connect with `variant`; yield a function making one echo call (True: a good answer)."""
    target: Any = url if transport == "http" else SERVER_STDIO
    if variant.startswith("mcpkit"):
        from mcpkit.client import Client
        from mcpkit.client import era as eras

        # Era detection is cached per server for the life of the process: forget it, so every
        # auto connect pays for its probe the way a fresh process does.
        cache = getattr(eras, "_CACHE", None)
        if cache is not None:
            cache.clear()
        era: Literal["auto", "legacy"] = "legacy" if variant == "mcpkit-legacy" else "auto"
        async with Client(target, era=era, **_connect_in(ROOT)) as client:

            async def call() -> bool:
                result = await client.call_tool("echo", {"text": TEXT})
                return result.is_error is not True and result.content[0].text == TEXT  # type: ignore[union-attr]

            yield call
        return

    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=SERVER_STDIO[0], args=SERVER_STDIO[1:], cwd=ROOT)
    if variant == "official-auto":
        from mcp import Client as OfficialClient

        server: Any = url if transport == "http" else params
        async with OfficialClient(server, mode="auto") as oc:

            async def call() -> bool:
                result = await oc.call_tool("echo", {"text": TEXT})
                return not result.is_error and result.content[0].text == TEXT  # type: ignore[union-attr]

            yield call
        return

    from mcp.client.session import ClientSession

    if transport == "http":
        from mcp.client.streamable_http import streamable_http_client

        streams: Any = streamable_http_client(url)  # type: ignore[arg-type]
    else:
        from mcp.client.stdio import stdio_client

        streams = stdio_client(params)
    async with streams as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def call() -> bool:
            result = await session.call_tool("echo", {"text": TEXT})
            return not result.is_error and result.content[0].text == TEXT  # type: ignore[union-attr]

        yield call


async def measure_connects(spec: dict[str, Any]) -> dict[str, list[float]]:
    """`connects` times: connect, one call, close; ms of connect and of close."""
    import anyio

    out: dict[str, list[float]] = {"connect_ms": [], "close_ms": []}
    for _ in range(spec["connects"]):
        with anyio.fail_after(STEP_TIMEOUT * 2):
            t0 = time.perf_counter()
            async with open_client(spec["variant"], spec["transport"], spec.get("url")) as call:
                t1 = time.perf_counter()
                if not await call():
                    raise RuntimeError("the echo call returned a wrong answer")
                t2 = time.perf_counter()
            t3 = time.perf_counter()
        out["connect_ms"].append(round((t1 - t0) * 1000, 2))
        out["close_ms"].append(round((t3 - t2) * 1000, 2))
    return out


async def measure_calls(spec: dict[str, Any]) -> dict[str, Any]:
    import anyio

    in_flight, warmup, duration = spec["in_flight"], spec["warmup"], spec["duration"]
    state = {"counted": 0, "errors": 0, "done": 0}
    marks: dict[str, float] = {}
    async with open_client(spec["variant"], spec["transport"], spec.get("url")) as call:
        if not await call():
            raise RuntimeError("the echo call returned a wrong answer")
        server_pid = spec.get("server_pid") or stdio_server_pid()
        now = anyio.current_time
        t0 = now()
        measure_from, measure_to = t0 + warmup, t0 + warmup + duration

        async def worker() -> None:
            while now() < measure_to:
                ok = await call()
                state["done"] += 1
                if not ok:
                    state["errors"] += 1
                    if state["errors"] > MAX_ERRORS:
                        raise RuntimeError(f"more than {MAX_ERRORS} wrong answers")
                elif measure_from <= now() < measure_to:
                    state["counted"] += 1

        profiler = cProfile.Profile() if spec.get("profile") else None

        async def sample(at: float, key: str) -> None:
            await anyio.sleep(max(0.0, at - now()))
            if profiler is not None and key == "start":
                profiler.enable()
            elif profiler is not None:
                profiler.disable()
            marks[key] = now()
            marks[key + "_cpu"] = self_cpu()
            if server_pid:
                marks[key + "_srv"] = cpu_seconds(server_pid)

        with anyio.fail_after(warmup + duration + STEP_TIMEOUT):
            async with anyio.create_task_group() as tg:
                tg.start_soon(sample, measure_from, "start")
                tg.start_soon(sample, measure_to, "end")
                for _ in range(in_flight):
                    tg.start_soon(worker)
    if profiler is not None:
        profiler.dump_stats(spec["profile"])
    elapsed = marks["end"] - marks["start"]
    return {
        "calls": state["counted"], "seconds": round(elapsed, 4),
        "calls_per_s": state["counted"] / elapsed if elapsed > 0 else 0.0,
        "errors": state["errors"],
        "client_cpu_pct": 100 * (marks["end_cpu"] - marks["start_cpu"]) / elapsed,
        "client_cpu_us_per_call": (1e6 * (marks["end_cpu"] - marks["start_cpu"])
                                   / state["counted"] if state["counted"] else 0.0),
        "server_cpu_pct": (100 * (marks["end_srv"] - marks["start_srv"]) / elapsed
                           if "end_srv" in marks else 0.0),
    }


def worker_main(spec: dict[str, Any]) -> None:
    t0 = time.perf_counter()
    _import_client(spec["variant"])
    out: dict[str, Any] = {"import_ms": round((time.perf_counter() - t0) * 1000, 1)}

    async def run() -> None:
        if spec["connects"]:
            out.update(await measure_connects(spec))
        if spec["in_flight"]:
            out.update(await measure_calls(spec))

    if spec.get("uvloop"):
        import uvloop

        uvloop.run(run())
    else:
        import asyncio

        asyncio.run(run())
    print(json.dumps(out), flush=True)


# ================================================================ orchestrator


@dataclass
class Cell:
    client: str
    transport: str
    in_flight: int
    calls: int = 0
    seconds: float = 0.0
    errors: int = 0
    calls_per_s: float = 0.0
    client_cpu_pct: float = 0.0
    client_cpu_us_per_call: float = 0.0
    server_cpu_pct: float = 0.0
    failed: str = ""


@dataclass
class Connect:
    client: str
    transport: str
    import_ms: float = 0.0
    connect_ms_all: list[float] = field(default_factory=list)
    close_ms_all: list[float] = field(default_factory=list)
    first_connect_ms: float = 0.0
    connect_ms: float = 0.0
    close_ms: float = 0.0
    failed: str = ""


@dataclass
class Results:
    cells: list[Cell] = field(default_factory=list)
    connects: list[Connect] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)


def wait_listening(proc: subprocess.Popen[Any], port: int) -> None:
    deadline = time.monotonic() + STEP_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the echo server exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.02)
    raise TimeoutError(f"the echo server is not listening on port {port}")


@contextlib.contextmanager
def http_server(transport: str) -> Any:
    """A fresh echo server for an HTTP cell: yields (url, pid); (None, None) for stdio."""
    if transport != "http":
        yield None, None
        return
    port = free_port()
    argv = [a.replace("{port}", str(port)) for a in SERVER_HTTP]
    proc = subprocess.Popen(argv, cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(proc, port)
        yield f"http://127.0.0.1:{port}/mcp", proc.pid
    finally:
        stop_process(proc)


def run_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one cell in a fresh process; its JSON result (or {"failed": why})."""
    limit = (spec["warmup"] + spec["duration"] + STEP_TIMEOUT * (2 + 2 * spec["connects"]))
    proc = subprocess.Popen(
        [PY, str(Path(__file__).resolve()), "--worker", json.dumps(spec)], cwd=ROOT,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        stop_process(proc)
        return {"failed": f"timed out after {limit:.0f} s"}
    finally:
        stop_process(proc)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (err.strip().splitlines() or ["(no stderr)"])[-1]
        return {"failed": f"exit {proc.returncode}: {tail[:300]}"}
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def bench(args: argparse.Namespace) -> Results:
    res = Results(settings={
        "warmup_s": args.warmup, "duration_s": args.duration, "repeat": args.repeat,
        "connects": args.connects, "clients": args.clients, "transports": args.transports,
        "in_flight": args.in_flight, "cpus": os.cpu_count(), "python": sys.version.split()[0],
        "loop": "uvloop" if args.uvloop else "asyncio", "server": "mcpkit.testing.echo_server",
        "profiled": bool(args.profile), "loadavg_start": os.getloadavg()[0],
    })
    with contextlib.suppress(Exception):
        from importlib.metadata import version

        res.settings["mcp_version"] = version("mcp")

    def log(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    base = {"warmup": args.warmup, "duration": args.duration, "uvloop": args.uvloop}
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
    for transport in args.transports:
        for in_flight in args.in_flight:
            runs: dict[str, list[Cell]] = {c: [] for c in args.clients}
            for rep in range(args.repeat):  # interleaved, so machine noise hits every client
                for client in args.clients:
                    # The connect samples ride along in the first cell of each transport.
                    connects = args.connects if (rep == 0 and in_flight == args.in_flight[0]) else 0
                    profile = (str(Path(args.profile).resolve()
                                   / f"{client}-{transport}-x{in_flight}-{rep}.prof")
                               if args.profile else None)
                    with http_server(transport) as (url, pid):
                        out = run_worker({**base, "variant": client, "transport": transport,
                                          "in_flight": in_flight, "connects": connects,
                                          "url": url, "server_pid": pid, "profile": profile})
                    cell = Cell(client, transport, in_flight, failed=out.get("failed", ""))
                    for key in ("calls", "seconds", "errors", "calls_per_s", "client_cpu_pct",
                                "client_cpu_us_per_call", "server_cpu_pct"):
                        if key in out:
                            setattr(cell, key, out[key])
                    runs[client].append(cell)
                    if connects:
                        res.connects.append(connect_of(client, transport, out))
                    log(f"  {transport:5} x{in_flight:<3} {client:14} "
                        + (f"FAILED: {cell.failed}" if cell.failed else
                           f"{cell.calls_per_s:9.0f} calls/s  (client cpu "
                           f"{cell.client_cpu_pct:.0f}%, server cpu {cell.server_cpu_pct:.0f}%,"
                           f" errors {cell.errors})")
                        + (f"  connect {res.connects[-1].connect_ms:.1f} ms" if connects
                           and not res.connects[-1].failed else ""))
            for client_runs in runs.values():  # the median run of each client
                ok = [c for c in client_runs if not c.failed] or client_runs
                res.cells.append(sorted(ok, key=lambda c: c.calls_per_s)[len(ok) // 2])
    res.settings["loadavg_end"] = os.getloadavg()[0]
    return res


def connect_of(client: str, transport: str, out: dict[str, Any]) -> Connect:
    conn = Connect(client, transport, failed=out.get("failed", ""),
                   import_ms=out.get("import_ms", 0.0),
                   connect_ms_all=out.get("connect_ms", []), close_ms_all=out.get("close_ms", []))
    if conn.connect_ms_all:
        conn.first_connect_ms = conn.connect_ms_all[0]
        # The first connect also pays for lazy imports (transports, HTTP stack): the median
        # is over the later ones when there are any.
        later = conn.connect_ms_all[1:] or conn.connect_ms_all
        conn.connect_ms = round(statistics.median(later), 2)
        conn.close_ms = round(statistics.median(conn.close_ms_all), 2)
    return conn


def table(res: Results) -> str:
    clients = [c for c in VARIANTS if c in res.settings["clients"]]
    ratios = [r for r in RATIOS if r[1] in clients and r[2] in clients]
    by = {(c.client, c.transport, c.in_flight): c for c in res.cells}
    rows = ["| transport | in flight | " + " | ".join(f"{c} calls/s" for c in clients)
            + "".join(f" | {label}" for label, _, _ in ratios) + " |",
            "|---|---:|" + "---:|" * (len(clients) + len(ratios))]
    cpu_ratios = [r for r in ratios if r[1] == "mcpkit"]
    cpu_rows = ["| transport | in flight | "
                + " | ".join(f"{c} client CPU/call, client/server CPU" for c in clients)
                + "".join(f" | CPU/call {b}/{a}" for _, a, b in cpu_ratios) + " |",
                "|---|---:|" + "---:|" * (len(clients) + len(cpu_ratios))]
    keys = sorted({(c.transport, c.in_flight) for c in res.cells},
                  key=lambda k: (res.settings["transports"].index(k[0]), k[1]))
    for transport, in_flight in keys:
        cells = {c: by.get((c, transport, in_flight)) for c in clients}
        cps = {c: (x.calls_per_s if x and not x.failed else 0.0) for c, x in cells.items()}
        us = {c: (x.client_cpu_us_per_call if x and not x.failed else 0.0)
              for c, x in cells.items()}
        rows.append(
            f"| {transport} | {in_flight} | "
            + " | ".join(f"{cps[c]:,.0f}" if cps[c] else "failed" for c in clients)
            + "".join(f" | {cps[a] / cps[b]:.2f}x" if cps[a] and cps[b] else " | -"
                      for _, a, b in ratios) + " |")
        cpu_rows.append(
            f"| {transport} | {in_flight} | "
            + " | ".join(f"{x.client_cpu_us_per_call:.0f} µs, {x.client_cpu_pct:.0f}% / "
                         f"{x.server_cpu_pct:.0f}%"
                         if x and not x.failed else "-" for x in cells.values())
            + "".join(f" | {us[b] / us[a]:.2f}x" if us[a] and us[b] else " | -"
                      for _, a, b in cpu_ratios) + " |")
    out = [*rows, "", *cpu_rows]
    if res.connects:
        out += ["", "| client | transport | import | first connect | connect (median) "
                "| close (median) |", "|---|---|---:|---:|---:|---:|"]
        for conn in res.connects:
            if conn.failed:
                out.append(f"| {conn.client} | {conn.transport} | failed: {conn.failed} |")
                continue
            out.append(f"| {conn.client} | {conn.transport} | {conn.import_ms:.0f} ms | "
                       f"{conn.first_connect_ms:.1f} ms | {conn.connect_ms:.1f} ms | "
                       f"{conn.close_ms:.1f} ms |")
    settings = res.settings
    if "loadavg_end" in settings:
        out += ["", f"({settings['loop']}, Python {settings['python']}, {settings['cpus']} CPUs, "
                f"mcp {settings.get('mcp_version', '?')}; load average "
                f"{settings['loadavg_start']:.2f} -> {settings['loadavg_end']:.2f})"]
    failed = [c for c in res.cells if c.failed]
    if failed:
        out += ["", *(f"FAILED {c.client} {c.transport} x{c.in_flight}: {c.failed}"
                      for c in failed)]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="short run (1 s cells, 0.3 s warm-up, 1 run, 5 connects)")
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.add_argument("--duration", type=float, default=None, help="seconds per cell")
    parser.add_argument("--warmup", type=float, default=None, help="seconds before counting")
    parser.add_argument("--transports", nargs="+", default=["stdio", "http"],
                        choices=["stdio", "http"])
    parser.add_argument("--in-flight", nargs="+", type=int, default=[1, 32])
    parser.add_argument("--clients", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--repeat", type=int, default=None,
                        help="runs per cell, interleaved; the median is reported "
                             "(default 3, 1 with --quick)")
    parser.add_argument("--connects", type=int, default=None,
                        help="connect/close samples per client and transport "
                             "(default 10, 5 with --quick; 0: none)")
    parser.add_argument("--uvloop", action="store_true",
                        help="run the clients on uvloop (default: plain asyncio)")
    parser.add_argument("--profile", metavar="DIR",
                        help="write a cProfile of each cell's measured window to DIR "
                             "(slows the clients down: the figures are then not comparable)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main(json.loads(args.worker))
        return
    args.duration = args.duration or (1.0 if args.quick else 3.0)
    args.warmup = args.warmup if args.warmup is not None else (0.3 if args.quick else 0.5)
    args.repeat = args.repeat or (1 if args.quick else 3)
    if args.connects is None:
        args.connects = 5 if args.quick else 10
    args.clients = [c for c in VARIANTS if c in args.clients]
    res = bench(args)
    if args.json:
        print(json.dumps(asdict(res), indent=2))
    else:
        print(table(res))


if __name__ == "__main__":
    main()
