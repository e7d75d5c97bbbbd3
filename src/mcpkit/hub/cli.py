"""`mcpkit hub …`: the hub's commands (admin ones here; `serve` in serve.py).

    mcpkit hub serve [--host H] [--port P] [--allow-private-upstreams] [--allow-stdio] …
    mcpkit hub user add NAME [--admin]
    mcpkit hub user list
    mcpkit hub user disable NAME [--enable]
    mcpkit hub user set-password NAME [--remove]
    mcpkit hub user link-oidc NAME --subject SUB [--issuer URL]   sign-in through the provider
    mcpkit hub token create USER [--name N] [--expires-days D]   prints the token, once
    mcpkit hub token list USER
    mcpkit hub token revoke TOKEN_ID
    mcpkit hub upstream add|list|get|remove|refresh|tools …     (upstream_cli.py: the REST API)

Every command that opens the database - these and `hub serve` - takes the same storage
settings, added by the one function `add_settings_arguments` (in cli_common.py, which the
command modules share): `--database-url URL` (default: $MCPKIT_HUB_DATABASE_URL, else the
SQLite file hub.db in the data directory) and `--data-dir DIR` (default: $MCPKIT_HUB_DATA,
else ~/.local/share/mcpkit/hub; the generated secret key lives there too), so `hub user add`
and `hub serve` given the same options cannot use different databases. The database is
migrated to the current schema first. A failure is one line on stderr and exit status 2.

Adding a subcommand is one function `add_x_command(commands)` that makes its parser and sets
`run=` (a function of the parsed arguments returning the exit status), appended to
`HUB_COMMANDS`. Nothing of the hub's dependencies is imported until a command runs, so the
mcpkit command works without the `hub` extra.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypeAlias

from mcpkit.hub.cli_common import add_settings_arguments, fail, missing_extra

if TYPE_CHECKING:
    from mcpkit.hub.cli_common import Subcommands
    from mcpkit.hub.settings import HubSettings
    from mcpkit.hub.store import Store, TokenRecord

# registers a subcommand on `hub`'s subparsers
HubCommand: TypeAlias = "Callable[[Subcommands], None]"


def add_parser(sub: Subcommands) -> argparse.ArgumentParser:
    """Add `hub` and its subcommands to the mcpkit command's subparsers."""
    hub = sub.add_parser("hub", help="the MCP hub: users, API tokens, upstream registry")
    commands = hub.add_subparsers(dest="hub_command", required=True, metavar="COMMAND")
    for register in HUB_COMMANDS:
        register(commands)
    return hub


def storage_settings(args: argparse.Namespace) -> HubSettings:
    """The settings an admin command opens the store with: the environment's, then the options
    of `add_settings_arguments` - resolved exactly as `hub serve` resolves them."""
    from mcpkit.hub.settings import HubSettings

    return HubSettings.from_env(database_url=args.database_url, data_dir=args.data_dir)


def with_store(body: Callable[[Store, argparse.Namespace], Awaitable[int]]) -> Callable[
    [argparse.Namespace], int
]:
    """A command's `run`: opens (and migrates) the store, runs `body`, turns errors into one
    line and exit status 2."""

    def run(args: argparse.Namespace) -> int:
        try:
            import anyio

            from mcpkit.hub.crypto import CredentialError
            from mcpkit.hub.settings import SettingsError
            from mcpkit.hub.store import Store, StoreError
        except ImportError as error:
            return missing_extra(error)
        try:
            database_url = storage_settings(args).resolved_database_url
        except SettingsError as error:
            return fail(str(error))

        async def main() -> int:
            async with await Store.open(database_url) as store:
                return await body(store, args)

        try:
            return anyio.run(main)
        except (StoreError, CredentialError) as error:
            return fail(str(error))
        except Exception as error:  # e.g. a malformed URL, an unreachable database
            return fail(f"{type(error).__name__}: {error}")

    return run


# --- users ----------------------------------------------------------------------------------


