"""Who is calling: `Authorization: Bearer <API token>` → the user, via `store.tokens.verify`
(sha256 lookup; unknown, revoked and expired tokens and disabled users all look the same);
or a hub OAuth access token minted for the resource `<public url>/api/v1` (the web console
signs in so), checked by oauth/keys.py - never one minted for /mcp.

    user: UserRecord = Depends(current_user)     401 + `WWW-Authenticate: Bearer` without one
    user: UserRecord = Depends(admin_user)       403 for a valid non-admin token

The token is never logged, echoed or put in an error message; only its holder's id reaches
the logs. Wrong tokens are counted per client address (`context.auth_failures`, shared with
/mcp): an address past its budget gets 429 with `Retry-After`, before its token is looked at.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from mcpkit.hub.api.context import HubContext, hub_context
from mcpkit.hub.api.errors import BEARER_CHALLENGE, ApiError
from mcpkit.hub.ratelimit import retry_after
from mcpkit.hub.store import UserRecord
from mcpkit.transports.server.http.peers import peer_key

# auto_error=False: a missing or malformed header is ours to answer, in the API's error shape
bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="ApiToken",
    description="An API token (`mcpkit hub token create USER`), as `Authorization: Bearer …`.",
)


async def current_user(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
    context: Annotated[HubContext, Depends(hub_context)],
) -> UserRecord:
    peer = peer_key(request.scope)
    wait = context.auth_failures.blocked(peer)
    if wait is not None:
        seconds = retry_after(wait)
        raise ApiError(429, f"too many requests with a missing or wrong API token from this "
                       f"address: try again in {seconds} s", code="rate_limited",
                       headers={"Retry-After": str(seconds)})
    if credentials is None or not credentials.credentials:
        context.auth_failures.failed(peer)
        raise ApiError(401, "an API token is required: Authorization: Bearer <token>",
                       headers={"WWW-Authenticate": BEARER_CHALLENGE})
    token = credentials.credentials
    # an API token ("mcphub_" + base64url) never has the two dots of a JWT: one lookup each
    if token.count(".") == 2:
        user = await _oauth_user(context, token)
    else:
        user = await context.store.tokens.verify(token)
    if user is None:
        context.auth_failures.failed(peer)
        raise ApiError(
            401,
            "the API token is not valid (unknown, revoked or expired, or its user is disabled)",
            headers={"WWW-Authenticate": f'{BEARER_CHALLENGE}, error="invalid_token"'},
        )
    return user


async def _oauth_user(context: HubContext, token: str) -> UserRecord | None:
    """The user of a hub access token minted for the REST API (the web console's), by the
    hub's own JWT checks (oauth/keys.py: signature, `aud` = /api/v1, expiry, user enabled,
    login not revoked). A token for /mcp is refused here, as /mcp refuses this one; so is a
    DPoP-bound one (the API checks no proofs)."""
    if context.oauth is None:
        return None
    bound = await context.oauth.tokens.bound_user(token, resource=context.settings.api_url)
    if bound is None or bound[1] is not None:
        return None
    return bound[0]


async def admin_user(user: Annotated[UserRecord, Depends(current_user)]) -> UserRecord:
    if not user.is_admin:
        raise ApiError(403, "this needs an admin's token")
    return user


CurrentUser = Annotated[UserRecord, Depends(current_user)]
AdminUser = Annotated[UserRecord, Depends(admin_user)]
Context = Annotated[HubContext, Depends(hub_context)]
