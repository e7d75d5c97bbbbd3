"""The console's pages (FastAPI routes, outside the API's schema), served at the hub's root.

    GET  /                                  your upstreams, a page at a time (the API's cursor)
    GET  /console/upstreams/new             the add form;   POST /console/upstreams
    GET  /console/upstreams/{id}/edit       the edit form;  POST /console/upstreams/{id}
    GET  /console/upstreams/{id}/remove     confirm;        POST /console/upstreams/{id}/remove
    POST /console/upstreams/{id}/refresh    fetch the catalog now
    POST /console/upstreams/{id}/connect    start the per-user OAuth login: to the upstream's
                                            authorization server, back to the console after
    GET  /console/static/<name>.<hash>.<ext>  the style sheet and the script (assets.py)
    sign-in, callback, sign-out             sign_in.py

Every handler acts through the REST API with the user's access token (hub_calls.py), so the
API's checks apply unchanged: another user's upstream is a 404 here as there. A GET changes
nothing; every POST is a form (or the script's fetch of the same form) carrying the session's
CSRF token from the hub's own origin (sign_in.csrf_refusal), and answers with a redirect
(post/redirect/get) or the form again with the API's messages next to their fields.
"""

from __future__ import annotations

import urllib.parse
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from mcpkit.hub.console import hub_calls, sign_in
from mcpkit.hub.console.assets import STATIC_PREFIX, Assets
from mcpkit.hub.console.hub_calls import UPSTREAMS, ApiReply
from mcpkit.hub.console.render import Pages
from mcpkit.hub.console.session import clear_session
from mcpkit.hub.console.upstream_form import AUTH_MODES, TRANSPORTS, UpstreamForm, field_errors
from mcpkit.hub.oauth.routes import BadRequest, read_form

if TYPE_CHECKING:  # the API's app imports the console: its context for annotations only
    from mcpkit.hub.api.context import HubContext

NOTICES = {
    "added": "Upstream added.",
    "saved": "Changes saved.",
    "removed": "Upstream removed.",
    "refreshed": "Catalog refreshed.",
    "refresh_failed": "The refresh failed: see the upstream's last error.",
    "connected": "Login finished.",
}


class Console:
    """The routes' shared parts: the templates and the static files, loaded once."""

    def __init__(self) -> None:
        self.assets = Assets()
        self.pages = Pages(self.assets)

    def page(self, request: Request, template: str, status: int = 200,
             signed: sign_in.SignedIn | None = None, **values: Any) -> Response:
        response = self.pages.render(
            template, status, csrf=signed.session.csrf if signed else None,
            signed_in=signed is not None, path=request.url.path, **values)
        return signed.keep(response) if signed else response

    def error(self, request: Request, message: str, status: int,
              signed: sign_in.SignedIn | None = None) -> Response:
        return self.page(request, "error.html", status, signed, message=message)


def _context(request: Request) -> HubContext:
    context: HubContext = request.app.state.hub
    return context


def _to_sign_in(request: Request) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if request.method != "GET":
        target = "/"
    query = urllib.parse.urlencode({"next": target})
    return RedirectResponse(f"{sign_in.SIGN_IN_PATH}?{query}", status_code=303)


def _list_url(notice: str, name: str = "") -> str:
    return "/?" + urllib.parse.urlencode({"notice": notice, **({"name": name} if name else {})})


