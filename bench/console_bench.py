"""The hub's web console under load: its pages' load times with 500 upstreams and 10,000 audit
rows, over plain HTTP and in real headless Chromium.

    .venv/bin/python bench/console_bench.py      # 50 rounds, 20 browser loads (~35 s)
    .venv/bin/python bench/console_bench.py --rounds 10 --browser-loads 5 --json out.json
    # also: --upstreams N, --audit-rows N, --warmup N, --no-browser, --profile-hub FILE

Starts, on 127.0.0.1, `python -m mcpkit.testing.echo_server --transport http` and
`python -m mcpkit hub serve` (the command users run) on a free port with a fresh SQLite file in
a temp data directory, a generated MCPKIT_HUB_SECRET_KEY, private upstreams allowed, the rate
limits raised out of the way and MCPKIT_HUB_MAX_UPSTREAMS_PER_USER raised to `--upstreams`;
everything else at the hub's defaults (page size 50, the health checker running). Before the
hub starts, the database gets (through the store API, as the console's tests seed it): the
admin `root` and the user `bench`, each with a password, `bench`'s API token, and
`--audit-rows` audit rows spread over the upstreams' names, tools and outcomes. Then, through
the REST API with `bench`'s token: `--upstreams` upstreams - `echo` (the echo server, its
tools page has tools) and the others at http://127.0.0.1:9/mcp, a closed port; then "refresh
now" for each (one POST each), so the list shows every upstream's health, last error and last
check as it would once the health checker has been round - the pages never contact an
upstream themselves, and the checker finds none due again for most of its interval.

Both users sign in to the console as a browser does over plain HTTP (the console's sign-in,
the hub's sign-in page, the callback: tests/console/support.py's ConsoleBrowser). Then, over
one keep-alive connection per user, `--warmup` untimed rounds and `--rounds` timed ones, each
round fetching every page once in turn (so a busy moment of the machine falls on all alike):

  list            /                                   bench's upstreams, first page
  API: list       /api/v1/users/mcp/upstreams         the JSON the list page is made from,
                                                      with bench's API token (the REST API's
                                                      share of the list page's time)
  list, later     /?cursor=…                          a page in the middle, reached by the
                                                      pages' own "next" links
  tools           /console/upstreams/{echo}/tools     the echo upstream's tools
  audit           /console/admin/audit                admin: the audit log, newest first
  audit, filtered /console/admin/audit?outcome=error  admin: one filter (a full page matches)
  audit, narrow   …?upstream=up-007&outcome=error     admin: two filters (a few rows match)
  health          /console/admin/health               admin: every user's upstreams

Per page: median and p95 of the time from sending the request to the last byte of the answer
(on 127.0.0.1 over a kept-alive connection, this is the hub's time to serve the page), the
median CPU time the hub process used meanwhile (all its threads, /proc/PID/task/*/schedstat:
less sensitive to the machine's load than the wall time), its size in bytes and the rows it
shows (a page holds the page size's rows, not all of them: the pagination is the server's).
Every answer is checked: status 200 and the expected row count.

Then, unless --no-browser, Debian's chromium driven by Playwright (its executable path set;
tests/browser.py's flags) loads `/` as `bench` `--browser-loads` times, after one untimed load
(the cold one, reported apart: it also fetches the style sheet and script). Per load, from
`performance.getEntriesByType('navigation')[0]`: responseEnd - startTime (the HTML arrived)
and loadEventEnd - startTime (the page loaded, style sheet and script included), and
responseEnd - requestStart (the request alone, as the HTTP figures measure it); median and
p95; and the hub's CPU time per load (as above). The console's CSP forbids eval, so the
script reads these with page.evaluate of an expression, polling (bounded) until loadEventEnd
is set.

The machine's load average is recorded at the start and at the end. A table is printed;
--json PATH writes the results as JSON too. Every process is stopped by PID at the end, even
on failure."""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
import urllib.parse
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.console: the console's sign-in walked over HTTP

