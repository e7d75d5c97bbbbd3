"""When a server that did not start needs a login (`needs_auth`), not a fix.

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

import shlex

from mcpkit.manager.config import ServerConfig

MAX_CAUSES = 20
"""How far down an exception's causes the search goes (a cycle cannot loop)."""


def login_command(name: str) -> str:
    """What the user runs to log in to server `name`."""
    return shlex.join(["mcpkit", "mcp", "login", name])


def needs_login(config: ServerConfig, failure: BaseException | None) -> bool:
    """Whether `failure` (why the server did not start) asks for `mcpkit mcp login`."""
    if config.type == "stdio" or config.static_credentials or failure is None:
        return False
    from mcpkit.auth.challenge import parse_bearer_challenge
    from mcpkit.auth.errors import AuthorizationFailed, AuthorizationNotConfigured
    from mcpkit.transports.client.base import HttpStatusError

    for cause in _causes(failure):
        if isinstance(cause, AuthorizationFailed):
            return isinstance(cause.reason, AuthorizationNotConfigured)
        if isinstance(cause, HttpStatusError) and cause.status == 401:
            if config.oauth is not None:
                return True
            value = next((v for k, v in cause.headers.items()
                          if k.lower() == "www-authenticate"), None)
            challenge = parse_bearer_challenge(value)
            return challenge is not None and challenge.resource_metadata is not None
    return False


def _causes(failure: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current: BaseException | None = failure
    while current is not None and len(found) < MAX_CAUSES and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found
