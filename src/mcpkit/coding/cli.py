"""`mcpkit serve`: run the coding tools server."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from types import FrameType

from mcpkit.coding.scope import MAX_TASKS, current_task, valid_task_id
from mcpkit.transports.http.auth_failures import (
    DEFAULT_AUTH_FAILURE_BURST,
    DEFAULT_AUTH_FAILURES_PER_MINUTE,
)
from mcpkit.transports.http.serve import add_limit_arguments, positive_int

DEFAULT_PORT = 65510
TOKEN_ENV = "MCPKIT_SERVE_TOKEN"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", default=".", help="the directory the tools work in "
                        "(default: the current directory)")
    parser.add_argument("--transport", choices=("http", "stdio"), default="http")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--token", default=None, help=f"require `Authorization: Bearer "
                        f"TOKEN` (HTTP); also read from ${TOKEN_ENV}")
    parser.add_argument("--auth-failure-burst", type=positive_int,
                        default=DEFAULT_AUTH_FAILURE_BURST, metavar="N",
                        help="wrong tokens a client address may send at once before 429 "
                        f"(default {DEFAULT_AUTH_FAILURE_BURST})")
    parser.add_argument("--auth-failure-rate", type=positive_int,
                        default=DEFAULT_AUTH_FAILURES_PER_MINUTE, metavar="N",
                        help="wrong tokens a minute an address may send after the burst "
                        f"(default {DEFAULT_AUTH_FAILURES_PER_MINUTE})")
    parser.add_argument("--task-id", default=None,
                        help="the task scope for stdio (HTTP takes ?task_id= per request)")
    parser.add_argument("--allow-private-fetch", action="store_true",
                        help="let `fetch` reach loopback, private and link-local addresses")
    parser.add_argument("--client-roots", choices=("ignore", "narrow", "widen"),
                        default="ignore",
                        help="what the client's `roots` do to the workspace: ignore them "
                        "(default), narrow the workspace to those inside it, or widen it "
                        "with them")
    parser.add_argument("--pass-env", action="append", default=[], metavar="NAME",
                        help="pass the server's variable NAME to commands (repeatable; NAME* "
                        "passes every variable starting with NAME); by default commands get "
                        "only harmless variables (PATH, HOME, locale, …)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        dest="set_env", help="set NAME=VALUE in commands' environment "
                        "(repeatable)")
    parser.add_argument("--process-tracking", choices=("auto", "cgroup", "process-table"),
                        default="auto", help="how every process a command starts is found "
                        "and stopped: a cgroup per command where one can be made (auto), "
                        "always (cgroup), or the process table only")
    parser.add_argument("--max-tasks", type=positive_int, default=MAX_TASKS,
                        help=f"task scopes kept at once (default {MAX_TASKS}); a new task "
                        "drops an idle one, and is refused when every task is busy")
    parser.add_argument("--max-jobs", type=positive_int, default=None,
                        help="background jobs running at once per task (default 64)")
    parser.add_argument("--max-output-bytes", type=positive_int, default=None,
                        help="output one command may write (default 1 GiB); past it the "
                        "command is stopped")
    add_limit_arguments(parser)


def _assignments(items: list[str]) -> dict[str, str] | None:
    found: dict[str, str] = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name:
            return None
        found[name] = value
    return found


def run(args: argparse.Namespace) -> int:
    from mcpkit.coding.env import CodingEnv
    from mcpkit.coding.roots import RootsPolicy
    from mcpkit.coding.scope import Scopes
    from mcpkit.coding.server import build_server
    from mcpkit.coding.tracking import Tracking, TrackingError, claim_process
    from mcpkit.coding.workspace import Workspace, WorkspaceError

    try:
        workspace = Workspace.at(args.workspace)
    except WorkspaceError as exc:
        print(f"mcpkit serve: {exc}", file=sys.stderr)
        return 2
    set_env = _assignments(args.set_env)
    if set_env is None:
        print("mcpkit serve: --env takes NAME=VALUE", file=sys.stderr)
        return 2
    limits = {k: v for k, v in (("max_jobs_per_task", args.max_jobs),
                                ("max_output_bytes", args.max_output_bytes)) if v is not None}
    env = CodingEnv(workspace, scopes=Scopes(max_tasks=args.max_tasks),
                    allow_private_fetch=args.allow_private_fetch,
                    client_roots=RootsPolicy(args.client_roots),
                    pass_env=tuple(args.pass_env), set_env=set_env,
                    process_tracking=Tracking(args.process_tracking), **limits)
    try:
        _ = env.processes.cgroups  # probe now: `cgroup` without one fails at start-up
    except TrackingError as exc:
        print(f"mcpkit serve: {exc.message}", file=sys.stderr)
        return 2
    server = build_server(env)
    claim_process()  # every child of this process is the coding tools' (see tracking.py)
    token = args.token or os.environ.get(TOKEN_ENV) or None
    try:
        if args.transport == "stdio":
            if args.task_id is not None:
                if not valid_task_id(args.task_id):
                    print("mcpkit serve: invalid --task-id", file=sys.stderr)
                    return 2
                current_task.set(args.task_id)
            stop_on_signals(env)
            server.run_stdio()
        else:
            from mcpkit.coding.http import CodingHttpApp
            from mcpkit.transports.http.auth_failures import AuthFailures

            print(f"mcpkit serve: workspace {workspace.root}, "
                  f"http://{args.host}:{args.port}/mcp" + (" (token required)" if token else ""),
                  file=sys.stderr)
            from mcpkit.transports.http.serve import limit_options

            server.run_http(host=args.host, port=args.port, log_level="warning",
                            wrap=lambda app: CodingHttpApp(
                                app, token=token, on_shutdown=lambda: stop_jobs(env),
                                auth_failures=AuthFailures(
                                    burst=args.auth_failure_burst,
                                    per_minute=args.auth_failure_rate)),
                            **limit_options(args))
    finally:
        stop_jobs(env)
    return 0


def stop_jobs(env: object) -> None:
    """Nothing is left running after the server exits: kill every background job, every
    command still running, and whatever else descends from this process."""
    from mcpkit.coding import tracking

    scopes = getattr(env, "scopes", None)
    if scopes is not None:
        for scope in scopes.all():
            for job in list(scope.jobs.values()):
                kill = getattr(job, "kill_now", None)
                if kill is not None:
                    kill()
    tracking.stop_all(everything=True)  # this process is the server: all of it is ours
    processes = getattr(env, "processes", None)
    if processes is not None:
        processes.close()
    if scopes is not None:
        scopes.close()


def stop_on_signals(env: object) -> None:
    """stdio: SIGTERM, SIGINT and SIGHUP stop every command first, then end the server as
    the signal would have (uvicorn does the same for HTTP through `CodingHttpApp.shutdown`)."""
    def handler(signum: int, frame: FrameType | None) -> None:
        stop_jobs(env)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, handler)
