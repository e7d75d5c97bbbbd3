"""`/api/v1/users/me/tokens`: the caller's own API tokens (any signed-in user).

    GET    /api/v1/users/me/tokens              the caller's tokens (never secrets; paged)
    POST   /api/v1/users/me/tokens              a new token: its secret, once (201); 409 past
                                                `max_tokens_per_user` active tokens
    DELETE /api/v1/users/me/tokens/{token_id}   revoke one (404 for any id not the caller's)

Every query is scoped to the caller's user id in the store itself (`Tokens.revoke(user_id=)`),
so another user's token id answers exactly like an unknown one.
"""

# No `from __future__ import annotations`: `Limit` is made inside `router()` (see admin.py).
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status

from mcpkit.hub.api.auth import Context, CurrentUser
from mcpkit.hub.api.errors import AUTHED, WITH_BODY, responses
from mcpkit.hub.api.paging import page_of
from mcpkit.hub.api.schemas import MAX_ID, TokenCreate, TokenCreated, TokenOut, TokenPage
from mcpkit.hub.api.views import token_out
from mcpkit.hub.db.models import utcnow
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Conflict

PREFIX = "/api/v1/users/me/tokens"
TokenId = Annotated[int, Path(ge=1, le=MAX_ID)]
Cursor = Annotated[str | None, Query(max_length=512, description="from `next_cursor`")]
TOKEN_LINKS = {
    "revoke_my_token": {"operationId": "revoke_my_token",
                        "parameters": {"token_id": "$response.body#/token/id"}},
}


def router(settings: HubSettings) -> APIRouter:
    api = APIRouter(prefix=PREFIX, tags=["users"], responses=responses(*AUTHED))
    Limit = Annotated[
        int | None, Query(ge=1, le=settings.max_page_size,
                          description=f"items per page (default {settings.page_size})"),
    ]

    @api.get("", response_model=TokenPage, summary="The caller's API tokens",
             operation_id="list_my_tokens", responses=responses(422))
    async def list_tokens(
        user: CurrentUser, context: Context, limit: Limit = None, cursor: Cursor = None
    ) -> TokenPage:
        now = utcnow()
        tokens, next_cursor = page_of(
            await context.store.tokens.list(user.id), cursor, limit or settings.page_size)
        return TokenPage(items=[token_out(t, now) for t in tokens], next_cursor=next_cursor)

    @api.post("", response_model=TokenCreated, status_code=status.HTTP_201_CREATED,
              summary="Create an API token for the caller (its secret is in this response "
                      "only)", operation_id="create_my_token",
              responses={**responses(*WITH_BODY, 409), 201: {"links": TOKEN_LINKS}})
    async def create_token(
        body: TokenCreate, user: CurrentUser, context: Context, response: Response
    ) -> TokenCreated:
        now = utcnow()
        active = sum(t.active(now) for t in await context.store.tokens.list(user.id))
        if active >= settings.max_tokens_per_user:
            raise Conflict("tokens", f"you have {active} active tokens, the most a user may "
                           f"have ({settings.max_tokens_per_user}); revoke one first")
        expires = None if body.expires_in_days is None else \
            now + timedelta(days=body.expires_in_days)
        new = await context.store.tokens.create(user.id, name=body.name, expires_at=expires)
        response.headers["Location"] = f"{PREFIX}/{new.record.id}"
        return TokenCreated(token=token_out(new.record, utcnow()), secret=new.secret)

    @api.delete("/{token_id}", response_model=TokenOut,
                summary="Revoke one of the caller's tokens (revoking twice keeps the first "
                        "time)", operation_id="revoke_my_token", responses=responses(404, 422))
    async def revoke_token(token_id: TokenId, user: CurrentUser, context: Context) -> TokenOut:
        token = await context.store.tokens.revoke(token_id, user_id=user.id)
        context.user_changed(user.id)  # this replica stops taking the token at once
        return token_out(token, utcnow())

    return api