from hub_auth_bench import cpu_time  # noqa: E402
from hub_bench import (  # noqa: E402 (bench/ is this script's directory)
    ECHO_HTTP,
    PY,
    RATE_BURST,
    RATE_LIMIT,
    free_port,
    percentile,
    rest,
    start,
    wait_listening,
    wait_ready,
)
from tests.browser import CHROMIUM_ARGS  # noqa: E402
from tests.console.support import ConsoleBrowser  # noqa: E402
from tests.hub.hub_helpers import Hub  # noqa: E402

from mcpkit.hub.crypto import SecretBox, generate_key  # noqa: E402
from mcpkit.hub.settings import HubSettings  # noqa: E402

PASSWORD = "bench password, not a secret"
CLOSED_UPSTREAM = "http://127.0.0.1:9/mcp"  # the discard port: nothing listens (as in tests)
TOOLS = ("search", "fetch", "echo", "summarize", "translate")
OUTCOMES = ("ok", "ok", "ok", "tool_error", "error", "denied", "timeout")
REQUEST_TIMEOUT_S = 30.0
LOAD_EVENT_POLLS = 200  # x 10 ms: how long a browser load may take to set loadEventEnd
MAX_LIST_PAGES = 1000  # bounds the walk through the REST API's upstream pages
LATER_PAGE = 6  # which page of the upstream list "list, later" measures (when there are that many)
UPSTREAM_ROW = re.compile(r'<tr data-upstream="')
TOOL_ROW = re.compile(r'<tr data-tool="')
AUDIT_ROW = re.compile(r'<tr>\s*<th scope="row" data-label="Time">')
API_ROW = re.compile(r'"transport":')
UPSTREAMS_API = "/api/v1/users/mcp/upstreams"
NEXT_LINK = re.compile(r'href="([^"]+)" rel="next"')
NAVIGATION = ("JSON.stringify(performance.getEntriesByType('navigation')"
              ".map(e => e.toJSON())[0] || null)")
BROWSER_ROWS = "document.querySelectorAll('tr[data-upstream]').length"


@dataclass
class Page:
    """A page to measure: who fetches it, where, and how its rows are told apart."""

    name: str
    who: str  # "user" or "admin" (signed in to the console), "api" (bench's API token)
    path: str
    rows: re.Pattern[str]
    expected_rows: int


@dataclass
class Seeded:
    hub: Hub
    pid: int
    echo_id: str
    token: str  # bench's API token
    seconds: dict[str, float]


# ------------------------------------------------------------------ seeding and starting


def seed_database(database_url: str, key: str, audit_rows: int,
                  upstreams: int) -> tuple[int, str]:
    """The admin `root` and the user `bench` with passwords, `bench`'s API token, and the
    audit rows (newest last); bench's id and token."""
    from mcpkit.hub.passwords import hash_password
    from mcpkit.hub.store import Store
    from mcpkit.hub.store.records import AuditEntry

    async def seed() -> tuple[int, str]:
        async with await Store.open(database_url, SecretBox([key])) as store:
            root = await store.users.create("root", is_admin=True)
            user = await store.users.create("bench", is_admin=False)
            for someone in (root, user):
                await store.users.set_password_hash(someone.id, hash_password(PASSWORD))
            token = (await store.tokens.create(user.id, name="bench")).secret
            start_at = datetime.now(UTC) - timedelta(seconds=audit_rows)
            await store.audit.record_many([
                AuditEntry(user_id=user.id if i % 4 else root.id, upstream_id=None,
                           upstream_name=upstream_name(i % upstreams), tool=TOOLS[i % 5],
                           duration_ms=float(i % 997), outcome=OUTCOMES[i % 7],  # type: ignore[arg-type]
                           at=start_at + timedelta(seconds=i))
                for i in range(audit_rows)])
            return user.id, token

    return anyio.run(seed)


def upstream_name(number: int) -> str:
    return "echo" if number == 0 else f"up-{number:03d}"


