"""The upstreams pages, each acting through the REST API with the user's token (another
user's upstream is a 404 here as there):

    GET  /                                  your upstreams, a page at a time (the API's cursor)
    GET  /console/upstreams/new             the add form;   POST /console/upstreams
    GET  /console/upstreams/{id}/edit       the edit form;  POST /console/upstreams/{id}
    GET  /console/upstreams/{id}/remove     confirm;        POST /console/upstreams/{id}/remove
    POST /console/upstreams/{id}/refresh    fetch the catalog now
    POST /console/upstreams/{id}/connect    start the per-user OAuth login: to the upstream's
                                            authorization server, back to the console after

A POST answers with a redirect to the list and a notice (post/redirect/get), or the form
again, as typed, with the API's messages next to their fields (upstream_form.py).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mcpkit.hub.console import sign_in
from mcpkit.hub.console.hub_calls import UPSTREAMS
from mcpkit.hub.console.page_kit import call, console, hub_context, posted, refused, signed
from mcpkit.hub.console.upstream_form import AUTH_MODES, TRANSPORTS, UpstreamForm, field_errors

NOTICES = {
    "added": "Upstream added.",
    "saved": "Changes saved.",
    "removed": "Upstream removed.",
    "refreshed": "Catalog refreshed.",
    "refresh_failed": "The refresh failed: see the upstream's last error.",
    "connected": "Login finished.",
}


def _list_url(notice: str, name: str = "") -> str:
    return "/?" + urllib.parse.urlencode({"notice": notice, **({"name": name} if name else {})})


def _one(upstream_id: str, action: str = "") -> str:
    """The API path of one upstream; the id quoted as one path segment (a typed `../x`
    stays an id, which the API answers 404)."""
    return f"{UPSTREAMS}/{urllib.parse.quote(upstream_id, safe='')}{action}"


def _back(found: sign_in.SignedIn, notice: str, name: str) -> Response:
    return found.keep(RedirectResponse(_list_url(notice, name), 303))


def _form_page(request: Request, found: sign_in.SignedIn, form: UpstreamForm,
               upstream_id: str | None, status: int = 200) -> Response:
    return console().page(request, "upstream_form.html", status, found, form=form,
                          upstream_id=upstream_id, transports=TRANSPORTS,
                          auth_modes=AUTH_MODES)


async def upstream_list(request: Request) -> Response:
    found = await signed(request)
    if isinstance(found, Response):
        return found
    cursor = request.query_params.get("cursor")
    reply = await call(request, found, "GET", UPSTREAMS,
                       params={"cursor": cursor} if cursor else None)
    if not reply.ok:
        return refused(request, found, reply)
    return console().page(request, "upstreams.html", signed=found, page=reply.body,
                          cursor=cursor,
                          notice=NOTICES.get(request.query_params.get("notice", "")),
                          notice_name=request.query_params.get("name", ""))


async def new_upstream(request: Request) -> Response:
    found = await signed(request)
    if isinstance(found, Response):
        return found
    return _form_page(request, found, UpstreamForm(), None)


async def create_upstream(request: Request) -> Response:
    found = await posted(request)
    if isinstance(found, Response):
        return found
    signed_in, fields = found
    form = UpstreamForm.from_post(fields)
    return await _submit(request, signed_in, form, None, form.create_body())


async def edit_upstream(request: Request) -> Response:
    found = await signed(request)
    if isinstance(found, Response):
        return found
    upstream_id = request.path_params["upstream_id"]
    reply = await call(request, found, "GET", _one(upstream_id))
    if not reply.ok:
        return refused(request, found, reply)
    return _form_page(request, found, UpstreamForm.from_upstream(reply.body), upstream_id)


async def update_upstream(request: Request) -> Response:
    found = await posted(request)
    if isinstance(found, Response):
        return found
    signed_in, fields = found
    form = UpstreamForm.from_post(fields)
    return await _submit(request, signed_in, form, request.path_params["upstream_id"],
                         form.update_body())


async def _submit(request: Request, signed_in: sign_in.SignedIn, form: UpstreamForm,
                  upstream_id: str | None, body: dict[str, Any] | None) -> Response:
    """Send the add (`upstream_id` None: POST) or edit (PATCH) form's `body` to the API: back
    to the list when it is taken, else the form again with each error at its field (a body
    the form itself could not make is None: its errors are already on the form)."""
    if body is None:
        return _form_page(request, signed_in, form, upstream_id, 422)
    if upstream_id is None:
        reply = await call(request, signed_in, "POST", UPSTREAMS, json=body)
    else:
        reply = await call(request, signed_in, "PATCH", _one(upstream_id), json=body)
    if reply.status in (401, 404):
        return refused(request, signed_in, reply)
    if not reply.ok:
        form.errors = field_errors(reply.error)
        return _form_page(request, signed_in, form, upstream_id, reply.status)
    return _back(signed_in, "added" if upstream_id is None else "saved", form.name)


async def confirm_removal(request: Request) -> Response:
    found = await signed(request)
    if isinstance(found, Response):
        return found
    reply = await call(request, found, "GET", _one(request.path_params["upstream_id"]))
    if not reply.ok:
        return refused(request, found, reply)
    return console().page(request, "remove.html", signed=found, upstream=reply.body)


async def remove_upstream(request: Request) -> Response:
    found = await posted(request)
    if isinstance(found, Response):
        return found
    signed_in, fields = found
    reply = await call(request, signed_in, "DELETE", _one(request.path_params["upstream_id"]))
    if not reply.ok:
        return refused(request, signed_in, reply)
    return _back(signed_in, "removed", fields.get("name", ""))


async def refresh_upstream(request: Request) -> Response:
    found = await posted(request)
    if isinstance(found, Response):
        return found
    signed_in, fields = found
    reply = await call(request, signed_in, "POST",
                       _one(request.path_params["upstream_id"], "/refresh"))
    if reply.status in (401, 404):
        return refused(request, signed_in, reply)
    return _back(signed_in, "refreshed" if reply.ok else "refresh_failed",
                 fields.get("name", ""))


async def connect_upstream(request: Request) -> Response:
    found = await posted(request)
    if isinstance(found, Response):
        return found
    signed_in, fields = found
    back = hub_context(request).settings.issuer + _list_url("connected", fields.get("name", ""))
    reply = await call(request, signed_in, "POST",
                       _one(request.path_params["upstream_id"], "/oauth/start"),
                       json={"return_to": back})
    if not reply.ok:
        return refused(request, signed_in, reply)
    return signed_in.keep(RedirectResponse(reply.body["authorization_url"], 303))


PAGES = [
    ("/", upstream_list, "GET"),
    ("/console/upstreams/new", new_upstream, "GET"),
    ("/console/upstreams", create_upstream, "POST"),
    ("/console/upstreams/{upstream_id}/edit", edit_upstream, "GET"),
    ("/console/upstreams/{upstream_id}", update_upstream, "POST"),
    ("/console/upstreams/{upstream_id}/remove", confirm_removal, "GET"),
    ("/console/upstreams/{upstream_id}/remove", remove_upstream, "POST"),
    ("/console/upstreams/{upstream_id}/refresh", refresh_upstream, "POST"),
    ("/console/upstreams/{upstream_id}/connect", connect_upstream, "POST"),
]
"""(path, handler, method) of every upstreams page."""