def add_user_commands(commands: Subcommands) -> None:
    user = commands.add_parser("user", help="manage users")
    actions = user.add_subparsers(dest="user_command", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="add a user")
    add.add_argument("name", help="a slug: lowercase letters, digits, '_' and '-'")
    add.add_argument("--admin", action="store_true", help="may manage users over the API")
    add.set_defaults(run=with_store(_user_add))
    listing = actions.add_parser("list", help="list the users")
    listing.set_defaults(run=with_store(_user_list))
    disable = actions.add_parser("disable", help="disable a user (their tokens stop working)")
    disable.add_argument("name")
    disable.add_argument("--enable", action="store_true", help="enable the user again")
    disable.set_defaults(run=with_store(_user_disable))
    password = actions.add_parser(
        "set-password", help="set a user's password for signing in to the hub (OAuth); read "
        "from a prompt, or the first line of stdin when it is not a terminal - never argv")
    password.add_argument("name")
    password.add_argument("--remove", action="store_true",
                          help="remove the password: the user can no longer sign in with one")
    password.set_defaults(run=with_store(_user_set_password))
    link = actions.add_parser(
        "link-oidc", help="let the subject SUB at the OpenID Connect provider sign in as this "
        "user (what a hub without --oidc-allow-signup needs for each user)")
    link.add_argument("name")
    link.add_argument("--subject", required=True, metavar="SUB",
                      help="the user's subject (`sub`) at the provider: the hub's refusal "
                      "page shows it")
    link.add_argument("--issuer", default=None, metavar="URL",
                      help="the provider (default $MCPKIT_HUB_OIDC_ISSUER)")
    link.set_defaults(run=with_store(_user_link_oidc))
    for parser in (add, listing, disable, password, link):
        add_settings_arguments(parser)


async def _user_add(store: Store, args: argparse.Namespace) -> int:
    user = await store.users.create(args.name, is_admin=args.admin)
    print(f"user {user.name} (id {user.id}{', admin' if user.is_admin else ''}) added")
    return 0


async def _user_list(store: Store, args: argparse.Namespace) -> int:
    rows: list[tuple[str, ...]] = [("ID", "NAME", "ADMIN", "DISABLED", "CREATED")]
    cursor: str | None = None
    while True:
        page = await store.users.list(limit=500, cursor=cursor)
        rows += [
            (str(u.id), u.name, _yes(u.is_admin), _yes(u.disabled), _time(u.created_at))
            for u in page.items
        ]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    _print_table(rows)
    return 0


async def _user_disable(store: Store, args: argparse.Namespace) -> int:
    user = await store.users.get_by_name(args.name)
    user = await store.users.set_disabled(user.id, not args.enable)
    print(f"user {user.name} {'disabled' if user.disabled else 'enabled'}")
    return 0


async def _user_set_password(store: Store, args: argparse.Namespace) -> int:
    from mcpkit.hub.passwords import PasswordRefused, hash_password

    user = await store.users.get_by_name(args.name)
    if args.remove:
        await store.users.set_password_hash(user.id, None)
        print(f"user {user.name}: password removed")
        return 0
    try:
        hashed = hash_password(_read_password())
    except PasswordRefused as error:
        return fail(str(error))
    await store.users.set_password_hash(user.id, hashed)
    print(f"user {user.name}: password set")
    return 0


async def _user_link_oidc(store: Store, args: argparse.Namespace) -> int:
    issuer = args.issuer or storage_settings(args).oidc_issuer
    if not issuer:
        return fail("which provider? give --issuer URL (or set MCPKIT_HUB_OIDC_ISSUER)")
    user = await store.users.get_by_name(args.name)
    await store.oidc.link(issuer, args.subject, user.id)
    print(f"user {user.name}: signs in as subject {args.subject!r} at {issuer}")
    return 0


def _read_password() -> str:
    """The new password: prompted twice on a terminal, else the first line of stdin."""
    import getpass

    if sys.stdin.isatty():
        first = getpass.getpass("new password: ")
        if getpass.getpass("again: ") != first:
            raise _password_refused("the two passwords differ")
        return first
    line = sys.stdin.readline(MAX_PASSWORD_LINE)
    return line.rstrip("\r\n")


def _password_refused(message: str) -> Exception:
    from mcpkit.hub.passwords import PasswordRefused

    return PasswordRefused(message)


MAX_PASSWORD_LINE = 4096
"""What is read of stdin for a password (the bound itself is checked by passwords.py)."""


# --- tokens ---------------------------------------------------------------------------------


