"""What every console page handler shares: the templates and static files (loaded once per
process), the signed-in session or the way to sign in, the checked form of a POST (CSRF and
Origin: sign_in.csrf_refusal), a call to the REST API with the user's token, and the page for
an API refusal.

    found = await signed(request)            # SignedIn, or a redirect to the sign-in
    found = await posted(request)            # (SignedIn, form), or a refusal / the sign-in
    reply = await call(request, signed_in, "GET", path)
"""

from __future__ import annotations

import functools
import urllib.parse
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mcpkit.hub.console import hub_calls, sign_in
from mcpkit.hub.console.assets import Assets
from mcpkit.hub.console.hub_calls import ApiReply
from mcpkit.hub.console.render import Pages
from mcpkit.hub.console.session import clear_session
from mcpkit.hub.oauth.routes import BadRequest, read_form

if TYPE_CHECKING:  # the API's app imports the console: its context for annotations only
    from mcpkit.hub.api.context import HubContext


class Console:
    """The templates and the static files."""

    def __init__(self) -> None:
        self.assets = Assets()
        self.pages = Pages(self.assets)

    def page(self, request: Request, template: str, status: int = 200,
             signed: sign_in.SignedIn | None = None, **values: Any) -> Response:
        response = self.pages.render(
            template, status, csrf=signed.session.csrf if signed else None,
            signed_in=signed is not None, admin=signed is not None and signed.session.admin,
            path=request.url.path, **values)
        return signed.keep(response) if signed else response

    def error(self, request: Request, message: str, status: int,
              signed: sign_in.SignedIn | None = None) -> Response:
        return self.page(request, "error.html", status, signed, message=message)


@functools.cache
def console() -> Console:
    """The process's templates and static files (read from the package once)."""
    return Console()


def hub_context(request: Request) -> HubContext:
    context: HubContext = request.app.state.hub
    return context


def to_sign_in(request: Request) -> Response:
    """To the sign-in, coming back to this page (a POST comes back to the list)."""
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if request.method != "GET":
        target = "/"
    query = urllib.parse.urlencode({"next": target})
    return RedirectResponse(f"{sign_in.SIGN_IN_PATH}?{query}", status_code=303)


async def signed(request: Request) -> sign_in.SignedIn | Response:
    found = await sign_in.signed_in(request, hub_context(request))
    return found if found is not None else to_sign_in(request)


async def posted(request: Request) -> tuple[sign_in.SignedIn, dict[str, str]] | Response:
    found = await signed(request)
    if isinstance(found, Response):
        return found
    try:
        form = await read_form(request)
    except BadRequest as bad:
        return console().error(request, bad.message, bad.status, found)
    refusal = sign_in.csrf_refusal(request, hub_context(request), found.session,
                                   form.get("csrf_token"))
    if refusal is not None:
        return console().error(request, refusal, 403, found)
    return found, form


async def call(request: Request, found: sign_in.SignedIn, method: str, path: str,
               **kwargs: Any) -> ApiReply:
    async with hub_calls.hub_client(request) as client:
        return await hub_calls.api(client, found.session, method, path, **kwargs)


def refused(request: Request, found: sign_in.SignedIn, reply: ApiReply) -> Response:
    """The page for an API refusal no form shows (401: the login ended, sign in again)."""
    if reply.status == 401:
        response = to_sign_in(request)
        clear_session(response, sign_in.secure(hub_context(request)))
        return response
    status = reply.status if 400 <= reply.status < 600 else 502
    return console().error(request, reply.error["message"], status, found)