def router() -> APIRouter:
    console = Console()
    routes = APIRouter(include_in_schema=False)

    async def signed(request: Request) -> sign_in.SignedIn | Response:
        found = await sign_in.signed_in(request, _context(request))
        return found if found is not None else _to_sign_in(request)

    async def posted(request: Request) -> tuple[sign_in.SignedIn, dict[str, str]] | Response:
        found = await signed(request)
        if isinstance(found, Response):
            return found
        try:
            form = await read_form(request)
        except BadRequest as bad:
            return console.error(request, bad.message, bad.status, found)
        refusal = sign_in.csrf_refusal(request, _context(request), found.session,
                                       form.get("csrf_token"))
        if refusal is not None:
            return console.error(request, refusal, 403, found)
        return found, form

    async def call(request: Request, found: sign_in.SignedIn, method: str, path: str,
                   **kwargs: Any) -> ApiReply:
        async with hub_calls.hub_client(request) as client:
            return await hub_calls.api(client, found.session, method, path, **kwargs)

    def refused(request: Request, found: sign_in.SignedIn, reply: ApiReply) -> Response:
        """A page for an API refusal no form shows (401: sign in again)."""
        if reply.status == 401:
            response = _to_sign_in(request)
            clear_session(response, sign_in.secure(_context(request)))
            return response
        status = reply.status if 400 <= reply.status < 600 else 502
        return console.error(request, reply.error["message"], status, found)

    # --- static files, sign-in ----------------------------------------------------------

    @routes.get(STATIC_PREFIX + "{name}")
    async def static(name: str) -> Response:
        return console.assets.response(name)

    @routes.get(sign_in.SIGN_IN_PATH)
    async def start_sign_in(request: Request) -> Response:
        return sign_in.start(request, _context(request))

    @routes.get("/console/callback")
    async def callback(request: Request) -> Response:
        outcome = await sign_in.callback(request, _context(request))
        if isinstance(outcome, str):
            return console.page(request, "signed_out.html", 400, message=outcome)
        return outcome

    @routes.post(sign_in.SIGN_OUT_PATH)
    async def sign_out(request: Request) -> Response:
        found = await posted(request)
        if isinstance(found, Response):
            return found
        return await sign_in.sign_out(request, _context(request), found[0].session)

    @routes.get("/console/signed-out")
    async def signed_out(request: Request) -> Response:
        return console.page(request, "signed_out.html", message=None)

    # --- upstreams ------------------------------------------------------------------------

    @routes.get("/")
    async def upstreams(request: Request) -> Response:
        found = await signed(request)
        if isinstance(found, Response):
            return found
        cursor = request.query_params.get("cursor")
        reply = await call(request, found, "GET", UPSTREAMS,
                           params={"cursor": cursor} if cursor else None)
        if not reply.ok:
            return refused(request, found, reply)
        notice = NOTICES.get(request.query_params.get("notice", ""))
        return console.page(request, "upstreams.html", signed=found, page=reply.body,
                            cursor=cursor, notice=notice,
                            notice_name=request.query_params.get("name", ""))

    @routes.get("/console/upstreams/new")
    async def new_upstream(request: Request) -> Response:
        found = await signed(request)
        if isinstance(found, Response):
            return found
        return form_page(request, found, UpstreamForm(), None)

    def form_page(request: Request, found: sign_in.SignedIn, form: UpstreamForm,
                  upstream_id: str | None, status: int = 200) -> Response:
        return console.page(request, "upstream_form.html", status, found, form=form,
                            upstream_id=upstream_id, transports=TRANSPORTS,
                            auth_modes=AUTH_MODES)

    @routes.post("/console/upstreams")
    async def create_upstream(request: Request) -> Response:
        found = await posted(request)
        if isinstance(found, Response):
            return found
        signed_in, fields = found
        form = UpstreamForm.from_post(fields)
        body = form.create_body()
        if body is None:
            return form_page(request, signed_in, form, None, 422)
        reply = await call(request, signed_in, "POST", UPSTREAMS, json=body)
        if reply.status == 401:
            return refused(request, signed_in, reply)
        if not reply.ok:
            form.errors = field_errors(reply.error)
            return form_page(request, signed_in, form, None, reply.status)
        return signed_in.keep(RedirectResponse(_list_url("added", form.name), 303))

    @routes.get("/console/upstreams/{upstream_id}/edit")
    async def edit_upstream(request: Request, upstream_id: str) -> Response:
        found = await signed(request)
        if isinstance(found, Response):
            return found
        reply = await call(request, found, "GET", f"{UPSTREAMS}/{_quoted(upstream_id)}")
        if not reply.ok:
            return refused(request, found, reply)
        return form_page(request, found, UpstreamForm.from_upstream(reply.body), upstream_id)

    @routes.post("/console/upstreams/{upstream_id}")
    async def update_upstream(request: Request, upstream_id: str) -> Response:
        found = await posted(request)
        if isinstance(found, Response):
            return found
        signed_in, fields = found
        form = UpstreamForm.from_post(fields)
        body = form.update_body()
        if body is None:
            return form_page(request, signed_in, form, upstream_id, 422)
        reply = await call(request, signed_in, "PATCH", f"{UPSTREAMS}/{_quoted(upstream_id)}",
                           json=body)
        if reply.status in (401, 404):
            return refused(request, signed_in, reply)
        if not reply.ok:
            form.errors = field_errors(reply.error)
            return form_page(request, signed_in, form, upstream_id, reply.status)
        return signed_in.keep(RedirectResponse(_list_url("saved", form.name), 303))

    @routes.get("/console/upstreams/{upstream_id}/remove")
    async def confirm_removal(request: Request, upstream_id: str) -> Response:
        found = await signed(request)
        if isinstance(found, Response):
            return found
        reply = await call(request, found, "GET", f"{UPSTREAMS}/{_quoted(upstream_id)}")
        if not reply.ok:
            return refused(request, found, reply)
        return console.page(request, "remove.html", signed=found, upstream=reply.body)

    @routes.post("/console/upstreams/{upstream_id}/remove")
    async def remove_upstream(request: Request, upstream_id: str) -> Response:
        found = await posted(request)
        if isinstance(found, Response):
            return found
        signed_in, fields = found
        reply = await call(request, signed_in, "DELETE", f"{UPSTREAMS}/{_quoted(upstream_id)}")
        if not reply.ok:
            return refused(request, signed_in, reply)
        return signed_in.keep(RedirectResponse(_list_url("removed", fields.get("name", "")),
                                               303))

    @routes.post("/console/upstreams/{upstream_id}/refresh")
    async def refresh_upstream(request: Request, upstream_id: str) -> Response:
        found = await posted(request)
        if isinstance(found, Response):
            return found
        signed_in, fields = found
        reply = await call(request, signed_in, "POST",
                           f"{UPSTREAMS}/{_quoted(upstream_id)}/refresh")
        if reply.status in (401, 404):
            return refused(request, signed_in, reply)
        notice = "refreshed" if reply.ok else "refresh_failed"
        return signed_in.keep(RedirectResponse(_list_url(notice, fields.get("name", "")), 303))

    @routes.post("/console/upstreams/{upstream_id}/connect")
    async def connect_upstream(request: Request, upstream_id: str) -> Response:
        found = await posted(request)
        if isinstance(found, Response):
            return found
        signed_in, fields = found
        back = _context(request).settings.issuer + _list_url("connected",
                                                             fields.get("name", ""))
        reply = await call(request, signed_in, "POST",
                           f"{UPSTREAMS}/{_quoted(upstream_id)}/oauth/start",
                           json={"return_to": back})
        if not reply.ok:
            return refused(request, signed_in, reply)
        return signed_in.keep(RedirectResponse(reply.body["authorization_url"], 303))

    return routes


def _quoted(upstream_id: str) -> str:
    """The id as one path segment (a typed `../admin` stays an id the API answers 404)."""
    return urllib.parse.quote(upstream_id, safe="")