def add_token_commands(commands: Subcommands) -> None:
    token = commands.add_parser("token", help="manage API tokens")
    actions = token.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="create a token for a user; printed once")
    create.add_argument("user", help="the user's name")
    create.add_argument("--name", default="default", help="what the token is for")
    create.add_argument(
        "--expires-days", type=_positive_days, default=None, metavar="D",
        help="the token stops working after D days (default: never)",
    )
    create.set_defaults(run=with_store(_token_create))
    listing = actions.add_parser("list", help="list a user's tokens (never their secrets)")
    listing.add_argument("user")
    listing.set_defaults(run=with_store(_token_list))
    revoke = actions.add_parser("revoke", help="revoke a token by its id")
    revoke.add_argument("token_id", type=int, metavar="TOKEN_ID")
    revoke.set_defaults(run=with_store(_token_revoke))
    for parser in (create, listing, revoke):
        add_settings_arguments(parser)


async def _token_create(store: Store, args: argparse.Namespace) -> int:
    from mcpkit.hub.db.models import utcnow

    user = await store.users.get_by_name(args.user)
    expires = None if args.expires_days is None else utcnow() + timedelta(days=args.expires_days)
    new = await store.tokens.create(user.id, name=args.name, expires_at=expires)
    until = f", expires {_time(expires)}" if expires else ""
    print(
        f"token {new.record.id} ({new.record.name}) for {user.name}{until}; "
        "it is shown only now:",
        file=sys.stderr,
    )
    print(new.secret)
    return 0


async def _token_list(store: Store, args: argparse.Namespace) -> int:
    from mcpkit.hub.db.models import utcnow

    user = await store.users.get_by_name(args.user)
    now = utcnow()
    rows: list[tuple[str, ...]] = [
        ("ID", "NAME", "PREFIX", "STATUS", "CREATED", "LAST USED", "EXPIRES")
    ]
    rows += [
        (str(t.id), t.name, t.prefix + "…", _status(t, now), _time(t.created_at),
         _time(t.last_used_at), _time(t.expires_at))
        for t in await store.tokens.list(user.id)
    ]
    _print_table(rows)
    return 0


async def _token_revoke(store: Store, args: argparse.Namespace) -> int:
    token = await store.tokens.revoke(args.token_id)
    print(f"token {token.id} ({token.name}) revoked")
    return 0


def add_serve_commands(commands: Subcommands) -> None:
    from mcpkit.hub.serve import add_serve_command  # imports nothing heavy either

    add_serve_command(commands)


def add_upstream_commands(commands: Subcommands) -> None:
    from mcpkit.hub.upstream_cli import add_upstream_command  # stdlib only: no extra needed

    add_upstream_command(commands)


def add_oauth_commands(commands: Subcommands) -> None:
    oauth = commands.add_parser("oauth", help="the hub's OAuth authorization server")
    actions = oauth.add_subparsers(dest="oauth_command", required=True, metavar="ACTION")
    rotate = actions.add_parser(
        "rotate-key", help="sign new access tokens with a new key; tokens signed with the "
        "previous one keep verifying until they expire, then that key is retired")
    rotate.set_defaults(run=with_store(_oauth_rotate_key))
    add_settings_arguments(rotate)


async def _oauth_rotate_key(store: Store, args: argparse.Namespace) -> int:
    from mcpkit.hub.crypto import load_secret_box
    from mcpkit.hub.oauth.keys import rotate_signing_key

    settings = storage_settings(args)
    kid, retired = await rotate_signing_key(store, load_secret_box(settings.data_dir),
                                            settings)
    print(f"new signing key {kid}; retired: {', '.join(retired) or 'none'}")
    return 0


HUB_COMMANDS: list[HubCommand] = [
    add_serve_commands, add_user_commands, add_token_commands, add_upstream_commands,
    add_oauth_commands,
]


# --- output ---------------------------------------------------------------------------------


def _positive_days(text: str) -> int:
    try:
        days = int(text)
    except ValueError:
        days = 0
    if days <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of days above 0")
    return days


def _status(token: TokenRecord, now: datetime) -> str:
    if token.revoked_at is not None:
        return "revoked"
    if token.expires_at is not None and token.expires_at <= now:
        return "expired"
    return "active"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _time(moment: datetime | None) -> str:
    return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%SZ")


def _print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip())
