"""The operators' user pages, through the admin REST API with the signed-in user's token (a
non-admin gets the API's 403 whatever URL they type):

    GET  /console/admin/users                             users, a page at a time; the add form
    POST /console/admin/users                             add a user
    POST /console/admin/users/{id}/disabled               disable (value=1) or enable (value=0)
    POST /console/admin/users/{id}/admin                  make (value=1) or unmake (0) an admin
    GET  /console/admin/users/{id}/tokens                 the user's tokens
    POST /console/admin/users/{id}/tokens/{token}/revoke  revoke one

A POST answers with a redirect and a notice (post/redirect/get), or the list again with the
API's message next to the field it concerns.
"""

from __future__ import annotations

import urllib.parse

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mcpkit.hub.console import sign_in
from mcpkit.hub.console.hub_calls import ADMIN
from mcpkit.hub.console.page_kit import call, console, posted, refused, signed

USERS = ADMIN + "/users"
NOTICES = {
    "added": "User added.",
    "disabled": "User disabled: their sessions and tokens stop working now.",
    "enabled": "User enabled.",
    "admin": "User is now an admin.",
    "not_admin": "User is no longer an admin.",
    "revoked": "Token revoked.",
}


def _user(request: Request, action: str = "") -> str:
    """The API path of the user the URL names (quoted as one segment: the API checks it)."""
    return f"{USERS}/{urllib.parse.quote(request.path_params['user_id'], safe='')}{action}"


def _back(found: sign_in.SignedIn, path: str, notice: str, name: str = "") -> Response:
    query = urllib.parse.urlencode({"notice": notice, **({"name": name} if name else {})})
    return found.keep(RedirectResponse(f"{path}?{query}", 303))


async def _users_page(request: Request, found: sign_in.SignedIn, status: int = 200,
                      new_name: str = "", new_admin: bool = False,
                      errors: dict[str, str] | None = None) -> Response:
    cursor = request.query_params.get("cursor")
    reply = await call(request, found, "GET", USERS,
                       params={"cursor": cursor} if cursor else None)
    if not reply.ok:
        return refused(request, found, reply)
    return console().page(request, "admin_users.html", status, found, page=reply.body,
                          cursor=cursor, new_name=new_name, new_admin=new_admin,
                          errors=errors or {},
                          notice=NOTICES.get(request.query_params.get("notice", "")),
                          notice_name=request.query_params.get("name", ""))


async def user_list(request: Request) -> Response:
    found = await signed(request)
    if isinstance(found, Response):
        return found
    return await _users_page(request, found)


async def add_user(request: Request) -> Response:
    found = await posted(request)
    if isinstance(found, Response):
        return found
    signed_in, fields = found
    name, admin = fields.get("name", "").strip(), fields.get("is_admin") == "1"
    reply = await call(request, signed_in, "POST", USERS, json={"name": name, "is_admin": admin})
    if reply.status in (401, 403):
        return refused(request, signed_in, reply)
    if not reply.ok:
        error = reply.error
        return await _users_page(request, signed_in, reply.status, name, admin,
                                 {error.get("field") or "name": error["message"]})
    return _back(signed_in, "/console/admin/users", "added", name)


async def _set(request: Request, field: str, notices: tuple[str, str]) -> Response:
    found = await posted(request)
    if isinstance(found, Response):
        return found
    signed_in, fields = found
    value = fields.get("value") == "1"
    reply = await call(request, signed_in, "PATCH", _user(request), json={field: value})
    if not reply.ok:
        return refused(request, signed_in, reply)
    return _back(signed_in, "/console/admin/users", notices[0] if value else notices[1],
                 fields.get("name", ""))


async def set_disabled(request: Request) -> Response:
    return await _set(request, "disabled", ("disabled", "enabled"))


async def set_admin(request: Request) -> Response:
    return await _set(request, "is_admin", ("admin", "not_admin"))


async def user_tokens(request: Request) -> Response:
    found = await signed(request)
    if isinstance(found, Response):
        return found
    user = await call(request, found, "GET", _user(request))
    if not user.ok:
        return refused(request, found, user)
    cursor = request.query_params.get("cursor")
    reply = await call(request, found, "GET", _user(request, "/tokens"),
                       params={"cursor": cursor} if cursor else None)
    if not reply.ok:
        return refused(request, found, reply)
    return console().page(request, "admin_tokens.html", signed=found, user=user.body,
                          page=reply.body, cursor=cursor,
                          notice=NOTICES.get(request.query_params.get("notice", "")))


async def revoke_token(request: Request) -> Response:
    found = await posted(request)
    if isinstance(found, Response):
        return found
    signed_in, _fields = found
    token_id = urllib.parse.quote(request.path_params["token_id"], safe="")
    reply = await call(request, signed_in, "DELETE", _user(request, f"/tokens/{token_id}"))
    if not reply.ok:
        return refused(request, signed_in, reply)
    return _back(signed_in, f"/console/admin/users/{reply.body['user_id']}/tokens", "revoked")


PAGES = [
    ("/console/admin/users", user_list, "GET"),
    ("/console/admin/users", add_user, "POST"),
    ("/console/admin/users/{user_id}/disabled", set_disabled, "POST"),
    ("/console/admin/users/{user_id}/admin", set_admin, "POST"),
    ("/console/admin/users/{user_id}/tokens", user_tokens, "GET"),
    ("/console/admin/users/{user_id}/tokens/{token_id}/revoke", revoke_token, "POST"),
]
"""(path, handler, method) of every user page."""
