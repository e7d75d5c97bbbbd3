"""Start-up of many stdio servers at once: `ServerManager` against the slowest single server,
and against the official Python SDK's `ClientSessionGroup` on the same servers.

    .venv/bin/python bench/manager_start_bench.py            # 10 servers, 5 runs, median
    .venv/bin/python bench/manager_start_bench.py --quick    # 3 runs
    .venv/bin/python bench/manager_start_bench.py --json

Servers: `python -m mcpkit.testing.echo_server`, started by `sh -c 'sleep D && exec …'` with D
spread evenly from 0.1 s to 1.0 s (servers that wait for something before they start, like
`npx` fetching a package before node loads the server), and a second set with no delay
(pure interpreter start and imports: on a 2-core machine ten interpreters compete for the
CPU, so this set shows the machine's limit rather than the manager's).

"started" means connected and tools listed, for every server. Measured:
  single slowest   one `mcpkit.Client` to the slowest server alone (connect + list_tools)
  manager          `ServerManager` with all servers: `start()` until every one is ready
  official group   `mcp.client.session_group.ClientSessionGroup.connect_to_server` for each
                   server, one after the other (its API connects one server per call; it
                   has no parallel start), tools come with each connect
Each measurement runs in a fresh worker process (this file with --worker) so imports and
caches do not carry over; runs are interleaved and the median is reported. Every server
process is stopped when its measurement ends.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

PY = sys.executable
TARGET = 1.3


def server_command(delay: float) -> list[str]:
    """The echo server, started after `delay` s by a shell that waits first (as `npx`
    waits for a download before node loads the server)."""
    server = [PY, "-m", "mcpkit.testing.echo_server", "--transport", "stdio"]
    if delay <= 0:
        return server
    return ["sh", "-c", 'sleep "$0" && exec "$@"', f"{delay:.2f}", *server]


def delays(count: int, spread: bool) -> list[float]:
    if not spread:
        return [0.0] * count
    return [round(0.1 + 0.9 * i / max(1, count - 1), 2) for i in range(count)]


# --- workers (one measurement each, in a fresh process) ------------------------------------


async def measure_single(delay: float) -> float:
    from mcpkit import Client

    started = time.perf_counter()
    async with Client(server_command(delay)) as client:
        tools = await client.list_tools()
        elapsed = time.perf_counter() - started
    assert [t.name for t in tools] == ["echo"]
    return elapsed


async def measure_manager(server_delays: list[float]) -> float:
    from mcpkit.manager.config import from_entry
    from mcpkit.manager.manager import ServerManager

    commands = [server_command(d) for d in server_delays]
    configs = [from_entry(f"s{i}", {"command": c[0], "args": c[1:]})
               for i, c in enumerate(commands)]
    started = time.perf_counter()
    manager = ServerManager(configs)
    await manager.start()
    elapsed = time.perf_counter() - started
    try:
        failed = [s.name for s in manager.servers.values() if s.status != "ready"]
        assert not failed, f"servers failed: {failed}"
        assert len(manager.tools()) == len(server_delays)
    finally:
        await manager.close()
    return elapsed


async def measure_official(server_delays: list[float]) -> float:
    from mcp.client.session_group import ClientSessionGroup
    from mcp.client.stdio import StdioServerParameters

    started = time.perf_counter()
    async with ClientSessionGroup(
        component_name_hook=lambda name, info: f"{info.name}_{id(info)}_{name}",
    ) as group:
        for delay in server_delays:
            command = server_command(delay)
            await group.connect_to_server(StdioServerParameters(command=command[0],
                                                                args=command[1:]))
        elapsed = time.perf_counter() - started
        assert len(group.tools) == len(server_delays)
    return elapsed


def worker(kind: str, server_delays: list[float]) -> None:
    import anyio

    if kind == "single":
        elapsed = anyio.run(measure_single, max(server_delays))
    elif kind == "manager":
        elapsed = anyio.run(measure_manager, server_delays)
    else:
        elapsed = anyio.run(measure_official, server_delays)
    print(json.dumps({"seconds": elapsed}))


def run_worker(kind: str, server_delays: list[float], timeout: float = 120.0) -> float:
    out = subprocess.run(
        [PY, __file__, "--worker", kind, "--delays", ",".join(map(str, server_delays))],
        capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"{kind} worker failed:\n{out.stderr[-2000:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])


# --- the run -------------------------------------------------------------------------------


def measure_set(label: str, server_delays: list[float], runs: int) -> dict[str, Any]:
    samples: dict[str, list[float]] = {"single": [], "manager": [], "official": []}
    for run in range(runs):
        for kind in samples:
            samples[kind].append(run_worker(kind, server_delays))
        print(f"  {label} run {run + 1}/{runs}: " + ", ".join(
            f"{k} {v[-1]:.3f} s" for k, v in samples.items()), file=sys.stderr)
    median = {k: statistics.median(v) for k, v in samples.items()}
    return {
        "set": label, "servers": len(server_delays), "delays": server_delays,
        "single_s": median["single"], "manager_s": median["manager"],
        "official_s": median["official"],
        "manager_over_single": median["manager"] / median["single"],
        "official_over_manager": median["official"] / median["manager"],
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"{'servers':<26} {'single slowest':>14} {'manager':>9} {'official':>9} "
          f"{'manager/single':>15} {'official/manager':>17}")
    for row in rows:
        print(f"{row['set']:<26} {row['single_s']:>12.3f} s {row['manager_s']:>7.3f} s "
              f"{row['official_s']:>7.3f} s {row['manager_over_single']:>14.2f}x "
              f"{row['official_over_manager']:>16.2f}x")
    print(f"target: manager/single <= {TARGET}x for servers that wait at start-up; "
          "official = ClientSessionGroup, one connect after the other")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="3 runs")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker", choices=("single", "manager", "official"))
    parser.add_argument("--delays", default="")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, [float(d) for d in args.delays.split(",")])
        return
    runs = 3 if args.quick else args.runs
    rows = [
        measure_set(f"{args.servers} waiting 0.1-1.0 s", delays(args.servers, True), runs),
        measure_set(f"{args.servers} without delay", delays(args.servers, False), runs),
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print_table(rows)


if __name__ == "__main__":
    main()
