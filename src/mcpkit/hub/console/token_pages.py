"""The user's own API tokens, through `/api/v1/users/me/tokens` with the user's access token
(another user's token id is a 404 there, so here):

    GET  /console/tokens                    the list (the API's cursor) and the create form
    POST /console/tokens                    create: the page again, with the secret shown once
    GET  /console/tokens/{id}/revoke        confirm;  POST /console/tokens/{id}/revoke

The secret is in the one answer to the create POST (a page, not a redirect: a secret never goes
into a URL, and the page is `Cache-Control: no-store` like every console page).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mcpkit.hub.console import sign_in
from mcpkit.hub.console.page_kit import call, console, posted, refused, signed
from mcpkit.hub.console.upstream_form import field_errors

MY_TOKENS = "/api/v1/users/me/tokens"
TOKENS_PAGE = "/console/tokens"
NOTICES = {"revoked": "Token revoked: it no longer works."}


def _one(token_id: str) -> str:
    """The API path of one token, the id quoted as one path segment."""
    return f"{MY_TOKENS}/{urllib.parse.quote(token_id, safe='')}"


async def _list_page(request: Request, found: sign_in.SignedIn, status: int = 200,
                     **values: Any) -> Response:
    cursor = request.query_params.get("cursor") if request.method == "GET" else None
    reply = await call(request, found, "GET", MY_TOKENS,
                       params={"cursor": cursor} if cursor else None)
    if not reply.ok:
        return refused(request, found, reply)
    values.setdefault("form", {"name": "", "expires_in_days": ""})
    return console().page(request, "tokens.html", status, found, page=reply.body,
                          cursor=cursor, errors=values.pop("errors", {}), **values)


async def token_list(request: Request) -> Response:
    found = await signed(request)
    if isinstance(found, Response):
        return found
    return await _list_page(request, found,
                            notice=NOTICES.get(request.query_params.get("notice", "")))


def _create_body(fields: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The API's body from the form, or the field errors the form can tell by itself."""
    body: dict[str, Any] = {"name": fields.get("name", "").strip() or "default"}
    days = fields.get("expires_in_days", "").strip()
    if days:
        if not days.isdigit():
            return body, {"expires_in_days": "a whole number of days, or empty for never"}
        body["expires_in_days"] = int(days)
    return body, {}


async def create_token(request: Request) -> Response:
    found = await posted(request)
    if isinstance(found, Response):
        return found
    signed_in, fields = found
    form = {"name": fields.get("name", ""), "expires_in_days": fields.get("expires_in_days", "")}
    body, errors = _create_body(fields)
    if errors:
        return await _list_page(request, signed_in, 422, form=form, errors=errors)
    reply = await call(request, signed_in, "POST", MY_TOKENS, json=body)
    if reply.status == 401:
        return refused(request, signed_in, reply)
    if not reply.ok:
        return await _list_page(request, signed_in, reply.status, form=form,
                                errors=field_errors(reply.error))
    return await _list_page(request, signed_in, 201, created=reply.body)


async def confirm_revoke(request: Request) -> Response:
    """The confirmation names the token as the list's link says (display only: the revoke is
    by id, and the API answers 404 for an id not the user's)."""
    found = await signed(request)
    if isinstance(found, Response):
        return found
    token = {"id": request.path_params["token_id"],
             "name": request.query_params.get("name", "")[:200],
             "prefix": request.query_params.get("prefix", "")[:40]}
    return console().page(request, "token_revoke.html", signed=found, token=token)


async def revoke_token(request: Request) -> Response:
    found = await posted(request)
    if isinstance(found, Response):
        return found
    signed_in, _fields = found
    reply = await call(request, signed_in, "DELETE", _one(request.path_params["token_id"]))
    if not reply.ok:
        return refused(request, signed_in, reply)
    return signed_in.keep(RedirectResponse(f"{TOKENS_PAGE}?notice=revoked", 303))


PAGES = [
    (TOKENS_PAGE, token_list, "GET"),
    (TOKENS_PAGE, create_token, "POST"),
    (TOKENS_PAGE + "/{token_id}/revoke", confirm_revoke, "GET"),
    (TOKENS_PAGE + "/{token_id}/revoke", revoke_token, "POST"),
]
"""(path, handler, method) of every token page."""
