"""The OAuth gate's cost per call: a protected `mcpkit serve` against an unprotected one, the
same tool, in one run.

    .venv/bin/python bench/auth_gate_bench.py              # 300 calls per server per round
    .venv/bin/python bench/auth_gate_bench.py --calls 100 --rounds 1 --json

Starts the test authorization server (oidc-provider from tests/js, tests/auth_e2e/stack.py),
then three `mcpkit serve` processes over the same kind of workspace:

  open     no authorization
  bearer   --auth-issuer/--auth-audience; a client-credentials JWT sent as Bearer
  dpop     the same; the token DPoP-bound, a fresh proof per request (mcpkit's MachineAuth:
           the client signs a proof and the server checks it and records its jti)

Each is driven by `mcpkit.Client` (Streamable HTTP, modern era), one call at a time:
`tools/call view` of a one-line file, warmed up, then `--calls` calls timed one by one. The
servers are interleaved over `--rounds` rounds; the median latency per server is reported,
with what the gate adds (ms/call) and the ratio to `open`, and the client's own cost of
signing a DPoP proof (part of the `dpop` row). Every process is stopped at the
end. Needs `bash scripts/install_js_peers.sh` (Node 22 and oidc-provider)."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.auth_e2e: the provider stack and the serve process

from tests.auth_e2e.serve_process import WORKSPACE_FILE, Served, running_serve  # noqa: E402
from tests.auth_e2e.stack import Stack, running_stack  # noqa: E402

from mcpkit import Client  # noqa: E402
from mcpkit.auth.dpop import DPoPKey  # noqa: E402
from mcpkit.client import ClientCredentialsGrant, MachineAuth  # noqa: E402

WARMUP_CALLS = 20
CALL_TIMEOUT_S = 10.0
KINDS = ("open", "bearer", "dpop")


def auth_for(kind: str, stack: Stack) -> MachineAuth | None:
    if kind == "open":
        return None
    grant = ClientCredentialsGrant(stack.machine_client_id, client_secret=stack.machine_secret)
    return MachineAuth(grant, scopes=["mcp:read"], dpop=kind == "dpop")


async def timed_calls(served: Served, auth: MachineAuth | None, calls: int) -> list[float]:
    """Seconds per call, after the warm-up (the token is fetched during it)."""
    arguments = {"file_path": str(served.workspace / WORKSPACE_FILE)}
    times: list[float] = []
    async with Client(served.url, auth=auth) as client:
        for i in range(WARMUP_CALLS + calls):
            started = time.perf_counter()
            with anyio.fail_after(CALL_TIMEOUT_S):
                result = await client.call_tool("view", arguments)
            elapsed = time.perf_counter() - started
            if result.is_error:
                raise RuntimeError(f"view failed: {result.content}")
            if i >= WARMUP_CALLS:
                times.append(elapsed)
    return times


def client_proof_ms(count: int) -> float:
    """The client's share of the `dpop` row: signing one proof (median ms), so what is left
    is the server's check."""
    key = DPoPKey.generate()
    times = []
    for _ in range(count):
        started = time.perf_counter()
        key.proof("POST", "http://127.0.0.1:1/mcp", access_token="x" * 600)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def measure(calls: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory, ExitStack() as stop:
        root = Path(directory)
        (root / "stack").mkdir()
        stack = stop.enter_context(running_stack(root / "stack"))
        servers = {kind: stop.enter_context(running_serve(
            root / kind, None if kind == "open" else stack)) for kind in KINDS}
        samples: dict[str, list[float]] = {kind: [] for kind in KINDS}
        for round_ in range(rounds):
            for kind in KINDS if round_ % 2 == 0 else reversed(KINDS):
                times = anyio.run(timed_calls, servers[kind], auth_for(kind, stack), calls)
                samples[kind] += times
                print(f"round {round_ + 1}/{rounds} {kind}: median "
                      f"{statistics.median(times) * 1000:.3f} ms", file=sys.stderr)
    medians = {kind: statistics.median(values) * 1000 for kind, values in samples.items()}
    return {"calls_per_server": calls * rounds, "median_ms": medians,
            "client_dpop_proof_ms": client_proof_ms(calls),
            "added_ms": {k: medians[k] - medians["open"] for k in KINDS[1:]},
            "ratio": {k: medians[k] / medians["open"] for k in KINDS[1:]}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="timed calls per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = measure(args.calls, args.rounds)
    if args.json:
        print(json.dumps(report))
        return
    print(f"tools/call view, one at a time, {report['calls_per_server']} calls per server")
    print(f"{'server':<8} {'median ms':>10} {'added ms':>9} {'ratio':>6}")
    for kind in KINDS:
        added = report["added_ms"].get(kind, 0.0)
        ratio = report["ratio"].get(kind, 1.0)
        print(f"{kind:<8} {report['median_ms'][kind]:>10.3f} {added:>9.3f} {ratio:>6.2f}")
    print(f"(of dpop's added time, the client signing its proof: "
          f"{report['client_dpop_proof_ms']:.3f} ms)")


if __name__ == "__main__":
    main()
