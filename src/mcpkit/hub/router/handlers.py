"""The hub's answers to the list and call methods, in place of a plain server's registries.

The caller is `call.principal` - the user id the hub's authentication put there - and every
lookup goes through that user's `View` (directory.py): another user's upstreams are not in
it, so they can be neither listed nor reached, by any name.

Lists are read fresh from the store and returned whole (no cursor: a user's aggregate is
bounded by their upstreams' catalogs); calls route through the cached view.

Each handler takes the hub's router first (its directory, pool and audit); `methods(router)`
binds it, giving the `(server, call)` handlers the server's Engine calls.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from mcpkit.hub.needs_auth import UpstreamNeedsAuth
from mcpkit.hub.router.directory import Route, View
from mcpkit.hub.router.forward import UpstreamDown, forward
from mcpkit.protocol import errors
from mcpkit.server import handlers as plain
from mcpkit.server import inputs, tools
from mcpkit.server.call import Call

if TYPE_CHECKING:
    from mcpkit.hub.router.router import HubRouter
    from mcpkit.server.server import Server

log = logging.getLogger(__name__)


def _user(call: Call) -> int:
    """The caller's user id; a request without one never got past authentication."""
    try:
        return int(call.principal)
    except ValueError:
        raise errors.McpError(errors.INVALID_REQUEST, "not authenticated") from None


def _name(call: Call, key: str) -> str:
    value = call.params.get(key)
    if not isinstance(value, str):
        raise errors.invalid_params(f'"{key}" must be a string')
    return value


async def _view(router: HubRouter, call: Call, *, fresh: bool = False) -> View:
    return await router.view(_user(call), fresh=fresh)


async def _find(router: HubRouter, call: Call, lookup: Callable[[View], Route | None],
                missing: Callable[[], errors.McpError]) -> Route:
    """`lookup` in the cached view, else in a fresh one (the name may be new), else the
    error `missing()` makes."""
    for fresh in (False, True):
        found = lookup(await _view(router, call, fresh=fresh))
        if found is not None:
            return found
    raise missing()


async def _route(router: HubRouter, call: Call, kind: str, exposed: str) -> Route:
    """The route of an exposed tool or prompt name; -32602 naming what is unknown."""
    def lookup(view: View) -> Route | None:
        return view.tool(exposed) if kind == "tool" else view.prompt(exposed)

    def unknown() -> errors.McpError:
        return errors.invalid_params(f"Unknown {kind}: {exposed}", {"name": exposed})

    return await _find(router, call, lookup, unknown)


# --- lists ----------------------------------------------------------------------------------


async def list_tools(router: HubRouter, server: Server, call: Call) -> dict[str, Any]:
    return {"tools": (await _view(router, call, fresh=True)).tools}


async def list_prompts(router: HubRouter, server: Server, call: Call) -> dict[str, Any]:
    return {"prompts": (await _view(router, call, fresh=True)).prompts}


async def list_resources(router: HubRouter, server: Server, call: Call) -> dict[str, Any]:
    return {"resources": (await _view(router, call, fresh=True)).resources}


async def list_templates(router: HubRouter, server: Server, call: Call) -> dict[str, Any]:
    return {"resourceTemplates": (await _view(router, call, fresh=True)).templates}


# --- calls ----------------------------------------------------------------------------------


async def call_tool(router: HubRouter, server: Server, call: Call) -> dict[str, Any]:
    exposed = _name(call, "name")
    arguments = call.params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise errors.invalid_params('"arguments" must be an object')
    route = await _route(router, call, "tool", exposed)
    started = time.perf_counter()
    outcome = "error"
    error_text: str | None = None
    try:
        result = await _forward(router, server, call, route, "tools/call",
                                {**call.params, "name": route.name})
        outcome = "tool_error" if result.get("isError") is True else "ok"
        return result
    except UpstreamNeedsAuth as refused:  # the caller's model can tell its user what to do
        error_text = str(refused)
        await router.upstream_needs_auth(route.upstream, str(refused))
        return tools.error_result(f"upstream needs authorization: {refused}")
    except UpstreamDown as down:
        error_text = str(down)
        await router.upstream_down(route.upstream, str(down))
        return tools.error_result(f"upstream unavailable: {down}")
    except errors.McpError as error:
        error_text = error.message
        raise
    except BaseException:
        outcome = "cancelled"
        raise
    finally:
        router.record_call(call, route, outcome, time.perf_counter() - started, error_text)


