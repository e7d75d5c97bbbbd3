"""`/api/v1/admin/users`: user and token management, for admins only (403 otherwise).

    GET    /api/v1/admin/users                              list (paged)
    POST   /api/v1/admin/users                              add (201)
    GET    /api/v1/admin/users/{user_id}                    one
    PATCH  /api/v1/admin/users/{user_id}                    disable / enable, admin or not
    GET    /api/v1/admin/users/{user_id}/tokens             the user's tokens (never secrets)
    POST   /api/v1/admin/users/{user_id}/tokens             a new token: its secret, once (201)
    DELETE /api/v1/admin/users/{user_id}/tokens/{token_id}  revoke (the token, revoked)

An admin sees users and tokens, never another user's upstreams: those routes stay scoped to
the caller.
"""

# No `from __future__ import annotations`: the routes' parameter types include `Limit`, made
# inside `router()` from the settings, which FastAPI could not resolve from a string.
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status

from mcpkit.hub.api.auth import AdminUser, Context
from mcpkit.hub.api.errors import AUTHED, WITH_BODY, responses
from mcpkit.hub.api.paging import page_of
from mcpkit.hub.api.schemas import (
    MAX_ID,
    TokenCreate,
    TokenCreated,
    TokenOut,
    TokenPage,
    UserCreate,
    UserOut,
    UserPage,
    UserUpdate,
)
from mcpkit.hub.api.views import token_out, user_out
from mcpkit.hub.db.models import utcnow
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Invalid
from mcpkit.hub.store import validation as check
from mcpkit.hub.store._paging import decode_cursor

PREFIX = "/api/v1/admin/users"
UserId = Annotated[int, Path(ge=1, le=MAX_ID)]
TokenId = Annotated[int, Path(ge=1, le=MAX_ID)]
Cursor = Annotated[str | None, Query(max_length=512, description="from `next_cursor`")]
# OpenAPI links from a new user / token to what can be done with it
USER_LINKS = {
    name: {"operationId": name, "parameters": {"user_id": "$response.body#/id"}}
    for name in ("get_user", "update_user", "list_user_tokens", "create_user_token")
}
TOKEN_LINKS = {
    "revoke_user_token": {
        "operationId": "revoke_user_token",
        "parameters": {"user_id": "$response.body#/token/user_id",
                       "token_id": "$response.body#/token/id"},
    },
}


def router(settings: HubSettings) -> APIRouter:
    api = APIRouter(prefix=PREFIX, tags=["admin"], responses=responses(*AUTHED, 403))
    Limit = Annotated[
        int | None, Query(ge=1, le=settings.max_page_size,
                          description=f"items per page (default {settings.page_size})"),
    ]

    @api.get("", response_model=UserPage, summary="List users", operation_id="list_users",
             responses=responses(422))
    async def list_users(
        _admin: AdminUser, context: Context, limit: Limit = None, cursor: Cursor = None
    ) -> UserPage:
        if cursor is not None:
            decoded = decode_cursor(cursor)
            if decoded is None or not check.NAME_RE.fullmatch(decoded):
                raise Invalid("cursor", "not a cursor this listing gave")
        page = await context.store.users.list(limit=limit or settings.page_size, cursor=cursor)
        return UserPage(items=[user_out(u) for u in page.items], next_cursor=page.next_cursor)

    @api.post("", response_model=UserOut, status_code=status.HTTP_201_CREATED,
              summary="Add a user", operation_id="create_user",
              responses={**responses(*WITH_BODY, 409), 201: {"links": USER_LINKS}})
    async def create_user(
        body: UserCreate, _admin: AdminUser, context: Context, response: Response
    ) -> UserOut:
        user = await context.store.users.create(body.name, is_admin=body.is_admin)
        response.headers["Location"] = f"{PREFIX}/{user.id}"
        return user_out(user)

    @api.get("/{user_id}", response_model=UserOut, summary="One user", operation_id="get_user",
             responses=responses(404, 422))
    async def get_user(user_id: UserId, _admin: AdminUser, context: Context) -> UserOut:
        return user_out(await context.store.users.get(user_id))

    @api.patch("/{user_id}", response_model=UserOut, summary="Disable or enable a user, "
               "make or unmake an admin", operation_id="update_user",
               responses=responses(*WITH_BODY, 404))
    async def update_user(
        user_id: UserId, body: UserUpdate, admin: AdminUser, context: Context
    ) -> UserOut:
        user = await context.store.users.get(user_id)
        for name in ("disabled", "is_admin"):
            if name in body.model_fields_set and getattr(body, name) is None:
                raise Invalid(name, "must not be null (leave it out to keep it)")
        # an admin cannot lock themselves out (and so cannot remove the last admin that way)
        if user_id == admin.id and body.disabled:
            raise Invalid("disabled", "an admin cannot disable themselves: ask another admin")
        if user_id == admin.id and body.is_admin is False:
            raise Invalid("is_admin", "an admin cannot drop their own admin role: ask another "
                                      "admin")
        if body.disabled is not None:
            user = await context.store.users.set_disabled(user_id, body.disabled)
        if body.is_admin is not None:
            user = await context.store.users.set_admin(user_id, body.is_admin)
        context.user_changed(user_id)  # this replica's caches of the user: at once
        return user_out(user)

    @api.get("/{user_id}/tokens", response_model=TokenPage, summary="A user's tokens",
             operation_id="list_user_tokens", responses=responses(404, 422))
    async def list_tokens(
        user_id: UserId, _admin: AdminUser, context: Context,
        limit: Limit = None, cursor: Cursor = None,
    ) -> TokenPage:
        await context.store.users.get(user_id)
        now = utcnow()
        tokens, next_cursor = page_of(
            await context.store.tokens.list(user_id), cursor, limit or settings.page_size)
        return TokenPage(items=[token_out(t, now) for t in tokens], next_cursor=next_cursor)

    @api.post("/{user_id}/tokens", response_model=TokenCreated,
              status_code=status.HTTP_201_CREATED,
              summary="Create a token for a user (its secret is in this response only)",
              operation_id="create_user_token",
              responses={**responses(*WITH_BODY, 404), 201: {"links": TOKEN_LINKS}})
    async def create_token(
        user_id: UserId, body: TokenCreate, _admin: AdminUser, context: Context
    ) -> TokenCreated:
        await context.store.users.get(user_id)
        expires = None
        if body.expires_in_days is not None:
            expires = utcnow() + timedelta(days=body.expires_in_days)
        new = await context.store.tokens.create(user_id, name=body.name, expires_at=expires)
        return TokenCreated(token=token_out(new.record, utcnow()), secret=new.secret)

    @api.delete("/{user_id}/tokens/{token_id}", response_model=TokenOut,
                summary="Revoke a token (revoking twice keeps the first time)",
                operation_id="revoke_user_token", responses=responses(404, 422))
    async def revoke_token(
        user_id: UserId, token_id: TokenId, _admin: AdminUser, context: Context
    ) -> TokenOut:
        await context.store.users.get(user_id)
        token = await context.store.tokens.revoke(token_id, user_id=user_id)
        context.user_changed(user_id)  # this replica stops taking the token at once
        return token_out(token, utcnow())

    return api