def start_hub(stop: ExitStack, tmp: Path, args: argparse.Namespace) -> Seeded:
    seconds: dict[str, float] = {}
    echo_port = free_port()
    echo = start(stop, [*ECHO_HTTP, str(echo_port)], "the echo server", tmp / "echo.log")
    wait_listening(echo, echo_port, "the echo server", tmp / "echo.log")
    key = generate_key()
    database_url = f"sqlite+aiosqlite:///{tmp / 'hub.db'}"
    began = time.perf_counter()
    _, token = seed_database(database_url, key, args.audit_rows, args.upstreams)
    seconds["seed users and audit rows (store API)"] = time.perf_counter() - began
    port = free_port()
    env = {**os.environ, "MCPKIT_HUB_SECRET_KEY": key,
           "MCPKIT_HUB_RATE_LIMIT": str(RATE_LIMIT), "MCPKIT_HUB_RATE_BURST": str(RATE_BURST),
           "MCPKIT_HUB_MAX_UPSTREAMS_PER_USER": str(max(100, args.upstreams))}
    logfile = tmp / "hub.log"
    profile = ["-m", "cProfile", "-o", str(Path(args.profile_hub).resolve())] \
        if args.profile_hub else []
    proc = start(stop, [PY, *profile, "-m", "mcpkit", "hub", "serve", "--port", str(port),
                        "--data-dir", str(tmp), "--database-url", database_url,
                        "--allow-private-upstreams", "--log-level", "warning"],
                 "the hub", logfile, env)
    base = f"http://127.0.0.1:{port}"
    wait_listening(proc, port, "the hub", logfile)
    wait_ready(base, proc, logfile)
    began = time.perf_counter()
    mine = UPSTREAMS_API
    echo_id = rest(base, "POST", mine, token, {"name": "echo", "transport": "http",
                                               "url": f"http://127.0.0.1:{echo_port}/mcp"})["id"]
    for number in range(1, args.upstreams):
        rest(base, "POST", mine, token, {"name": upstream_name(number), "transport": "http",
                                         "url": CLOSED_UPSTREAM})
    seconds[f"add {args.upstreams} upstreams (REST API, one at a time)"] = (
        time.perf_counter() - began)
    began = time.perf_counter()
    down = refresh_all(base, token)
    seconds[f"refresh every upstream's catalog (REST API; {down} down)"] = (
        time.perf_counter() - began)
    settings = HubSettings(database_url=database_url, port=port, data_dir=tmp)
    return Seeded(Hub(base, "", database_url, settings, SecretBox([key])), proc.pid,
                  echo_id, token, seconds)


def refresh_all(base: str, token: str) -> int:
    """'Refresh now' for every upstream through the REST API, one at a time, so the list shows
    each one's health, last error and last check (and the health checker finds none due for
    most of an interval); how many were down (502), all but `echo`."""
    mine = UPSTREAMS_API
    down, cursor = 0, None
    for _ in range(MAX_LIST_PAGES):
        query = f"?cursor={urllib.parse.quote(cursor)}" if cursor else ""
        page = rest(base, "GET", mine + query, token)
        for item in page["items"]:
            try:
                rest(base, "POST", f"{mine}/{item['id']}/refresh", token)
            except RuntimeError as error:
                if item["name"] == "echo" or ": 502 " not in str(error):
                    raise
                down += 1
        cursor = page["next_cursor"]
        if cursor is None:
            return down
    raise RuntimeError(f"more than {MAX_LIST_PAGES} pages of upstreams")


# ------------------------------------------------------------------ over HTTP


async def signed_in(hub: Hub, name: str) -> ConsoleBrowser:
    browser = ConsoleBrowser(hub)
    back = await browser.sign_in(name, PASSWORD)
    if back.status != 303:
        raise RuntimeError(f"{name}'s sign-in ended with {back.status}: {back.text[:300]}")
    return browser


