"""Logins of the manager's servers: when a server that did not start needs one
(`needs_auth`), not a fix; and how a server is authorized when it starts (`server_auth`).

A remote server needs a login when it asked for OAuth and had no usable token:

- it answered 401 with an OAuth challenge (`WWW-Authenticate: Bearer resource_metadata=…`,
  RFC 9728), or answered 401 and its entry has an `oauth` table;
- or the client's OAuth could not get a token without a user (no login kept, or the kept
  one can no longer be refreshed).

A 401 to a token given as it is (`bearer_token_env_var`, an `Authorization` header) is the
token being refused, and a bare `Bearer` challenge asks for a token, not for a login: both
stay failures, whose fix `diagnose` gives.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING

from mcpkit.auth.discovery import http_form
from mcpkit.errors import McpkitError
from mcpkit.manager.config import ServerConfig

if TYPE_CHECKING:
    from mcpkit.client.oauth import OAuth
    from mcpkit.client.oauth_machine import MachineAuth

log = logging.getLogger(__name__)


def login_command(name: str) -> str:
    """What the user runs to log in to server `name`."""
    return shlex.join(["mcpkit", "mcp", "login", name])


def needs_login(config: ServerConfig, failure: BaseException | None) -> bool:
    """Whether `failure` (why the server did not start) asks for `mcpkit mcp login`."""
    if config.type == "stdio" or config.static_credentials or failure is None:
        return False
    if config.oauth is not None and config.oauth.grant == "client_credentials":
        return False  # the client gets its own tokens: a refusal is a failure to fix
    from mcpkit.client.auth_refusal import authorization_refusal

    refusal = authorization_refusal(failure)
    if refusal is None:
        return False
    if refusal.status is None:  # the client's OAuth failed before asking the server
        return refusal.login_needed
    return config.oauth is not None or refusal.oauth_challenge


async def server_auth(config: ServerConfig, environ: Mapping[str, str]
                      ) -> OAuth | MachineAuth | None:
    """How the manager authorizes at a URL server with no token of its own: the
    client_credentials grant of its `oauth` table, or an `OAuth` with the login kept for it
    (`mcpkit mcp login`), refreshed as needed; None when there is neither. The `OAuth` has no
    redirect: when the kept login can no longer be used, the server is `needs_auth`; nothing
    prompts and nothing is registered. A store that cannot be read (or a secret variable that
    is not set) is logged and treated as no login: the server may start without one."""
    if config.type == "stdio" or config.static_credentials or config.url is None:
        return None
    from mcpkit.client.token_store import open_token_store
    from mcpkit.manager.oauth_settings import OAuthSettings

    settings = config.oauth or OAuthSettings()
    try:
        if settings.grant == "client_credentials":
            return settings.build_machine(environ=environ)
        store = open_token_store(settings.store)
        if not await store.grants(http_form(config.url)):
            return None
        return settings.build(environ=environ, store=store)
    except McpkitError as exc:
        log.warning("the login kept for MCP server %s cannot be used: %s", config.name, exc)
        return None
