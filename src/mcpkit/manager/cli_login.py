"""`mcpkit mcp login|logout NAME` and `mcpkit mcp auth status [NAME]`: OAuth logins to the
configured URL servers, kept in the token store (`mcpkit.client.token_store`: the OS keyring,
or a 0600 file; the entry's `oauth.store` picks).

    login    authorize now, in the browser (the URL is printed too) through a loopback
             redirect on 127.0.0.1; `--no-browser` for a machine without one: open the
             printed URL anywhere, then paste the address the browser ends on
    logout   forget the server's kept logins (its client registration stays, so the next
             login reuses it)
    status   what is kept: issuer, client id, scopes, expiry, refreshable, the store;
             never a token, with or without --json

The entry's `oauth` table (`oauth_settings`) gives the client id, secret variable, scopes and
callback port; `--scopes` and `--callback-port` replace them for one login.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from mcpkit.auth.discovery import http_form
from mcpkit.errors import McpkitError, UsageError
from mcpkit.manager.cli_config import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError, ConfigFiles
from mcpkit.manager.cli_edit import split_scopes
from mcpkit.manager.cli_render import mask_url
from mcpkit.manager.config import ConfigError, ServerConfig
from mcpkit.manager.oauth_settings import OAuthSettings, check_callback_port

if TYPE_CHECKING:
    from mcpkit.client.oauth_logout import LogoutReport
    from mcpkit.client.token_records import StoredGrant
    from mcpkit.client.token_store import PersistentTokenStore

T = TypeVar("T")


# --- login, logout --------------------------------------------------------------------------


def run_login(args: argparse.Namespace) -> int:
    config = _oauth_server(args.name)
    settings = config.oauth or OAuthSettings()
    if settings.grant == "client_credentials":
        raise CliError(f"{config.name} uses the client_credentials grant: the client gets its "
                       "own tokens, no one logs in",
                       hint=f"`mcpkit mcp test {config.name}` connects with them")
    port = settings.callback_port
    if args.callback_port is not None:
        port = _checked(lambda: check_callback_port(args.callback_port, "--callback-port"))
    scopes = split_scopes(args.scopes) if args.scopes is not None else None
    url = config.url or ""

    async def login() -> tuple[str, list[StoredGrant]]:
        from mcpkit.client.oauth_loopback import LoopbackRedirect

        store = open_store(settings.store)
        redirect = LoopbackRedirect(port=port, open_browser=not args.no_browser,
                                    paste=args.no_browser, timeout_s=args.timeout)
        oauth = settings.build(environ=ConfigFiles().environ, redirect=redirect, store=store,
                               redirect_uri=settings.redirect_uri(port), scopes=scopes)
        await oauth.login(url)
        return _store_text(store), await _kept(store, url)

    store_text, grants = _run(login)
    if not grants:  # the store did not keep it: say so rather than claim a login
        raise CliError(f"logged in to {config.name}, but {store_text} kept no login for "
                       f"{mask_url(url)}", code=EXIT_FAILED)
    grant = grants[0]
    print(f"logged in to {config.name} at {grant.issuer} as client {grant.client_id}")
    print(f"  scopes:  {' '.join(grant.scopes) or '-'}")
    print(f"  expires: {_expiry_text(grant.tokens.expires_at)}"
          + ("; refreshed when it does" if grant.tokens.refresh_token else ""))
    print(f"  kept in: {store_text}")
    return EXIT_OK


def run_logout(args: argparse.Namespace) -> int:
    config = _oauth_server(args.name)
    settings = config.oauth or OAuthSettings()
    url = config.url or ""

    async def logout() -> tuple[str, LogoutReport]:
        from mcpkit.client.oauth_logout import logout

        store = open_store(settings.store)
        return _store_text(store), await logout(store, http_form(url))

    store_text, report = _run(logout)
    if not report.removed:
        print(f"{config.name} was not logged in ({store_text} keeps no login for it)")
        return EXIT_OK
    print(f"logged out of {config.name}: removed {report.removed} login"
          f"{'' if report.removed == 1 else 's'} from {store_text}")
    if report.revoked:
        print(f"  revoked at the authorization server: {report.revoked} token"
              f"{'' if report.revoked == 1 else 's'}")
    for reason in report.not_revoked:  # the local login is gone all the same
        print(f"  not revoked: {reason}")
    return EXIT_OK


# --- auth status ----------------------------------------------------------------------------


def run_status(args: argparse.Namespace) -> int:
    files = ConfigFiles()
    if args.name is not None:
        configs = [_oauth_server(args.name, files)]
    else:
        configs = [entry.config for entry in files.entries().values()
                   if entry.config is not None and entry.config.type != "stdio"
                   and not entry.config.static_credentials]

    async def status() -> list[dict[str, Any]]:
        rows = []
        stores: dict[str, PersistentTokenStore] = {}
        for config in configs:
            kind = (config.oauth or OAuthSettings()).store
            if kind not in stores:
                stores[kind] = open_store(kind)
            rows.append(_status_row(config, stores[kind], await _kept(stores[kind],
                                                                      config.url or "")))
        return rows

    rows = _run(status)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return EXIT_OK
    if not rows:
        print("no URL servers that log in are configured")
        return EXIT_OK
    for row in rows:
        _print_status(row)
    return EXIT_OK


def _status_row(config: ServerConfig, store: PersistentTokenStore,
                grants: list[StoredGrant]) -> dict[str, Any]:
    """What `auth status` says of one server: no token, no secret, in any form."""
    settings = config.oauth or OAuthSettings()
    return {
        "name": config.name, "url": mask_url(config.url or ""),
        "logged_in": bool(grants),
        "store": {"kind": store.kind, "location": store.location},
        "configured": settings.to_table(),
        "logins": [_login_row(grant) for grant in grants],
    }


def _login_row(grant: StoredGrant) -> dict[str, Any]:
    """The grant's `summary()` (no secret: whether there is a refresh token, not the token),
    its expiry as a date, and whether that has passed."""
    row = grant.summary()
    row["refreshable"] = row.pop("refresh_token")
    expires_at = grant.tokens.expires_at
    row["expires_at"] = _iso(expires_at)
    row["expired"] = expires_at is not None and expires_at <= time.time()
    return row


def _print_status(row: dict[str, Any]) -> None:
    where = f"{row['store']['kind']} ({row['store']['location']})"
    if not row["logins"]:
        print(f"{row['name']}: not logged in  ({row['url']}; store: {where})")
        print(f"  log in: mcpkit mcp login {row['name']}")
        return
    print(f"{row['name']}: logged in  ({row['url']})")
    for login in row["logins"]:
        expires = login["expires_at"] or "not said"
        state = " (expired)" if login["expired"] else ""
        refresh = "yes" if login["refreshable"] else "no (log in again when it expires)"
        for label, value in (("issuer", login["issuer"]), ("client id", login["client_id"]),
                             ("scopes", " ".join(login["scopes"]) or "-"),
                             ("expires", f"{expires}{state}"), ("refreshable", refresh),
                             ("store", where)):
            print(f"  {label + ':':<13}{value}")


# --- shared ---------------------------------------------------------------------------------


def _oauth_server(name: str, files: ConfigFiles | None = None) -> ServerConfig:
    """The configured server `name`, interpolated, if it is one that logs in with OAuth."""
    from mcpkit.manager.cli_targets import prepared

    files = files or ConfigFiles()
    entry = files.entry(name)
    config = prepared(files, entry, timeout=None)
    if config.type == "stdio":
        raise CliError(f"{name} is a command (stdio) server: it takes its credentials "
                       "through \"env\", not a login")
    if config.static_credentials:
        given = ("bearer_token_env_var" if config.bearer_token_env_var
                 else "an Authorization header")
        raise CliError(f"{name} sends a token as it is ({given}); it does not log in",
                       hint=f"to log in with OAuth instead, remove the token from its entry "
                            f"(`mcpkit mcp get {name}` shows where it is)")
    return config


def open_store(kind: str) -> PersistentTokenStore:
    from mcpkit.client.token_store import open_token_store

    return open_token_store(kind)


async def _kept(store: PersistentTokenStore, url: str) -> list[StoredGrant]:
    return await store.grants(http_form(url))


def _store_text(store: PersistentTokenStore) -> str:
    return f"the {store.kind} store ({store.location})"


def _run(work: Callable[[], Awaitable[T]]) -> T:
    """Run `work`; mcpkit's own errors become one line (`mcpkit: error: …`)."""
    try:
        return anyio.run(work)
    except ConfigError:
        raise
    except McpkitError as exc:
        code = EXIT_USAGE if isinstance(exc, UsageError) else EXIT_FAILED
        raise CliError(str(exc) or type(exc).__name__, code=code) from exc


def _checked(check: Callable[[], T]) -> T:
    try:
        return check()
    except ConfigError as exc:
        raise CliError(str(exc)) from exc


def _iso(moment: float | None) -> str | None:
    if moment is None:
        return None
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds")


def _expiry_text(moment: float | None) -> str:
    if moment is None:
        return "not said by the server"
    left = moment - time.time()
    if left <= 0:
        return f"{_iso(moment)} (expired)"
    minutes = round(left / 60)
    return f"{_iso(moment)} (in {minutes} min)" if minutes < 120 else \
        f"{_iso(moment)} (in {left / 3600:.0f} h)"
