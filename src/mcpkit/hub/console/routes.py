"""The console's routes (FastAPI, outside the API's schema), served at the hub's root:

    the upstreams pages                     upstream_pages.py (`/` is their list)
    the operators' pages (/console/admin/)  admin_users.py, admin_views.py
    GET/POST /console/upstreams/{id}/tools  an upstream's tools, each on or off (tool_pages.py)
    GET/POST /console/upstreams/{id}/try    "Try a tool": its form, its call through /mcp
                                            with progress (try_pages.py)
    GET/POST /console/tokens…               the user's API tokens (token_pages.py)
    GET  /console/connect                   snippets for MCP clients (connect_page.py)
    GET  /console/sign-in, /console/callback, POST /console/sign-out   sign_in.py
    GET  /console/signed-out                the page after signing out
    GET  /console/static/<name>.<hash>.<ext>  the style sheet and the script (assets.py)

Every page acts through the REST API with the user's access token (hub_calls.py), so the
API's checks apply unchanged. A GET changes nothing; every POST is a form (or the script's
fetch of the same form) carrying the session's CSRF token from the hub's own origin
(page_kit.posted).
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from mcpkit.hub.console import (
    admin_users,
    admin_views,
    connect_page,
    sign_in,
    token_pages,
    tool_pages,
    try_pages,
    upstream_pages,
)
from mcpkit.hub.console.assets import STATIC_PREFIX
from mcpkit.hub.console.page_kit import console, hub_context, posted
from mcpkit.hub.oauth.service import CONSOLE_CALLBACK_PATH

SIGNED_OUT_PATH = "/console/signed-out"


async def static(request: Request) -> Response:
    return console().assets.response(request.path_params["name"])


async def start_sign_in(request: Request) -> Response:
    return sign_in.start(request, hub_context(request))


async def callback(request: Request) -> Response:
    outcome = await sign_in.callback(request, hub_context(request))
    if isinstance(outcome, str):
        return console().page(request, "signed_out.html", 400, message=outcome)
    return outcome


async def sign_out(request: Request) -> Response:
    found = await posted(request)
    if isinstance(found, Response):
        return found
    return await sign_in.sign_out(request, hub_context(request), found[0].session,
                                  SIGNED_OUT_PATH)


async def signed_out(request: Request) -> Response:
    return console().page(request, "signed_out.html", message=None)


def router() -> APIRouter:
    routes = APIRouter(include_in_schema=False)
    pages = [
        (STATIC_PREFIX + "{name}", static, "GET"),
        (sign_in.SIGN_IN_PATH, start_sign_in, "GET"),
        (CONSOLE_CALLBACK_PATH, callback, "GET"),
        (sign_in.SIGN_OUT_PATH, sign_out, "POST"),
        (SIGNED_OUT_PATH, signed_out, "GET"),
        *upstream_pages.PAGES,
        *admin_users.PAGES,
        *admin_views.PAGES,
        *tool_pages.PAGES,
        *try_pages.PAGES,
        *token_pages.PAGES,
        *connect_page.PAGES,
    ]
    for path, handler, method in pages:
        routes.add_api_route(path, handler, methods=[method])
    return routes
