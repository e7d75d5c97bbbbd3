"""Echo benchmark: mcpkit's echo server against the official Python and TypeScript SDKs'.

    .venv/bin/python bench/echo_bench.py            # full: 3 s per cell after 0.5 s warm-up, x3
    .venv/bin/python bench/echo_bench.py --quick    # short run
    .venv/bin/python bench/echo_bench.py --json     # machine-readable results on stdout

Measures `tools/call echo` calls/s at 1 and 32 requests in flight over stdio and Streamable
HTTP, server start time (spawn -> initialize answered, median of 10) and RSS after 1000 calls.
The load driver is raw: pre-encoded JSON lines over pipes (stdio) and aiohttp with a
connection pool (HTTP); it runs on uvloop when available. Every wait is bounded.
The TypeScript SDK peer (bench/peers/ts_echo_server.mjs) needs `node` on PATH and
tests/js/node_modules (`bash scripts/install_js_peers.sh`); without them it is skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
SERVERS: dict[str, dict[str, list[str]]] = {
    "mcpkit": {
        "stdio": [PY, "-m", "mcpkit.testing.echo_server", "--transport", "stdio"],
        "http": [PY, "-m", "mcpkit.testing.echo_server", "--transport", "http", "--port", "{port}"],
    },
    "official": {
        "stdio": [PY, str(ROOT / "bench/peers/official_echo_server.py"), "--transport", "stdio"],
        "http": [PY, str(ROOT / "bench/peers/official_echo_server.py"),
                 "--transport", "http", "--port", "{port}"],
    },
}
PEERS = ("baseline", "official", "ts")  # compared against mcpkit, in this order
# Extra environment per server (the baseline runs another checkout's mcpkit).
SERVER_ENV: dict[str, dict[str, str]] = {}
JS_MODULES = ROOT / "tests/js/node_modules"
TS_SERVER = ROOT / "bench/peers/ts_echo_server.mjs"


def add_ts_peer() -> str | None:
    """Register the TypeScript SDK peer; return why it is skipped, or None."""
    node = shutil.which("node")
    if node is None:
        return "node not found on PATH"
    for need in ("@modelcontextprotocol/sdk/package.json", "zod/package.json"):
        if not (JS_MODULES / need).is_file():
            return (f"{JS_MODULES.relative_to(ROOT) / need} missing "
                    "(run: bash scripts/install_js_peers.sh)")
    SERVERS["ts"] = {
        "stdio": [node, str(TS_SERVER), "--transport", "stdio"],
        "http": [node, str(TS_SERVER), "--transport", "http", "--port", "{port}"],
    }
    return None
PROTOCOL_VERSION = "2025-06-18"
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
    "clientInfo": {"name": "echo-bench", "version": "1.0"}}}
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
# A tools/call line with its id spliced in: PREFIX + id + SUFFIX.
CALL_PREFIX = b'{"jsonrpc":"2.0","id":'
CALL_SUFFIX = (b',"method":"tools/call",'
               b'"params":{"name":"echo","arguments":{"text":"hello, world"}}}')
STEP_TIMEOUT = 15.0


def add_baseline_peer(checkout: str) -> None:
    """Register mcpkit from another checkout (e.g. main before a change) as the "baseline" peer.

    Its echo server runs with the checkout's src/ first on PYTHONPATH, so both versions are
    measured in one run, interleaved, under the same machine noise.
    """
    src = Path(checkout).resolve() / "src"
    if not (src / "mcpkit" / "__init__.py").is_file():
        raise SystemExit(f"echo_bench: --baseline {checkout}: no src/mcpkit there")
    SERVERS["baseline"] = SERVERS["mcpkit"]
    SERVER_ENV["baseline"] = {**os.environ, "PYTHONPATH": str(src)}
    # mcpkit itself must not pick up an inherited PYTHONPATH pointing at the baseline.
    SERVER_ENV["mcpkit"] = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def self_cpu() -> float:
    t = os.times()
    return t.user + t.system


@dataclass
class Cell:
    server: str
    transport: str
    in_flight: int
    calls: int = 0
    seconds: float = 0.0
    errors: int = 0
    calls_per_s: float = 0.0
    server_cpu_pct: float = 0.0
    driver_cpu_pct: float = 0.0


@dataclass
class Results:
    cells: list[Cell] = field(default_factory=list)
    start_ms: dict[str, float] = field(default_factory=dict)
    start_ms_all: dict[str, list[float]] = field(default_factory=dict)
    rss_mib: dict[str, dict[str, float]] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- processes


async def spawn(server: str, transport: str, port: int = 0) -> asyncio.subprocess.Process:
    argv = [a.replace("{port}", str(port)) for a in SERVERS[server][transport]]
    pipe = asyncio.subprocess.PIPE
    return await asyncio.create_subprocess_exec(
        *argv, cwd=ROOT, stdin=pipe if transport == "stdio" else subprocess.DEVNULL,
        stdout=pipe if transport == "stdio" else subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, limit=1 << 24, env=SERVER_ENV.get(server),
    )


async def stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            await asyncio.wait_for(proc.wait(), 5)


# ---------------------------------------------------------------- stdio driver


async def stdio_handshake(proc: asyncio.subprocess.Process) -> None:
    assert proc.stdin and proc.stdout
    proc.stdin.write(json.dumps(INIT, separators=(",", ":")).encode() + b"\n")
    await proc.stdin.drain()
    while True:
        line = await asyncio.wait_for(proc.stdout.readline(), STEP_TIMEOUT)
        if not line:
            raise RuntimeError("server closed stdout during initialize")
        msg = json.loads(line)
        if msg.get("id") == 0:
            if "result" not in msg:
                raise RuntimeError(f"initialize failed: {msg}")
            break
    proc.stdin.write(INITIALIZED + b"\n")
    await proc.stdin.drain()


async def stdio_load(proc: asyncio.subprocess.Process, in_flight: int, warmup: float,
                     duration: float, cell: Cell | None = None, total: int = 0) -> int:
    """Keep `in_flight` calls outstanding; each reply triggers the next request.

    With `total`, send exactly that many calls (no timing) and return the count answered.
    """
    assert proc.stdin and proc.stdout
    stdin, stdout = proc.stdin, proc.stdout
    next_id = 1
    sent = answered = errors = 0
    counted = 0
    budget = total if total else 1 << 62

    def send() -> None:
        nonlocal next_id, sent
        stdin.write(CALL_PREFIX + str(next_id).encode() + CALL_SUFFIX + b"\n")
        next_id += 1
        sent += 1

    for _ in range(min(in_flight, budget)):
        send()
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    measure_from = t0 + warmup
    measure_to = measure_from + duration
    sending = True
    cpu0 = srv0 = 0.0
    measuring = False
    while answered < sent:
        line = await asyncio.wait_for(stdout.readline(), STEP_TIMEOUT)
        if not line:
            raise RuntimeError("server closed stdout")
        if b'"id"' not in line:  # a notification
            continue
        answered += 1
        if b'"error"' in line[:40] or b'"isError":true' in line:
            errors += 1
        now = loop.time()
        if total:
            if sent < budget:
                send()
            await stdin.drain()
            continue
        if not measuring and now >= measure_from:
            measuring, counted = True, 0
            t_start, cpu0, srv0 = now, self_cpu(), cpu_seconds(proc.pid)
        elif measuring and sending:
            counted += 1
        if sending and now >= measure_to:
            sending = False
            elapsed = now - t_start
            if cell is not None:
                cell.calls, cell.seconds = counted, elapsed
                cell.calls_per_s = counted / elapsed
                cell.driver_cpu_pct = 100 * (self_cpu() - cpu0) / elapsed
                cell.server_cpu_pct = 100 * (cpu_seconds(proc.pid) - srv0) / elapsed
        if sending:
            send()
            if stdin.transport.get_write_buffer_size() > 1 << 16:
                await stdin.drain()
    if cell is not None:
        cell.errors = errors
    return answered


# ---------------------------------------------------------------- HTTP driver


def parse_reply(content_type: str, body: bytes) -> dict[str, Any]:
    if content_type.startswith("text/event-stream"):
        for line in body.splitlines():
            if line.startswith(b"data:"):
                msg = json.loads(line[5:])
                if "id" in msg:
                    return msg  # type: ignore[no-any-return]
        raise RuntimeError(f"no reply in SSE body: {body[:200]!r}")
    return json.loads(body)  # type: ignore[no-any-return]


class HttpClient:
    def __init__(self, url: str, pool: int) -> None:
        self.url = url
        self.http = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=pool, force_close=False),
            timeout=aiohttp.ClientTimeout(total=STEP_TIMEOUT),
            skip_auto_headers=("User-Agent",),
        )
        self.headers = {"Content-Type": "application/json",
                        "Accept": "application/json, text/event-stream"}

    async def post(self, body: bytes) -> tuple[int, str, bytes]:
        async with self.http.post(self.url, data=body, headers=self.headers) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), await resp.read()

    async def initialize(self) -> None:
        body = json.dumps(INIT, separators=(",", ":")).encode()
        async with self.http.post(self.url, data=body, headers=self.headers) as resp:
            data = await resp.read()
            if resp.status != 200:
                raise RuntimeError(f"initialize: HTTP {resp.status} {data[:200]!r}")
            msg = parse_reply(resp.headers.get("Content-Type", ""), data)
            if "result" not in msg:
                raise RuntimeError(f"initialize failed: {msg}")
            sid = resp.headers.get("Mcp-Session-Id")
        if sid:
            self.headers["Mcp-Session-Id"] = sid
        self.headers["MCP-Protocol-Version"] = PROTOCOL_VERSION
        status, _, data = await self.post(INITIALIZED)
        if status not in (200, 202):
            raise RuntimeError(f"initialized: HTTP {status} {data[:200]!r}")

    async def call(self, call_id: int) -> bool:
        status, ctype, data = await self.post(CALL_PREFIX + str(call_id).encode() + CALL_SUFFIX)
        if status != 200:
            return False
        msg = parse_reply(ctype, data)
        return "result" in msg and not msg["result"].get("isError")

    async def close(self) -> None:
        await self.http.close()


async def wait_listening(proc: asyncio.subprocess.Process, port: int) -> None:
    deadline = time.monotonic() + STEP_TIMEOUT
    while time.monotonic() < deadline:
        if proc.returncode is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.02)
    raise TimeoutError(f"server not listening on {port}")


async def http_load(client: HttpClient, pid: int, in_flight: int, warmup: float,
                    duration: float, cell: Cell | None = None, total: int = 0) -> int:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    measure_from, measure_to = t0 + warmup, t0 + warmup + duration
    counter = iter(range(1, 1 << 62))
    state = {"counted": 0, "errors": 0, "done": 0}

    async def worker() -> None:
        while True:
            if total:
                if state["done"] >= total:
                    return
                state["done"] += 1
            now = loop.time()
            if not total and now >= measure_to:
                return
            ok = await client.call(next(counter))
            if not ok:
                state["errors"] += 1
            if not total and measure_from <= loop.time() < measure_to:
                state["counted"] += 1

    async def sampler() -> tuple[float, float]:
        await asyncio.sleep(max(0.0, measure_from - loop.time()))
        return self_cpu(), cpu_seconds(pid)

    samp = asyncio.ensure_future(sampler()) if not total else None
    await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(in_flight))),
                           warmup + duration + STEP_TIMEOUT)
    if cell is not None and samp is not None:
        cpu0, srv0 = await samp
        elapsed = duration
        cell.calls, cell.seconds = state["counted"], elapsed
        cell.calls_per_s = state["counted"] / elapsed
        cell.errors = state["errors"]
        cell.driver_cpu_pct = 100 * (self_cpu() - cpu0) / (loop.time() - measure_from)
        cell.server_cpu_pct = 100 * (cpu_seconds(pid) - srv0) / (loop.time() - measure_from)
    return state["done"] if total else state["counted"]


# ---------------------------------------------------------------- cells


async def run_cell(server: str, transport: str, in_flight: int, warmup: float,
                   duration: float) -> Cell:
    cell = Cell(server, transport, in_flight)
    if transport == "stdio":
        proc = await spawn(server, "stdio")
        try:
            await stdio_handshake(proc)
            await asyncio.wait_for(stdio_load(proc, in_flight, warmup, duration, cell),
                                   warmup + duration + STEP_TIMEOUT)
        finally:
            await stop(proc)
        return cell
    port = free_port()
    proc = await spawn(server, "http", port)
    client = HttpClient(f"http://127.0.0.1:{port}/mcp", pool=in_flight)
    try:
        await wait_listening(proc, port)
        await client.initialize()
        await http_load(client, proc.pid, in_flight, warmup, duration, cell)
    finally:
        await client.close()
        await stop(proc)
    return cell


async def start_time_ms(server: str) -> float:
    """Spawn over stdio and send initialize at once; ms until its answer arrives."""
    t0 = time.perf_counter()
    proc = await spawn(server, "stdio")
    try:
        await stdio_handshake(proc)
        return (time.perf_counter() - t0) * 1000
    finally:
        await stop(proc)


async def rss_after_calls(server: str, transport: str, calls: int = 1000) -> float:
    if transport == "stdio":
        proc = await spawn(server, "stdio")
        try:
            await stdio_handshake(proc)
            n = await asyncio.wait_for(stdio_load(proc, 1, 0, 0, total=calls), STEP_TIMEOUT * 2)
            assert n == calls, n
            return rss_kib(proc.pid) / 1024
        finally:
            await stop(proc)
    port = free_port()
    proc = await spawn(server, "http", port)
    client = HttpClient(f"http://127.0.0.1:{port}/mcp", pool=1)
    try:
        await wait_listening(proc, port)
        await client.initialize()
        await http_load(client, proc.pid, 1, 0, 0, total=calls)
        return rss_kib(proc.pid) / 1024
    finally:
        await client.close()
        await stop(proc)


async def bench(args: argparse.Namespace) -> Results:
    res = Results(settings={"warmup_s": args.warmup, "duration_s": args.duration,
                            "repeat": args.repeat,
                            "start_runs": args.start_runs, "cpus": os.cpu_count(),
                            "python": sys.version.split()[0],
                            "loop": type(asyncio.get_running_loop()).__module__})
    log = (lambda *a: print(*a, file=sys.stderr, flush=True)) if not args.quiet else (
        lambda *a: None)
    servers = [s for s in ("mcpkit", *PEERS) if s in SERVERS]
    res.settings["servers"] = servers
    if args.ts_skipped:
        res.settings["ts_skipped"] = args.ts_skipped
        print(f"echo_bench: skipping the TypeScript SDK peer: {args.ts_skipped}",
              file=sys.stderr, flush=True)
    for transport in args.transports:
        for in_flight in args.in_flight:
            runs: dict[str, list[Cell]] = {server: [] for server in servers}
            for _ in range(args.repeat):  # interleaved, so machine noise hits all servers
                for server in servers:
                    cell = await run_cell(server, transport, in_flight, args.warmup,
                                          args.duration)
                    log(f"  {transport:5} x{in_flight:<3} {server:8} "
                        f"{cell.calls_per_s:10.0f} calls/s  (server cpu "
                        f"{cell.server_cpu_pct:.0f}%, driver cpu {cell.driver_cpu_pct:.0f}%,"
                        f" errors {cell.errors})")
                    runs[server].append(cell)
            for server_runs in runs.values():  # the median run of each server
                res.cells.append(sorted(server_runs, key=lambda c: c.calls_per_s)[
                    len(server_runs) // 2])
    for server in servers:
        runs = [await start_time_ms(server) for _ in range(args.start_runs)]
        res.start_ms_all[server] = [round(r, 1) for r in runs]
        res.start_ms[server] = round(statistics.median(runs), 1)
        log(f"  start {server}: median {res.start_ms[server]} ms")
        res.rss_mib[server] = {t: round(await rss_after_calls(server, t), 1)
                               for t in args.transports}
        log(f"  rss {server}: {res.rss_mib[server]} MiB")
    return res


def table(res: Results) -> str:
    peers = [p for p in PEERS if p in res.settings.get("servers", ())]
    servers = ["mcpkit", *peers]
    rows = ["| transport | in flight | "
            + " | ".join(f"{s} calls/s" for s in servers) + " | "
            + " | ".join(f"mcpkit/{p}" for p in peers) + " | "
            + " | ".join(f"{s} srv/driver CPU" for s in servers) + " |",
            "|---|---:|" + "---:|" * (2 * len(servers) + len(peers))]
    by = {(c.server, c.transport, c.in_flight): c for c in res.cells}
    for c in res.cells:
        if c.server != "mcpkit":
            continue
        cells = [by.get((s, c.transport, c.in_flight)) for s in servers]
        cps = [x.calls_per_s if x else 0.0 for x in cells]
        ratios = [f"{c.calls_per_s / r:.1f}x" if r else "-" for r in cps[1:]]
        cpu = [f"{x.server_cpu_pct:.0f}% / {x.driver_cpu_pct:.0f}%" if x else "-"
               for x in cells]
        rows.append(f"| {c.transport} | {c.in_flight} | "
                    + " | ".join(f"{v:,.0f}" for v in cps) + " | "
                    + " | ".join(ratios) + " | " + " | ".join(cpu) + " |")
    rows.append("")
    rows.append("| server | start (spawn -> initialize answered, median) | "
                + " | ".join(f"RSS after 1000 calls ({t})" for t in
                             next(iter(res.rss_mib.values()), {})) + " |")
    rows.append("|---|---:|" + "---:|" * len(next(iter(res.rss_mib.values()), {})))
    for server, ms in res.start_ms.items():
        rss = " | ".join(f"{v:.1f} MiB" for v in res.rss_mib.get(server, {}).values())
        rows.append(f"| {server} | {ms:.0f} ms | {rss} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short run (1 s cells, 5 starts)")
    parser.add_argument("--json", action="store_true", help="print results as JSON")
    parser.add_argument("--duration", type=float, default=None)
    parser.add_argument("--warmup", type=float, default=None)
    parser.add_argument("--transports", nargs="+", default=["stdio", "http"],
                        choices=["stdio", "http"])
    parser.add_argument("--in-flight", nargs="+", type=int, default=[1, 32])
    parser.add_argument("--repeat", type=int, default=None,
                        help="runs per cell, interleaved; the median is reported "
                             "(default 3, 1 with --quick)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--baseline", metavar="CHECKOUT",
                        help="also run the echo server of another mcpkit checkout (e.g. a "
                             "worktree of main before a change) and print mcpkit/baseline")
    parser.add_argument("--peers", nargs="+", choices=PEERS, default=None,
                        help="only these peers (default: every available one)")
    args = parser.parse_args()
    args.duration = args.duration or (1.0 if args.quick else 3.0)
    args.warmup = args.warmup if args.warmup is not None else (0.3 if args.quick else 0.5)
    args.start_runs = 5 if args.quick else 10
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.ts_skipped = add_ts_peer() if "ts" in (args.peers or PEERS) else None
    if args.baseline:
        add_baseline_peer(args.baseline)
    for peer in set(PEERS) - set(args.peers or PEERS):
        SERVERS.pop(peer, None)
    try:
        import uvloop
        runner: Any = uvloop.run
    except ImportError:
        runner = asyncio.run
    res = runner(bench(args))
    if args.ts_skipped and not args.json:
        print(f"(TypeScript SDK peer skipped: {args.ts_skipped})")
    if args.json:
        out = asdict(res)
        print(json.dumps(out, indent=2))
    else:
        print(table(res))


if __name__ == "__main__":
    main()
