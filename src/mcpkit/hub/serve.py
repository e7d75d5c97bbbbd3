"""`mcpkit hub serve`: run the hub (REST API, docs, health endpoints, metrics, the upstream
health checker) with uvicorn.

    mcpkit hub serve [--host 127.0.0.1] [--port 8765] [--database-url URL] [--data-dir DIR]
                     [--allow-private-upstreams] [--allow-stdio] [--redis-url URL]
                     [--oidc-issuer URL --oidc-client-id ID --oidc-client-secret-env VAR
                      [--oidc-allow-signup] [--oidc-scopes S]] [--log-level info]

Binds 127.0.0.1 unless told otherwise: exposing the hub is a decision (put TLS in front).
The port is bound first (`transports/server/http/listen.py`: a port in use is one line on stderr
and exit status 2); then the store is opened - and migrated - and so is Redis when
`--redis-url` is given, before anything is served, so a bad database URL or an unreachable
database or Redis is one line and exit status 2 too, not a half-started server. The
"mcpkit hub on URL" line comes once the hub answers.
SIGTERM / SIGINT shut down gracefully: no new connections, in-flight requests get up to
`shutdown_grace_s` to finish, then the lifespan closes what it opened, and the exit status
is 0 (as for `mcpkit serve` and `mcpkit example`).

The secret key for upstream credentials comes from $MCPKIT_HUB_SECRET_KEY, else the key file
in the data directory (generated on first start, mode 0600).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import logging
import socket
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcpkit.hub.cli_common import EXIT_ERROR, add_settings_arguments, fail, missing_extra

if TYPE_CHECKING:
    from mcpkit.hub.cli_common import Subcommands
    from mcpkit.hub.settings import HubSettings

log = logging.getLogger(__name__)


DESCRIPTION = """\
Run the hub: one MCP endpoint (/mcp) in front of the upstream MCP servers its users
register, with a REST API to manage them (/api/v1, documented at /docs), health endpoints
(/healthz, /readyz) and Prometheus metrics (/metrics). Make users and their API tokens with
`mcpkit hub user` and `mcpkit hub token`. It listens on 127.0.0.1 unless told otherwise (to
expose it, put TLS in front). The URL is printed once the port accepts connections; Ctrl-C
(or SIGTERM) stops it gracefully. Most settings can also come from the environment
(MCPKIT_HUB_HOST, MCPKIT_HUB_PORT, MCPKIT_HUB_DATA, …: see the README); an option wins."""

EPILOG = """\
examples:
  mcpkit hub serve                                  # http://127.0.0.1:8765
  mcpkit hub serve --data-dir ./hub --port 9000     # the database and key in ./hub
  mcpkit hub serve --database-url postgresql+asyncpg://hub@db/hub --redis-url redis://cache"""


