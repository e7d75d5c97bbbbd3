"""The hub's added latency per call with an OAuth access token (the hub's own JWT) against an
API token, in one run, side by side with a direct call to the upstream.

    .venv/bin/python bench/hub_auth_bench.py                 # 2000 calls per target (~15 s)
    .venv/bin/python bench/hub_auth_bench.py --calls 100 --json

Starts, on 127.0.0.1, `python -m mcpkit.testing.echo_server --transport http` and the hub in
its own process (bench/hub_bench.py's `--serve-hub`: a fresh SQLite file, uvicorn on uvloop,
rate limits raised out of the way, access tokens living an hour so none expires mid-run). A
user is made through the REST API with an API token and the echo server as its upstream
`echo`; a password is set for them and mcpkit's OAuth client logs in to the hub (DCR, PKCE,
the hub's sign-in and consent pages walked over HTTP: tests/hub/oauth_login.py). Targets:

  direct      the echo server itself, no token (the baseline)
  api-token   the hub's /mcp, `Authorization: Bearer <API token>`      (tool echo__echo)
  oauth       the hub's /mcp, `Authorization: Bearer <hub access token>`
  oauth-dpop  the hub's /mcp with a DPoP-bound hub access token and a fresh proof per request
              (mcpkit's OAuth client with dpop=True) - only when the hub's metadata offers
              DPoP (`dpop_signing_alg_values_supported`); skipped, and said so, otherwise

One `mcpkit.Client` connection per target, all open at once (the token sent as a plain
bearer for api-token and oauth, so the client does the same work for both); `--warmup` calls
each, then `--calls` calls per target one at a time, each timed, in blocks of `--block`
calls that take turns (the order rotating every block), so a busy moment of the machine falls
on every target alike. Per target: median and p95 latency, what it adds to direct (median
and p95), and the CPU per call of the hub process and of the echo server (all their threads'
time on a CPU, from /proc/PID/task/*/schedstat - /proc/PID/stat's user + system where that
is missing - summed over the target's blocks). Then the OAuth-minus-API-token difference.
Every process is stopped by PID at the end, even on failure."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.hub: the hub's sign-in pages walked over HTTP

from hub_bench import (  # noqa: E402 (bench/ is this script's directory)
    ECHO_HTTP,
    PY,
    RATE_BURST,
    RATE_LIMIT,
    cpu_seconds,
    free_port,
    percentile,
    rest,
    seed_admin,
    start,
    wait_listening,
    wait_ready,
)
from tests.hub.oauth_login import HubLogin  # noqa: E402

from mcpkit import Client  # noqa: E402
from mcpkit.client import Timeouts  # noqa: E402
from mcpkit.client.oauth import OAuth  # noqa: E402

TEXT = "hello, world"
TARGETS = ("direct", "api-token", "oauth", "oauth-dpop")
CALL_TIMEOUT_S = 10.0
ACCESS_TOKEN_TTL_S = 3600
PASSWORD = "bench password, not a secret"


@dataclass
class Target:
    url: str
    tool: str
    bearer: str | None = None
    auth: OAuth | None = None


@dataclass
class Samples:
    latencies: list[float] = field(default_factory=list)
    hub_cpu_s: float = 0.0
    echo_cpu_s: float = 0.0


@dataclass
class Hub:
    base: str
    admin_token: str
    pid: int
    database_url: str
    secret_key: str


@dataclass
class Setup:
    targets: dict[str, Target]
    hub_pid: int
    echo_pid: int
    notes: list[str]


def cpu_time(pid: int) -> float:
    """CPU seconds `pid` has run, all its threads: from /proc/PID/task/*/schedstat (ns), as
    a block of ten calls costs less than the 10 ms tick /proc/PID/stat counts in; that
    (hub_bench's cpu_seconds) where schedstat is missing."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        return sum(int((task / "schedstat").read_text().split()[0]) for task in tasks) / 1e9
    except (OSError, ValueError, IndexError):
        return cpu_seconds(pid)


def start_echo(stop: ExitStack, tmp: Path) -> tuple[str, int]:
    port = free_port()
    logfile = tmp / "echo.log"
    proc = start(stop, [*ECHO_HTTP, str(port)], "the echo server", logfile)
    wait_listening(proc, port, "the echo server", logfile)
    return f"http://127.0.0.1:{port}/mcp", proc.pid


def start_hub(stop: ExitStack, tmp: Path) -> Hub:
    """The hub in a process of its own, its admin seeded."""
    from mcpkit.hub.crypto import generate_key

    key = generate_key()
    database_url = f"sqlite+aiosqlite:///{tmp / 'hub.db'}"
    admin = seed_admin(database_url, key)
    port = free_port()
    env = {**os.environ, "MCPKIT_HUB_SECRET_KEY": key, "MCPKIT_HUB_DATA": str(tmp),
           "MCPKIT_HUB_RATE_LIMIT": str(RATE_LIMIT), "MCPKIT_HUB_RATE_BURST": str(RATE_BURST),
           "MCPKIT_HUB_OAUTH_ACCESS_TOKEN_TTL_S": str(ACCESS_TOKEN_TTL_S)}
    logfile = tmp / "hub.log"
    proc = start(stop, [PY, str(Path(__file__).with_name("hub_bench.py")), "--serve-hub",
                        "--port", str(port), "--database-url", database_url],
                 "the hub", logfile, env)
    base = f"http://127.0.0.1:{port}"
    wait_listening(proc, port, "the hub", logfile)
    wait_ready(base, proc, logfile)
    return Hub(base, admin, proc.pid, database_url, key)


def set_password(hub: Hub, user_id: int) -> None:
    from mcpkit.hub.crypto import SecretBox
    from mcpkit.hub.passwords import hash_password
    from mcpkit.hub.store import Store

    async def set_it() -> None:
        async with await Store.open(hub.database_url, SecretBox([hub.secret_key])) as store:
            await store.users.set_password_hash(user_id, hash_password(PASSWORD))

    anyio.run(set_it)


def offers_dpop(base: str) -> bool:
    url = base + "/.well-known/oauth-authorization-server"
    with urllib.request.urlopen(url, timeout=CALL_TIMEOUT_S) as reply:
        metadata = json.loads(reply.read())
    return bool(metadata.get("dpop_signing_alg_values_supported"))


def set_up(stop: ExitStack, tmp: Path) -> Setup:
    echo_url, echo_pid = start_echo(stop, tmp)
    hub = start_hub(stop, tmp)
    base, admin = hub.base, hub.admin_token
    user = rest(base, "POST", "/api/v1/admin/users", admin, {"name": "bench", "is_admin": False})
    api_token = rest(base, "POST", f"/api/v1/admin/users/{user['id']}/tokens", admin,
                     {"name": "bench"})["secret"]
    rest(base, "POST", "/api/v1/users/mcp/upstreams", api_token,
         {"name": "echo", "url": echo_url, "transport": "http"})
    set_password(hub, user["id"])
    mcp = base + "/mcp"
    tokens = anyio.run(OAuth(redirect=HubLogin("bench", PASSWORD)).login, mcp)
    targets = {"direct": Target(echo_url, "echo"),
               "api-token": Target(mcp, "echo__echo", bearer=api_token),
               "oauth": Target(mcp, "echo__echo", bearer=tokens.access_token)}
    notes = []
    if offers_dpop(base):
        dpop = OAuth(redirect=HubLogin("bench", PASSWORD), dpop=True)
        bound = anyio.run(dpop.login, mcp)
        if bound.token_type.lower() == "dpop":
            targets["oauth-dpop"] = Target(mcp, "echo__echo", auth=dpop)
        else:
            notes.append(f"oauth-dpop skipped: the hub answered a DPoP token request with "
                         f"a {bound.token_type} token")
    else:
        notes.append("oauth-dpop skipped: the hub's metadata offers no DPoP "
                     "(dpop_signing_alg_values_supported)")
    return Setup(targets, hub.pid, echo_pid, notes)


async def run_calls(setup: Setup, names: list[str], calls: int, warmup: int,
                    block: int) -> dict[str, Samples]:
    samples = {name: Samples() for name in names}
    async with AsyncExitStack() as stack:
        clients = {}
        for name in names:
            target = setup.targets[name]
            clients[name] = await stack.enter_async_context(Client(
                target.url, bearer_token=target.bearer, auth=target.auth,
                timeouts=Timeouts(timeout=CALL_TIMEOUT_S)))

        async def one_call(name: str) -> float:
            started = time.perf_counter()
            with anyio.fail_after(CALL_TIMEOUT_S):
                result = await clients[name].call_tool(setup.targets[name].tool,
                                                       {"text": TEXT})
            elapsed = time.perf_counter() - started
            if result.is_error or getattr(result.content[0], "text", None) != TEXT:
                raise RuntimeError(f"{name}: a wrong answer: {result.content}")
            return elapsed

        for name in names:
            for _ in range(warmup):
                await one_call(name)
        blocks = -(-calls // block)
        for number in range(blocks):
            size = min(block, calls - number * block)
            turn = number % len(names)
            for name in names[turn:] + names[:turn]:
                got = samples[name]
                hub_before, echo_before = cpu_time(setup.hub_pid), cpu_time(setup.echo_pid)
                got.latencies += [await one_call(name) for _ in range(size)]
                got.hub_cpu_s += cpu_time(setup.hub_pid) - hub_before
                got.echo_cpu_s += cpu_time(setup.echo_pid) - echo_before
            if (number + 1) % max(1, blocks // 4) == 0:
                print(f"{(number + 1) * block}/{calls} calls per target", file=sys.stderr)
    return samples


def measure(calls: int, warmup: int, block: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory, ExitStack() as stop:
        setup = set_up(stop, Path(directory))
        names = [name for name in TARGETS if name in setup.targets]
        samples = anyio.run(run_calls, setup, names, calls, warmup, block)
    return report(samples, calls, setup.notes)


def report(samples: dict[str, Samples], calls: int, notes: list[str]) -> dict[str, Any]:
    rows: dict[str, dict[str, float]] = {}
    for name, got in samples.items():
        ordered = sorted(got.latencies)
        rows[name] = {"median_ms": statistics.median(ordered) * 1000,
                      "p95_ms": percentile(ordered, 0.95) * 1000,
                      "hub_cpu_us_per_call": got.hub_cpu_s / calls * 1e6,
                      "echo_cpu_us_per_call": got.echo_cpu_s / calls * 1e6}
    direct = rows["direct"]
    for row in rows.values():
        row["added_median_ms"] = row["median_ms"] - direct["median_ms"]
        row["added_p95_ms"] = row["p95_ms"] - direct["p95_ms"]
    result = {"calls_per_target": calls, "targets": rows,
              "oauth_minus_api_token": difference(rows["oauth"], rows["api-token"]),
              "notes": notes}
    if "oauth-dpop" in rows:
        result["dpop_minus_oauth"] = difference(rows["oauth-dpop"], rows["oauth"])
    return result


def difference(row: dict[str, float], base: dict[str, float]) -> dict[str, float]:
    return {key: row[key] - base[key] for key in ("median_ms", "p95_ms", "hub_cpu_us_per_call")}


def print_table(result: dict[str, Any]) -> None:
    print(f"tools/call echo, one at a time, {result['calls_per_target']} calls per target")
    print(f"{'target':<11} {'median ms':>9} {'p95 ms':>7} {'added median':>12} "
          f"{'added p95':>9} {'hub CPU/call':>12} {'echo CPU/call':>13}")
    for name, row in result["targets"].items():
        hub_cpu = f"{row['hub_cpu_us_per_call']:.0f} µs" if name != "direct" else "-"
        added = ("", "") if name == "direct" else (f"{row['added_median_ms']:+.3f}",
                                                  f"{row['added_p95_ms']:+.3f}")
        print(f"{name:<11} {row['median_ms']:>9.3f} {row['p95_ms']:>7.3f} {added[0]:>12} "
              f"{added[1]:>9} {hub_cpu:>12} {row['echo_cpu_us_per_call']:>10.0f} µs")
    for key, label in (("oauth_minus_api_token", "oauth - api-token"),
                       ("dpop_minus_oauth", "oauth-dpop - oauth")):
        if key in result:
            diff = result[key]
            print(f"{label}: median {diff['median_ms']:+.3f} ms, p95 {diff['p95_ms']:+.3f} "
                  f"ms, hub CPU {diff['hub_cpu_us_per_call']:+.0f} µs per call")
    for note in result["notes"]:
        print(note)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per target")
    parser.add_argument("--block", type=int, default=10,
                        help="calls a target makes in a row before the next one's turn")
    parser.add_argument("--warmup", type=int, default=50, help="untimed calls per target")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.calls < 1 or args.block < 1 or args.warmup < 0:
        parser.error("--calls and --block must be above 0, --warmup not below 0")
    result = measure(args.calls, args.warmup, args.block)
    if args.json:
        print(json.dumps(result))
    else:
        print_table(result)


if __name__ == "__main__":
    main()
