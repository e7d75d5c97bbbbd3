"""`mcpkit serve`: run the coding tools server."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from mcpkit.coding.scope import MAX_TASKS, current_task, valid_task_id
from mcpkit.serve_authorization import (
    AuthOptionsError,
    add_authorization_arguments,
    check_authorization_arguments,
    resource_auth,
)
from mcpkit.transports.server.http.auth_failures import (
    DEFAULT_AUTH_FAILURE_BURST,
    DEFAULT_AUTH_FAILURES_PER_MINUTE,
)
from mcpkit.transports.server.http.serve import add_limit_arguments, positive_int

if TYPE_CHECKING:
    from mcpkit.server.resource_auth import ResourceAuth
    from mcpkit.server.server import Server

DEFAULT_PORT = 65510
DEFAULT_HOST = "127.0.0.1"
TOKEN_ENV = "MCPKIT_SERVE_TOKEN"

DESCRIPTION = """\
Run the built-in coding tools server: tools that view, search and edit the files of a
workspace and run commands in it (bash, background jobs, diagnostics, fetch), for an agent
that connects over MCP. It serves Streamable HTTP at http://HOST:PORT/mcp, or stdio for a
client that starts it itself. The URL is printed once the port accepts connections. Ctrl-C
(or SIGTERM) stops it: every command it started is stopped, and requests in flight get up to
5 s to answer."""

EPILOG = f"""\
examples:
  mcpkit serve --workspace ~/project        # http://127.0.0.1:{DEFAULT_PORT}/mcp
  mcpkit serve --transport stdio            # for a client that starts the server
  {TOKEN_ENV}=$(openssl rand -hex 16) mcpkit serve --host 0.0.0.0
                                            # reachable from other machines: require a token
  mcpkit serve --host 0.0.0.0 --auth-issuer https://auth.example.com \\
      --auth-audience https://mcp.example.com/mcp --required-scope mcp
                                            # or OAuth access tokens (MCP authorization)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", default=".", metavar="DIR",
                        help="the directory the tools work in (default: the current directory)")
    parser.add_argument("--transport", choices=("http", "stdio"), default="http",
                        help="serve Streamable HTTP, or stdio for a client that starts the "
                        "server as a subprocess (default http)")
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help="the address to listen on; 0.0.0.0 for every address (then "
                        f"set a token) (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"the port to listen on; 0 picks a free one (default {DEFAULT_PORT})")
    parser.add_argument("--token", default=None, help=f"require `Authorization: Bearer "
                        f"TOKEN` (HTTP); also read from ${TOKEN_ENV} (default: none, "
                        "no token needed)")
    parser.add_argument("--auth-failure-burst", type=positive_int,
                        default=DEFAULT_AUTH_FAILURE_BURST, metavar="N",
                        help="wrong tokens a client address may send at once before 429 "
                        f"(default {DEFAULT_AUTH_FAILURE_BURST})")
    parser.add_argument("--auth-failure-rate", type=positive_int,
                        default=DEFAULT_AUTH_FAILURES_PER_MINUTE, metavar="N",
                        help="wrong tokens a minute an address may send after the burst "
                        f"(default {DEFAULT_AUTH_FAILURES_PER_MINUTE})")
    parser.add_argument("--task-id", default=None, metavar="ID",
                        help="the task scope for stdio (HTTP takes ?task_id= per request; "
                        "default: the default task)")
    parser.add_argument("--allow-private-fetch", action="store_true",
                        help="let `fetch` reach loopback, private and link-local addresses "
                        "(default: refused)")
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
                        "(repeatable; default: none)")
    parser.add_argument("--process-tracking", choices=("auto", "cgroup", "process-table"),
                        default="auto", help="how every process a command starts is found "
                        "and stopped: a cgroup per command where one can be made (auto), "
                        "always (cgroup), or the process table only (default auto)")
    parser.add_argument("--max-tasks", type=positive_int, default=MAX_TASKS, metavar="N",
                        help=f"task scopes kept at once (default {MAX_TASKS}); a new task "
                        "drops an idle one, and is refused when every task is busy")
    parser.add_argument("--max-jobs", type=positive_int, default=None, metavar="N",
                        help="background jobs running at once per task (default 64)")
    parser.add_argument("--max-output-bytes", type=positive_int, default=None,
                        metavar="BYTES",
                        help="output one command may write; past it the command is stopped "
                        "(default 1 GiB)")  # coding.env's defaults (not imported: slow)
    add_limit_arguments(parser)
    add_authorization_arguments(parser)


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

    token = args.token or os.environ.get(TOKEN_ENV) or None
    try:
        check_authorization_arguments(args, static_token=token, transport=args.transport)
        workspace = Workspace.at(args.workspace)
    except (AuthOptionsError, WorkspaceError) as exc:
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
    try:
        authorization = resource_auth(args)  # reads the issuer's metadata: bounded
    except AuthOptionsError as exc:
        print(f"mcpkit serve: {exc}", file=sys.stderr)
        return 2
    server = build_server(env)
    claim_process()  # every child of this process is the coding tools' (see tracking.py)
    if args.transport == "stdio" and args.task_id is not None:
        if not valid_task_id(args.task_id):
            print("mcpkit serve: invalid --task-id", file=sys.stderr)
            return 2
        current_task.set(args.task_id)
    from mcpkit.transports.server.http.listen import ListenError

    try:
        if args.transport == "stdio":
            server.run_stdio(on_stop=lambda: stop_jobs(env),
                             on_ready=lambda: _say_ready(workspace.root, "stdio", token))
        else:
            _serve_http(server, env, args, token, authorization,
                        on_ready=lambda url: _say_ready(workspace.root, url + "/mcp", token,
                                                        authorization))
    except ListenError as exc:
        print(f"mcpkit serve: {exc.message}", file=sys.stderr)
        return 2
    finally:
        stop_jobs(env)
    return 0


def _serve_http(server: Server, env: object, args: argparse.Namespace, token: str | None,
                authorization: ResourceAuth | None, on_ready: Callable[[str], None]) -> None:
    from mcpkit.coding.http import CodingHttpApp
    from mcpkit.transports.server.http.auth_failures import AuthFailures
    from mcpkit.transports.server.http.serve import limit_options

    server.run_http(host=args.host, port=args.port, log_level="warning", on_ready=on_ready,
                    wrap=lambda app: CodingHttpApp(
                        app, token=token, on_shutdown=lambda: stop_jobs(env),
                        auth_failures=AuthFailures(burst=args.auth_failure_burst,
                                                   per_minute=args.auth_failure_rate)),
                    authorization=authorization, **limit_options(args))


def _say_ready(root: object, where: str, token: str | None,
               authorization: ResourceAuth | None = None) -> None:
    """The start-up line, once the server answers: where, on what, and whether it needs a
    token (never the token)."""
    if where == "stdio":
        access = "on stdio; end stdin or press Ctrl-C to stop"
    else:
        needs = "bearer token required" if token else "no token required"
        if authorization is not None:
            issuers = ", ".join(authorization.authorization_servers)
            needs = f"OAuth access tokens from {issuers} required"
        access = f"at {where} ({needs}); Ctrl-C to stop"
    print(f"mcpkit serve: coding tools for {root} {access}", file=sys.stderr, flush=True)


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
