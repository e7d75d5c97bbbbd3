"""What `mcpkit hub serve` tells the operator once it listens: where it is, which database and
data directory it uses (never a password), what the registry holds, and where the docs are.

    mcpkit hub on http://127.0.0.1:8765 (MCP /mcp, API /api/v1, docs /docs, metrics /metrics)
      database:  SQLite file /home/me/.local/share/mcpkit/hub/hub.db
      data dir:  /home/me/.local/share/mcpkit/hub (secret key: secret.key there)
      registry:  2 users, 1 upstream
      upstreams: private addresses refused (--allow-private-upstreams), stdio off (--allow-stdio); …
      API docs:  http://127.0.0.1:8765/docs (served offline)

`startup_summary` only reads (two counts); the caller prints the lines when the port is bound.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from mcpkit.hub.crypto import KEY_FILE_NAME, SECRET_KEY_ENV
from mcpkit.hub.db.engine import DATABASE_URL_ENV, async_url
from mcpkit.hub.settings import HubSettings, without_userinfo

if TYPE_CHECKING:
    from mcpkit.hub.store import Store


async def startup_summary(settings: HubSettings, store: Store, base: str | None = None
                          ) -> list[str]:
    """The start-up lines for a hub about to serve `store` with `settings` at `base`
    (`http://HOST:PORT` as bound; default: the settings' address)."""
    base = base or f"http://{authority(settings)}"
    users = await store.users.count()
    upstreams = await store.upstreams.count()
    lines = [
        f"mcpkit hub on {base} (MCP /mcp, API /api/v1, docs /docs, metrics /metrics)",
        f"  database:  {database_description(settings.resolved_database_url)}",
        f"  data dir:  {settings.data_dir} (secret key: {_key_source()})",
        f"  registry:  {_count(users, 'user')}, {_count(upstreams, 'upstream')}",
        f"  upstreams: {policy(settings)}",
        f"  API docs:  {base}/docs (served offline)",
        f"  OAuth:     issuer {settings.issuer} ({sign_in(settings)})",
    ]
    if users == 0:
        lines.append(f"  no users yet: add one with `{add_user_command(settings)}`, then "
                     "`mcpkit hub token create NAME` with the same options")
    return lines


def database_description(database_url: str) -> str:
    """The database's kind and place, without user or password: `SQLite file /p/hub.db`,
    `PostgreSQL database hub on db.internal:5432`."""
    url = async_url(database_url)
    if url.get_backend_name() == "sqlite":
        return f"SQLite file {url.database}"
    where = f"{url.host or 'localhost'}:{url.port or 5432}"
    return f"PostgreSQL database {url.database or '(default)'} on {where}"


def add_user_command(settings: HubSettings) -> str:
    """`mcpkit hub user add NAME` with the options that reach this hub's database from a shell
    with the same environment (the URL itself is never spelled out: it may hold a password)."""
    command = "mcpkit hub user add NAME"
    if settings.database_url is not None:
        if settings.database_url != os.environ.get(DATABASE_URL_ENV):
            command += " --database-url URL"
        return command
    if settings.data_dir != HubSettings().data_dir:
        command += f" --data-dir {settings.data_dir}"
    return command


def authority(settings: HubSettings) -> str:
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    return f"{host}:{settings.port}"


def policy(settings: HubSettings) -> str:
    """What users may register and how the hub is shared, with the switch for each."""
    private = ("private addresses allowed" if settings.allow_private_upstreams else
               "private addresses refused (--allow-private-upstreams)")
    stdio = "stdio allowed" if settings.allow_stdio else "stdio off (--allow-stdio)"
    redis = (f"shared through redis {without_userinfo(settings.redis_url)}" if settings.redis_url
             else "one process (no --redis-url)")
    return f"{private}, {stdio}; {redis}"


def sign_in(settings: HubSettings) -> str:
    """How users sign in to the hub's authorization server."""
    password = "users sign in with a password: `mcpkit hub user set-password NAME`"
    if settings.oidc_issuer is None:
        return password
    signup = ("a first sign-in makes a user" if settings.oidc_allow_signup else
              "new subjects need `mcpkit hub user link-oidc` (or --oidc-allow-signup)")
    return f"{password}, or through {settings.oidc_issuer}: {signup}"


def _key_source() -> str:
    return f"${SECRET_KEY_ENV}" if os.environ.get(SECRET_KEY_ENV) else f"{KEY_FILE_NAME} there"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
