"""Who is calling: `Authorization: Bearer <API token>` → the user, via `store.tokens.verify`
(sha256 lookup; unknown, revoked and expired tokens and disabled users all look the same).

    user: UserRecord = Depends(current_user)     401 + `WWW-Authenticate: Bearer` without one
    user: UserRecord = Depends(admin_user)       403 for a valid non-admin token

The token is never logged, echoed or put in an error message; only its holder's id reaches
the logs.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from mcpkit.hub.api.context import HubContext, hub_context
from mcpkit.hub.api.errors import BEARER_CHALLENGE, ApiError
from mcpkit.hub.store import UserRecord

# auto_error=False: a missing or malformed header is ours to answer, in the API's error shape
bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="ApiToken",
    description="An API token (`mcpkit hub token create USER`), as `Authorization: Bearer …`.",
)


async def current_user(
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
    context: Annotated[HubContext, Depends(hub_context)],
) -> UserRecord:
    if credentials is None or not credentials.credentials:
        raise ApiError(401, "an API token is required: Authorization: Bearer <token>",
                       headers={"WWW-Authenticate": BEARER_CHALLENGE})
    user = await context.store.tokens.verify(credentials.credentials)
    if user is None:
        raise ApiError(
            401,
            "the API token is not valid (unknown, revoked or expired, or its user is disabled)",
            headers={"WWW-Authenticate": f'{BEARER_CHALLENGE}, error="invalid_token"'},
        )
    return user


async def admin_user(user: Annotated[UserRecord, Depends(current_user)]) -> UserRecord:
    if not user.is_admin:
        raise ApiError(403, "this needs an admin's token")
    return user


CurrentUser = Annotated[UserRecord, Depends(current_user)]
AdminUser = Annotated[UserRecord, Depends(admin_user)]
Context = Annotated[HubContext, Depends(hub_context)]
