""""Try a tool": a form generated from the tool's input schema (tool_form.py), and the call
through the hub's own /mcp (tool_calls.py) with the user's /mcp token, its progress shown
while it runs and its result as text, images and JSON (result_view.py):

    GET  /console/upstreams/{id}/try?tool=NAME   the form
    POST /console/upstreams/{id}/try             call it: `tool`, the fields (or the
                                                 arguments as JSON), the CSRF token

The tool and its schema come from the REST API (another user's upstream is a 404 there, so
here). A POST from console.js asks for NDJSON (tool_stream.py: progress lines, then the
rendered outcome); without script the answer is the page with the outcome, once the call
ends. Arguments the form cannot turn into the schema's types come back on the form, each
message next to its field, before anything is called.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from mcpkit.hub.console import sign_in
from mcpkit.hub.console.hub_calls import UPSTREAMS
from mcpkit.hub.console.page_kit import (
    call,
    console,
    hub_context,
    posted,
    refused,
    signed,
    to_sign_in,
)
from mcpkit.hub.console.result_view import result_view
from mcpkit.hub.console.session import clear_session
from mcpkit.hub.console.tool_calls import (
    NoOwnAddress,
    Outcome,
    Progress,
    call_tool,
    own_mcp_url,
)
from mcpkit.hub.console.tool_form import (
    RAW_FIELD,
    arguments_from,
    form_fields,
    form_note,
    has_form,
    raw_value,
)
from mcpkit.hub.console.tool_stream import NDJSON, CallStream

NOT_ON_MCP = ("This tool is not on the hub's /mcp now: it is switched off, or its upstream is "
              "disabled or down. Switch it on, or refresh the upstream, to try it.")
STREAM_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


def try_path(upstream_id: str, tool: str | None = None) -> str:
    path = f"/console/upstreams/{urllib.parse.quote(upstream_id, safe='')}/try"
    return path + ("?" + urllib.parse.urlencode({"tool": tool}) if tool is not None else "")


def _api(upstream_id: str, tool: str | None = None) -> str:
    path = f"{UPSTREAMS}/{urllib.parse.quote(upstream_id, safe='')}"
    return path + (f"/tools/{urllib.parse.quote(tool, safe='')}" if tool is not None else "")


async def _load(request: Request, found: sign_in.SignedIn, upstream_id: str,
                tool_name: str) -> tuple[dict[str, Any], dict[str, Any]] | Response:
    """The upstream and its tool, from the API; or the page saying why not."""
    upstream = await call(request, found, "GET", _api(upstream_id))
    if not upstream.ok:
        return refused(request, found, upstream)
    if not tool_name:
        return console().error(request, "Pick a tool to try from the upstream's tools.", 404,
                               found)
    tool = await call(request, found, "GET", _api(upstream_id, tool_name))
    if not tool.ok:
        return refused(request, found, tool)
    return upstream.body, tool.body


def _page(request: Request, found: sign_in.SignedIn, upstream: dict[str, Any],
          tool: dict[str, Any], status: int = 200, *, posted_fields: dict[str, str] | None = None,
          errors: dict[str, str] | None = None, outcome: Outcome | None = None) -> Response:
    schema = tool["input_schema"]
    fields = form_fields(schema, posted_fields, errors)
    return console().page(
        request, "try.html", status, found, upstream=upstream, tool=tool, fields=fields,
        raw_value=raw_value(posted_fields), raw_error=(errors or {}).get(RAW_FIELD),
        note=form_note(schema), no_arguments=not fields and has_form(schema),
        not_on_mcp=NOT_ON_MCP, outcome=outcome, view=_view(outcome))


def _view(outcome: Outcome | None) -> Any:
    return result_view(outcome.result) if outcome and outcome.result is not None else None


def render_outcome(outcome: Outcome) -> str:
    """The result's section of the page, alone (what the stream's last line carries)."""
    return console().pages.fragment("_tool_result.html", outcome=outcome,
                                    view=_view(outcome))


async def try_form(request: Request) -> Response:
    found = await signed(request)
    if isinstance(found, Response):
        return found
    loaded = await _load(request, found, request.path_params["upstream_id"],
                         request.query_params.get("tool", ""))
    if isinstance(loaded, Response):
        return loaded
    return _page(request, found, *loaded)


async def try_call(request: Request) -> Response:
    found = await posted(request)
    if isinstance(found, Response):
        return found
    signed_in, fields = found
    loaded = await _load(request, signed_in, request.path_params["upstream_id"],
                         fields.get("tool", ""))
    if isinstance(loaded, Response):
        return loaded
    upstream, tool = loaded
    arguments, errors = arguments_from(tool["input_schema"], fields)
    if errors:
        return _page(request, signed_in, upstream, tool, 422, posted_fields=fields,
                     errors=errors)
    if not tool.get("mcp_name"):
        return _page(request, signed_in, upstream, tool, 409, posted_fields=fields)
    with_token = await sign_in.with_mcp_token(request, signed_in)
    if with_token is None:
        return _signed_out(request)
    settings = hub_context(request).settings
    try:
        url = own_mcp_url(request, settings)
    except NoOwnAddress as unreachable:
        return console().error(request, str(unreachable), 503, with_token)
    token = with_token.session.mcp_token

    async def run(on_progress: Progress) -> Outcome:
        return await call_tool(url, token, tool["mcp_name"], arguments, on_progress=on_progress,
                               timeout_s=settings.console_try_timeout_s)

    if NDJSON in request.headers.get("accept", ""):
        return with_token.keep(CallStream(run, render_outcome, STREAM_HEADERS))
    outcome = await run(lambda *_: None)
    if outcome.signed_out:
        return _signed_out(request)
    return _page(request, with_token, upstream, tool, posted_fields=fields, outcome=outcome)


def _signed_out(request: Request) -> Response:
    response = to_sign_in(request)
    clear_session(response, sign_in.secure(hub_context(request)))
    return response


PAGES = [
    ("/console/upstreams/{upstream_id}/try", try_form, "GET"),
    ("/console/upstreams/{upstream_id}/try", try_call, "POST"),
]
"""(path, handler, method) of "Try a tool"."""
