"""`mcpkit serve`: run the coding tools server."""

from __future__ import annotations

import argparse
import os
import sys

from mcpkit.coding.scope import current_task, valid_task_id
from mcpkit.transports.http.auth_failures import (
    DEFAULT_AUTH_FAILURE_BURST,
    DEFAULT_AUTH_FAILURES_PER_MINUTE,
)

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
    parser.add_argument("--auth-failure-burst", type=int, default=DEFAULT_AUTH_FAILURE_BURST,
                        metavar="N", help="wrong tokens a client address may send at once "
                        f"before 429 (default {DEFAULT_AUTH_FAILURE_BURST})")
    parser.add_argument("--auth-failure-rate", type=int,
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
    from mcpkit.transports.http.serve import add_limit_arguments

    add_limit_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from mcpkit.coding.env import CodingEnv
    from mcpkit.coding.roots import RootsPolicy
    from mcpkit.coding.server import build_server
    from mcpkit.coding.workspace import Workspace, WorkspaceError

    if min(args.auth_failure_burst, args.auth_failure_rate) < 1:
        print("mcpkit serve: --auth-failure-burst and --auth-failure-rate must be above 0",
              file=sys.stderr)
        return 2
    try:
        workspace = Workspace.at(args.workspace)
    except WorkspaceError as exc:
        print(f"mcpkit serve: {exc}", file=sys.stderr)
        return 2
    env = CodingEnv(workspace, allow_private_fetch=args.allow_private_fetch,
                    client_roots=RootsPolicy(args.client_roots))
    server = build_server(env)
    token = args.token or os.environ.get(TOKEN_ENV) or None
    try:
        if args.transport == "stdio":
            if args.task_id is not None:
                if not valid_task_id(args.task_id):
                    print("mcpkit serve: invalid --task-id", file=sys.stderr)
                    return 2
                current_task.set(args.task_id)
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
    """Nothing is left running after the server exits: kill every background job."""
    scopes = getattr(env, "scopes", None)
    if scopes is None:
        return
    for scope in scopes.all():
        for job in list(scope.jobs.values()):
            kill = getattr(job, "kill_now", None)
            if kill is not None:
                kill()
    scopes.close()