def add_serve_command(commands: Subcommands) -> None:
    serve = commands.add_parser("serve", help="run the hub: MCP at /mcp, REST API (/api/v1, /docs)",
                                description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("--host", default=None, help="the address to listen on (default "
                       "$MCPKIT_HUB_HOST, else 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="the port to listen on; 0 picks a "
                       "free one (default $MCPKIT_HUB_PORT, else 8765)")
    add_settings_arguments(serve)
    serve.add_argument(
        "--allow-private-upstreams", action="store_true",
        help="let upstreams be on loopback/private/link-local addresses (tests, a trusted "
             "network); refused by default (SSRF)",
    )
    serve.add_argument("--allow-stdio", action="store_true",
                       help="let users register stdio upstreams (commands the hub runs); "
                       "off by default")
    serve.add_argument("--redis-url", default=None, metavar="URL",
                       help="Redis shared by replicas (default: $MCPKIT_HUB_REDIS_URL, else "
                       "none: one process)")
    serve.add_argument("--allowed-host", dest="allowed_hosts", action="append", default=None,
                       metavar="HOST", help="a Host /mcp accepts besides loopback (the name "
                       "the hub is reached by; repeat for more; default: loopback only)")
    serve.add_argument("--allowed-origin", dest="allowed_origins", action="append",
                       default=None, metavar="ORIGIN",
                       help="a browser Origin /mcp accepts (repeat for more; default: "
                       "loopback and the allowed hosts only)")
    serve.add_argument("--max-connections", type=int, default=None, metavar="N",
                       help="open connections at once (default 1000, fitted to the file "
                       "descriptor limit); past it the longest-waiting idle or slow one is "
                       "closed, else 503")
    serve.add_argument("--header-timeout", dest="header_timeout_s", type=float, default=None,
                       metavar="S", help="seconds a request's headers may take (default 10)")
    serve.add_argument("--body-timeout", dest="body_timeout_s", type=float, default=None,
                       metavar="S", help="seconds a request's body may take (default 30)")
    serve.add_argument("--public-url", default=None, metavar="URL",
                       help="the hub's URL as clients reach it: its OAuth issuer (default "
                       "$MCPKIT_HUB_PUBLIC_URL, else http://HOST:PORT)")
    serve.add_argument("--oauth-key-max-age", dest="oauth_key_max_age_s", type=float,
                       default=None, metavar="S",
                       help="seconds the access-token signing key signs before it is replaced "
                       "(default $MCPKIT_HUB_OAUTH_KEY_MAX_AGE_S, else 30 days)")
    _add_oidc_arguments(serve)
    serve.add_argument("--upstream-client-metadata-url", default=None, metavar="URL",
                       help="the Client ID Metadata Document (https) the hub presents to "
                       "OAuth upstreams' authorization servers that support it (default "
                       "$MCPKIT_HUB_UPSTREAM_CLIENT_METADATA_URL, else dynamic client "
                       "registration); the hub serves it at PUBLIC_URL/oauth/upstream/"
                       "client.json")
    serve.add_argument("--log-level", default=None,
                       choices=("critical", "error", "warning", "info", "debug"),
                       help="what the log shows (default info)")
    serve.set_defaults(run=run)


def _add_oidc_arguments(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--oidc-issuer", default=None, metavar="URL",
                       help="let users sign in with this OpenID Connect provider (default "
                       "$MCPKIT_HUB_OIDC_ISSUER, else passwords only)")
    serve.add_argument("--oidc-client-id", default=None, metavar="ID",
                       help="the hub's client id at the provider (default "
                       "$MCPKIT_HUB_OIDC_CLIENT_ID)")
    serve.add_argument("--oidc-client-secret-env", default=None, metavar="VAR",
                       help="the environment variable holding the client secret (never the "
                       "secret itself on the command line; default "
                       "$MCPKIT_HUB_OIDC_CLIENT_SECRET_ENV)")
    serve.add_argument("--oidc-allow-signup", action="store_true",
                       help="a first sign-in through the provider creates a hub user (off: an "
                       "unknown subject is refused until an admin links it)")
    serve.add_argument("--oidc-scopes", default=None, metavar="SCOPES",
                       help='the scopes asked of the provider (default "openid profile email")')
    serve.add_argument("--oidc-provider-name", default=None, metavar="NAME",
                       help='the name on the "Sign in with NAME" button (default: the '
                       "issuer's host)")


def run(args: argparse.Namespace) -> int:
    try:
        from mcpkit.hub.settings import HubSettings, SettingsError

        settings = HubSettings.from_args(args)
        if settings.oidc_issuer is not None:
            settings.oidc_client_secret()  # an unset variable fails here, not at a sign-in
    except SettingsError as error:
        return fail(str(error))
    try:
        import uvicorn  # noqa: F401 - checked here for the hint below

        from mcpkit.hub.api import create_app  # noqa: F401
    except ImportError as error:
        return missing_extra(error)
    logging.basicConfig(level=settings.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _quiet_start_up_chatter(settings.log_level)
    try:
        return _run_loop(settings)
    except KeyboardInterrupt:
        return 0


STARTUP_CHATTER = ("alembic.runtime.migration",)
"""Loggers whose INFO lines at start (which migration context, DDL mode) say nothing an
operator acts on; the start-up summary says what matters. Shown again at --log-level debug."""


def _quiet_start_up_chatter(level: str) -> None:
    if level != "debug":
        for name in STARTUP_CHATTER:
            logging.getLogger(name).setLevel(logging.WARNING)


def _run_loop(settings: HubSettings) -> int:
    factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop
    try:
        import uvloop

        factory = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvicorn[standard] brings it
        pass
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_serve(settings))


async def _serve(settings: HubSettings) -> int:
    from mcpkit.transports.server.http.listen import ListenError, listen

    try:  # first: a port in use is the one line, before the store logs its migrations
        sockets = listen(settings.host, settings.port)
    except ListenError as error:
        return fail(error.message)
    try:
        return await _serve_on(sockets, settings)
    finally:
        for sock in sockets:
            sock.close()


async def _serve_on(sockets: list[socket.socket], settings: HubSettings) -> int:
    from mcpkit.hub.api import create_app
    from mcpkit.hub.crypto import CredentialError, load_secret_box
    from mcpkit.hub.health import health_checker
    from mcpkit.hub.router import McpEndpoint
    from mcpkit.hub.shared import SharedStateUnavailable, open_redis
    from mcpkit.hub.startup import startup_summary
    from mcpkit.hub.store import Store, StoreError
    from mcpkit.transports.server.http.connections import ConnectionLimits
    from mcpkit.transports.server.http.listen import listening_url
    from mcpkit.transports.server.http.serve import uvicorn_config

    try:
        box = load_secret_box(settings.data_dir)
        store = await Store.open(settings.resolved_database_url, box,
                                 allow_stdio=settings.allow_stdio)
    except (StoreError, CredentialError, OSError) as error:
        return fail(str(error))
    redis = None
    try:
        if settings.redis_url is not None:
            redis = await open_redis(settings.redis_url)
    except SharedStateUnavailable as error:
        await store.close()
        return fail(str(error))
    url = listening_url(settings.host, sockets)
    if settings.public_url is None:  # the OAuth issuer: the address as bound (--port 0 too)
        settings = dataclasses.replace(settings, public_url=url)
    try:
        endpoint = McpEndpoint()
        app = create_app(settings, store, box, redis=redis,
                         components=[health_checker, endpoint.component],
                         mounts={"/mcp": endpoint})
        config = uvicorn_config(
            app,
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level,
            timeout_graceful_shutdown=int(settings.shutdown_grace_s),
            limits=ConnectionLimits(settings.max_connections, settings.header_timeout_s,
                                    settings.body_timeout_s),
        )
        summary = await startup_summary(settings, store, url)
        # On a stop signal the MCP streams end first, so the graceful shutdown waits only
        # for requests in flight, not for every connected client's SSE stream.
        server = graceful_server_class()(config, on_ready=lambda: _say_ready(summary),
                                         on_stop=endpoint.shutdown)
        try:
            await server.serve(sockets=sockets)
        except SystemExit:  # the app's start-up failed (uvicorn logged why)
            return EXIT_ERROR
        return 0 if server.started else EXIT_ERROR
    finally:
        await _close(store, redis)


async def _close(store: Any, redis: Any) -> None:
    if redis is not None:
        await redis.aclose()
    await store.close()


def _say_ready(summary: list[str]) -> None:
    """The start-up summary, once the hub answers: the first line says how to stop it."""
    first, *rest = summary
    print("\n".join([f"{first}; Ctrl-C to stop", *rest]), file=sys.stderr, flush=True)


GC_THRESHOLDS = (10_000, 20, 20)
"""The collector's thresholds while serving (CPython's defaults: 700, 10, 10). A forwarded
call allocates a few hundred container objects that nearly all die young (freed by their
reference counts, not the collector); the default ran a young collection every few calls,
each walking what the calls in flight hold: about 25 µs of collector time per forwarded
call, against about 1 µs with these (hub_bench, 32 in flight). Cycles still get collected,
just in fewer, larger rounds."""


def graceful_server_class() -> Any:
    from mcpkit.transports.server.http.serve import stopping_server_class

    class Server(stopping_server_class()):  # type: ignore[misc]
        """The server every mcpkit command runs (`stopping_server_class`: `on_ready` once
        serving; a stop signal ends `serve()` normally once the graceful shutdown is done, so
        the store is closed and a clean stop exits 0), except that what start-up built is
        frozen out of the garbage collector's way and the collector runs less often
        (`GC_THRESHOLDS`)."""

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            # Everything start-up made (modules, the app, FastAPI's models, the store) lives
            # as long as the process. Moved out of the collector's generations, it is not
            # traversed again by every full collection: measured 0.82 -> 0.32 s of GC over
            # ~6,000 forwarded calls (hub_bench). Per process, never in tests (a frozen
            # object is never freed).
            gc.freeze()
            gc.set_threshold(*GC_THRESHOLDS)

    return Server