async def later_page(http: aiohttp.ClientSession, base: str, pages: int) -> tuple[str, int]:
    """The path of page `pages` of the upstream list, reached by following "next" links (or
    the last page, when there are fewer); which page that is."""
    path, number = "/", 1
    while number < pages:
        async with http.get(base + path, allow_redirects=False) as reply:
            found = NEXT_LINK.search(await reply.text())
        if found is None:
            break
        path, number = found.group(1).replace("&amp;", "&"), number + 1
    return path, number


def pages_to_measure(seeded: Seeded, later: str, later_number: int,
                     args: argparse.Namespace) -> list[Page]:
    size = seeded.hub.settings.page_size
    on_later = min(size, args.upstreams - (later_number - 1) * size)
    narrow = sum(1 for i in range(args.audit_rows)
                 if i % args.upstreams == 7 and OUTCOMES[i % 7] == "error")
    tools = f"/console/upstreams/{seeded.echo_id}/tools"
    return [
        Page("list", "user", "/", UPSTREAM_ROW, min(size, args.upstreams)),
        Page("API: list", "api", UPSTREAMS_API, API_ROW, min(size, args.upstreams)),
        Page(f"list, page {later_number}", "user", later, UPSTREAM_ROW, on_later),
        Page("tools", "user", tools, TOOL_ROW, -1),  # the echo server's count, whatever it is
        Page("audit", "admin", "/console/admin/audit", AUDIT_ROW, min(size, args.audit_rows)),
        Page("audit, filtered", "admin", "/console/admin/audit?outcome=error", AUDIT_ROW,
             min(size, args.audit_rows // 7)),
        Page("audit, narrow", "admin", "/console/admin/audit?upstream=up-007&outcome=error",
             AUDIT_ROW, min(size, narrow)),
        Page("health", "admin", "/console/admin/health", UPSTREAM_ROW,
             min(size, args.upstreams)),
    ]


async def fetch(http: aiohttp.ClientSession, url: str, page: Page,
                hub_pid: int) -> tuple[float, float, int, int]:
    """One timed GET: seconds to the last byte, the hub's CPU seconds meanwhile, bytes, rows
    shown."""
    cpu_before = cpu_time(hub_pid)
    began = time.perf_counter()
    async with http.get(url, allow_redirects=False) as reply:
        body = await reply.read()
    took = time.perf_counter() - began
    cpu = cpu_time(hub_pid) - cpu_before
    if reply.status != 200:
        raise RuntimeError(f"{page.name} ({page.path}): {reply.status} {body[:300]!r}")
    rows = len(page.rows.findall(body.decode()))
    if page.expected_rows >= 0 and rows != page.expected_rows:
        raise RuntimeError(f"{page.name}: {rows} rows, expected {page.expected_rows}")
    return took, cpu, len(body), rows


async def measure_pages(seeded: Seeded, args: argparse.Namespace) -> dict[str, Any]:
    base = seeded.hub.url
    jars = {who: (await signed_in(seeded.hub, name)).jar
            for who, name in (("user", "bench"), ("admin", "root"))}
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    bearer = {"Authorization": f"Bearer {seeded.token}"}
    async with aiohttp.ClientSession(cookie_jar=jars["user"], timeout=timeout) as user, \
            aiohttp.ClientSession(cookie_jar=jars["admin"], timeout=timeout) as admin, \
            aiohttp.ClientSession(headers=bearer, timeout=timeout) as api:
        sessions = {"user": user, "admin": admin, "api": api}
        later, later_number = await later_page(user, base, LATER_PAGE)
        pages = pages_to_measure(seeded, later, later_number, args)
        times: dict[str, list[float]] = {page.name: [] for page in pages}
        cpu: dict[str, list[float]] = {page.name: [] for page in pages}
        shape: dict[str, tuple[int, int]] = {}
        for number in range(args.warmup + args.rounds):
            for page in pages:
                took, used, size, rows = await fetch(sessions[page.who], base + page.path,
                                                     page, seeded.pid)
                shape[page.name] = (size, rows)
                if number >= args.warmup:
                    times[page.name].append(took)
                    cpu[page.name].append(used)
            if (number + 1) % 10 == 0:
                print(f"{number + 1}/{args.warmup + args.rounds} rounds", file=sys.stderr)
        cookies = {who: [(m.key, m.value) for m in jar] for who, jar in jars.items()}
    return {"pages": {page.name: {"path": page.path, **summary(times[page.name]),
                                  "hub_cpu_median_ms": statistics.median(cpu[page.name]) * 1000,
                                  "bytes": shape[page.name][0], "rows": shape[page.name][1]}
                      for page in pages},
            "cookies": cookies}


def summary(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {"median_ms": statistics.median(ordered) * 1000,
            "p95_ms": percentile(ordered, 0.95) * 1000,
            "min_ms": ordered[0] * 1000, "samples": len(ordered)}


# ------------------------------------------------------------------ in Chromium


def measure_browser(base: str, cookies: list[tuple[str, str]], loads: int,
                    expected_rows: int, hub_pid: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        raise RuntimeError("chromium is not installed (bash scripts/install_browser.sh); "
                           "or run with --no-browser")
    request_ms: list[float] = []
    response_ms: list[float] = []
    load_ms: list[float] = []
    hub_cpu: list[float] = []
    cold: dict[str, float] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.add_cookies([{"name": name, "value": value, "url": base + "/"}
                                 for name, value in cookies])
            page = context.new_page()
            for number in range(loads + 1):
                cpu_before = cpu_time(hub_pid)
                timing, rows = one_load(page, base + "/")
                used = cpu_time(hub_pid) - cpu_before
                if rows != expected_rows:
                    raise RuntimeError(f"Chromium shows {rows} upstream rows, "
                                       f"expected {expected_rows}")
                response = timing["responseEnd"] - timing["startTime"]
                loaded = timing["loadEventEnd"] - timing["startTime"]
                if number == 0:
                    cold = {"response_ms": response, "load_ms": loaded}
                else:
                    request_ms.append((timing["responseEnd"] - timing["requestStart"]) / 1000)
                    response_ms.append(response / 1000)
                    load_ms.append(loaded / 1000)
                    hub_cpu.append(used)
        finally:
            browser.close()
    return {"loads": loads, "rows": expected_rows, "cold": cold,
            "hub_cpu_median_ms": statistics.median(hub_cpu) * 1000,
            "request_to_response_end": summary(request_ms),
            "response_end": summary(response_ms), "load_event_end": summary(load_ms)}


def one_load(page: Any, url: str) -> tuple[dict[str, float], int]:
    """Navigate to `url` (a fresh navigation each time); its navigation timing entry once
    loadEventEnd is set, and the upstream rows the page shows."""
    reply = page.goto(url, wait_until="load", timeout=REQUEST_TIMEOUT_S * 1000)
    if reply is None or reply.status != 200:
        raise RuntimeError(f"Chromium: {url} answered {reply and reply.status}")
    for _ in range(LOAD_EVENT_POLLS):
        timing = json.loads(page.evaluate(NAVIGATION) or "null")
        if timing and timing["loadEventEnd"] > 0:
            return timing, int(page.evaluate(BROWSER_ROWS))
        time.sleep(0.01)
    raise RuntimeError("Chromium: loadEventEnd was never set")


# ------------------------------------------------------------------ the run and its report


def run(args: argparse.Namespace) -> dict[str, Any]:
    load_at_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as directory, ExitStack() as stop:
        seeded = start_hub(stop, Path(directory), args)
        print("seeded; measuring pages", file=sys.stderr)
        measured = anyio.run(measure_pages, seeded, args)
        browser = None
        if not args.no_browser:
            print("measuring in Chromium", file=sys.stderr)
            browser = measure_browser(seeded.hub.url, measured["cookies"]["user"],
                                      args.browser_loads,
                                      min(seeded.hub.settings.page_size, args.upstreams),
                                      seeded.pid)
    return {"machine": {"load_average_at_start": load_at_start,
                        "load_average_at_end": os.getloadavg(), "cpus": os.cpu_count(),
                        "python": platform.python_version(),
                        "at": datetime.now(UTC).isoformat(timespec="seconds")},
            "upstreams": args.upstreams, "audit_rows": args.audit_rows,
            "page_size": seeded.hub.settings.page_size, "rounds": args.rounds,
            "setup_seconds": seeded.seconds, "pages": measured["pages"],
            "browser": browser}


def print_table(result: dict[str, Any]) -> None:
    machine = result["machine"]
    print(f"console, {result['upstreams']} upstreams, {result['audit_rows']} audit rows, "
          f"page size {result['page_size']}; {result['rounds']} rounds; load average at start "
          f"{' '.join(f'{x:.2f}' for x in machine['load_average_at_start'])}, at end "
          f"{' '.join(f'{x:.2f}' for x in machine['load_average_at_end'])} "
          f"({machine['cpus']} CPUs)")
    print(f"| {'page':<16} | {'median ms':>9} | {'p95 ms':>7} | {'hub CPU ms':>10} | "
          f"{'bytes':>7} | {'rows':>4} | path |")
    print(f"|{'-' * 18}|{'-' * 10}:|{'-' * 8}:|{'-' * 11}:|{'-' * 8}:|{'-' * 5}:|------|")
    for name, row in result["pages"].items():
        path = row["path"] if len(row["path"]) <= 60 else row["path"][:57] + "..."
        print(f"| {name:<16} | {row['median_ms']:>9.1f} | {row['p95_ms']:>7.1f} | "
              f"{row['hub_cpu_median_ms']:>10.1f} | {row['bytes']:>7,} | {row['rows']:>4} | "
              f"`{path}` |")
    browser = result["browser"]
    if browser is not None:
        print(f"\nChromium, / with {result['upstreams']} upstreams ({browser['rows']} rows "
              f"shown), {browser['loads']} loads after a cold one:")
        for key, label in (("request_to_response_end", "responseEnd - requestStart"),
                           ("response_end", "responseEnd - startTime"),
                           ("load_event_end", "loadEventEnd - startTime")):
            row = browser[key]
            print(f"  {label:<25} median {row['median_ms']:.1f} ms, p95 {row['p95_ms']:.1f} ms")
        print(f"  the hub's CPU per load       median {browser['hub_cpu_median_ms']:.1f} ms")
        cold = browser["cold"]
        print(f"  cold load (assets fetched): responseEnd {cold['response_ms']:.1f} ms, "
              f"loadEventEnd {cold['load_ms']:.1f} ms")
    for what, seconds in result["setup_seconds"].items():
        print(f"setup: {what}: {seconds:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--upstreams", type=int, default=500, help="bench's upstreams")
    parser.add_argument("--audit-rows", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=50, help="timed fetches of each page")
    parser.add_argument("--warmup", type=int, default=3, help="untimed rounds first")
    parser.add_argument("--browser-loads", type=int, default=20,
                        help="timed loads of / in Chromium")
    parser.add_argument("--no-browser", action="store_true", help="skip the Chromium part")
    parser.add_argument("--json", metavar="PATH", help="also write the results here")
    parser.add_argument("--profile-hub", metavar="FILE",
                        help="run the hub under cProfile, its stats written here at the end "
                             "(the setup's requests included)")
    args = parser.parse_args()
    if not (1 <= args.upstreams <= 10_000 and 1 <= args.rounds <= 10_000
            and 1 <= args.browser_loads <= 1000 and 0 <= args.warmup <= 100
            and 0 <= args.audit_rows <= 1_000_000):
        parser.error("--upstreams 1-10000, --rounds 1-10000, --browser-loads 1-1000, "
                     "--warmup 0-100, --audit-rows 0-1000000")
    result = run(args)
    print_table(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
