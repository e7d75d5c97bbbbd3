"""`GET /api/v1/users/me`: who the token belongs to (a cheap way to check a token works)."""

from __future__ import annotations

from fastapi import APIRouter

from mcpkit.hub.api.auth import CurrentUser
from mcpkit.hub.api.errors import AUTHED, responses
from mcpkit.hub.api.schemas import UserOut
from mcpkit.hub.api.views import user_out


def router() -> APIRouter:
    api = APIRouter(prefix="/api/v1/users", tags=["users"], responses=responses(*AUTHED))

    @api.get("/me", response_model=UserOut, summary="The caller", operation_id="get_me")
    async def me(user: CurrentUser) -> UserOut:
        return user_out(user)

    return api
