"""An upstream's tools, each switched on or off for the hub's /mcp, through the REST API with
the user's token (another user's upstream is a 404 there, so here):

    GET  /console/upstreams/{id}/tools      its stored tools (the API's cursor), each with a
                                            switch: a form per tool (works without script)
    POST /console/upstreams/{id}/tools      switch one: `tool`, `enable` (1/0), `version`

A switch PATCHes the upstream's `disabled_tools` (and adds the tool to `enabled_tools` when
that allow-list is set and lacks it) with the `version` the page showed: an upstream changed
elsewhere meanwhile is the API's 409, shown as "changed elsewhere, reload". Success redirects
back to the page (console.js swaps it in without a reload).
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mcpkit.hub.console import sign_in
from mcpkit.hub.console.hub_calls import UPSTREAMS
from mcpkit.hub.console.page_kit import call, console, posted, refused, signed

STALE = "This upstream was changed elsewhere meanwhile: reload the page to see it, then try again."
NOTICES = {"on": "Tool enabled: it is back on the hub's /mcp.",
           "off": "Tool disabled: it is gone from the hub's /mcp."}


def _api(upstream_id: str, action: str = "") -> str:
    return f"{UPSTREAMS}/{urllib.parse.quote(upstream_id, safe='')}{action}"


def tools_path(upstream_id: str) -> str:
    return f"/console/upstreams/{urllib.parse.quote(upstream_id, safe='')}/tools"


async def _page(request: Request, found: sign_in.SignedIn, upstream_id: str,
                status: int = 200, **values: Any) -> Response:
    upstream = await call(request, found, "GET", _api(upstream_id))
    if not upstream.ok:
        return refused(request, found, upstream)
    cursor = request.query_params.get("cursor") if request.method == "GET" else None
    tools = await call(request, found, "GET", _api(upstream_id, "/tools"),
                       params={"cursor": cursor} if cursor else None)
    if not tools.ok:
        return refused(request, found, tools)
    return console().page(request, "tools.html", status, found, upstream=upstream.body,
                          page=tools.body, cursor=cursor, **values)


async def tool_list(request: Request) -> Response:
    found = await signed(request)
    if isinstance(found, Response):
        return found
    notice = NOTICES.get(request.query_params.get("notice", ""))
    return await _page(request, found, request.path_params["upstream_id"], notice=notice,
                       notice_tool=request.query_params.get("tool", "")[:200])


def switched(upstream: dict[str, Any], tool: str, enable: bool) -> dict[str, Any]:
    """The PATCH body's tool lists after switching `tool` on or off."""
    disabled = [name for name in upstream["disabled_tools"] if name != tool]
    if not enable:
        disabled.append(tool)
    body: dict[str, Any] = {"disabled_tools": disabled}
    allowed = upstream.get("enabled_tools")
    if enable and allowed is not None and tool not in allowed:
        body["enabled_tools"] = [*allowed, tool]
    return body


async def switch_tool(request: Request) -> Response:
    found = await posted(request)
    if isinstance(found, Response):
        return found
    signed_in, fields = found
    upstream_id = request.path_params["upstream_id"]
    tool, enable = fields.get("tool", ""), fields.get("enable") == "1"
    if not tool or not fields.get("version", "").isdigit():
        return console().error(request, "the form lacks the tool or the upstream's version",
                               400, signed_in)
    current = await call(request, signed_in, "GET", _api(upstream_id))
    if not current.ok:
        return refused(request, signed_in, current)
    body = {**switched(current.body, tool, enable), "version": int(fields["version"])}
    reply = await call(request, signed_in, "PATCH", _api(upstream_id), json=body)
    if reply.status == 409:
        return await _page(request, signed_in, upstream_id, 409, stale=STALE)
    if not reply.ok:
        return refused(request, signed_in, reply)
    query = urllib.parse.urlencode({"notice": "on" if enable else "off", "tool": tool})
    return signed_in.keep(RedirectResponse(f"{tools_path(upstream_id)}?{query}", 303))


PAGES = [
    ("/console/upstreams/{upstream_id}/tools", tool_list, "GET"),
    ("/console/upstreams/{upstream_id}/tools", switch_tool, "POST"),
]
"""(path, handler, method) of the tools page."""