async def get_prompt(router: HubRouter, server: Server, call: Call) -> dict[str, Any]:
    route = await _route(router, call, "prompt", _name(call, "name"))
    return await _forward_or_fail(router, server, call, route, "prompts/get",
                                  {**call.params, "name": route.name})


async def read_resource(router: HubRouter, server: Server, call: Call) -> dict[str, Any]:
    uri = _name(call, "uri")
    route = await _resource_route(router, call, uri)
    return await _forward_or_fail(router, server, call, route, "resources/read", call.params)


async def _resource_route(router: HubRouter, call: Call, uri: str) -> Route:
    def missing() -> errors.McpError:
        return errors.resource_not_found(uri, legacy_code=not call.modern)

    return await _find(router, call, lambda view: view.resource(uri), missing)


async def complete(router: HubRouter, server: Server, call: Call) -> dict[str, Any]:
    ref = call.params.get("ref")
    if not isinstance(ref, dict):
        raise errors.invalid_params('"ref" must be an object')
    view = await _view(router, call)
    if ref.get("type") == "ref/prompt":
        route = await _route(router, call, "prompt", str(ref.get("name")))
        params = {**call.params, "ref": {**ref, "name": route.name}}
    elif ref.get("type") == "ref/resource":
        found = view.template(str(ref.get("uri"))) or view.resource(str(ref.get("uri")))
        if found is None:
            raise errors.invalid_params(f"Unknown resource or template: {ref.get('uri')}")
        route, params = found, call.params
    else:
        raise errors.invalid_params(f"unknown ref type {ref.get('type')!r}")
    return await _forward_or_fail(router, server, call, route, "completion/complete", params)


async def subscribe(router: HubRouter, server: Server, call: Call) -> dict[str, Any]:
    """Remember the subscription (legacy session) and subscribe at the upstream, whose
    updates the router passes to this user's subscribed sessions."""
    uri = _name(call, "uri")
    route = await _resource_route(router, call, uri)
    await plain.subscribe(server, call)
    try:
        client = await router.pool.client(route.upstream)
        await client.subscribe(uri)
    except Exception as error:  # the session keeps the subscription; the upstream may not
        log.info("user %s: subscribing to %s at %s failed: %s", call.principal, uri,
                 route.upstream.name, error)
    return {}


# --- forwarding -----------------------------------------------------------------------------


async def _forward(
    router: HubRouter, server: Server, call: Call, route: Route, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    """Forward with the caller's context; a modern caller's questions become its
    `input_required` result (with the hub's sealed state)."""
    ctx = server.make_context(call)
    try:
        return await forward(router.pool, route.upstream, ctx, method, params,
                             tool=route.definition)
    except inputs._InputRequired as need:
        return server.input_required_result(call, ctx, need)


async def _forward_or_fail(
    router: HubRouter, server: Server, call: Call, route: Route, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    try:
        return await _forward(router, server, call, route, method, params)
    except UpstreamNeedsAuth as refused:
        await router.upstream_needs_auth(route.upstream, str(refused))
        raise errors.McpError(errors.INTERNAL_ERROR, f"upstream needs authorization: {refused}",
                              {"upstream": route.upstream.name,
                               "login": refused.login_path}) from None
    except UpstreamDown as down:
        await router.upstream_down(route.upstream, str(down))
        raise errors.internal_error(f"upstream unavailable: {down}") from None


RouterHandler = Callable[["HubRouter", "Server", Call], Awaitable[dict[str, Any]]]
"""A hub handler: a plain server's handler with the hub's router passed first."""

HANDLERS: dict[str, RouterHandler] = {
    "tools/list": list_tools,
    "tools/call": call_tool,
    "prompts/list": list_prompts,
    "prompts/get": get_prompt,
    "resources/list": list_resources,
    "resources/templates/list": list_templates,
    "resources/read": read_resource,
    "resources/subscribe": subscribe,
    "completion/complete": complete,
}


def methods(router: HubRouter) -> dict[str, Callable[[Server, Call], Awaitable[dict[str, Any]]]]:
    """The method table entries of `router`'s server: each handler with the router bound,
    in the (server, call) shape the Engine calls."""
    return {method: partial(handler, router) for method, handler in HANDLERS.items()}
