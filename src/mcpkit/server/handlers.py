"""The handlers of each MCP method, as plain functions of (server, call) → result dict."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio

from mcpkit.protocol import errors, jsonrpc, meta, pagination, versions
from mcpkit.server import inputs, notifier, prompts, results, tasks, tools
from mcpkit.server.call import Call
from mcpkit.server.connection import LegacySession
from mcpkit.server.context import Context

if TYPE_CHECKING:
    from mcpkit.server.server import Server


def _string_param(call: Call, name: str) -> str:
    value = call.params.get(name)
    if not isinstance(value, str):
        raise errors.invalid_params(f'"{name}" must be a string')
    return value


def _cursor(call: Call) -> str | None:
    cursor = call.params.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise errors.invalid_params('"cursor" must be a string')
    return cursor


class _Scoped(Protocol):
    scopes: frozenset[str]


_S = TypeVar("_S", bound=_Scoped)


def _visible(items: Iterable[_S], call: Call) -> list[_S]:
    """The items the caller's scopes allow it to see (all of them without `call.auth`)."""
    auth = call.auth
    if auth is None:
        return list(items)
    return [item for item in items if item.scopes <= auth.scopes]


async def _invoke(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    value = fn(**kwargs)
    if inspect.isawaitable(value):
        value = await value
    return value


# --- lifecycle ------------------------------------------------------------------------------


async def initialize(server: Server, call: Call) -> dict[str, Any]:
    requested = _string_param(call, "protocolVersion")
    caps = call.params.get("capabilities", {})
    info = call.params.get("clientInfo", {})
    if not isinstance(caps, dict) or not isinstance(info, dict):
        raise errors.invalid_params('"capabilities" and "clientInfo" must be objects')
    version = versions.negotiate_legacy_version(requested, server.legacy_versions)
    call.connection.legacy = LegacySession(version, caps, info)
    result: dict[str, Any] = {
        "protocolVersion": version,
        "capabilities": server.capabilities(),
        "serverInfo": server.info(),
    }
    if server.instructions:
        result["instructions"] = server.instructions
    return result


async def discover(server: Server, call: Call) -> dict[str, Any]:
    result: dict[str, Any] = {
        "supportedVersions": list(server.modern_versions),
        "capabilities": server.capabilities(),
    }
    if server.instructions:
        result["instructions"] = server.instructions
    return result


async def ping(server: Server, call: Call) -> dict[str, Any]:
    return {}


async def set_level(server: Server, call: Call) -> dict[str, Any]:
    level = _string_param(call, "level")
    if level not in meta.LOG_LEVELS:
        raise errors.invalid_params(f"unknown log level {level!r}")
    _session(call).log_level = level
    return {}


# --- tools ------------------------------------------------------------------------------------


async def list_tools(server: Server, call: Call) -> dict[str, Any]:
    page, next_cursor = pagination.paginate(
        "tools", server.tool_list(call.auth), _cursor(call), server.page_size
    )
    result: dict[str, Any] = {"tools": [t.to_wire() for t in page]}
    if next_cursor:
        result["nextCursor"] = next_cursor
    return result


async def call_tool(server: Server, call: Call) -> dict[str, Any]:
    name = _string_param(call, "name")
    tool = server.tools.get(name)
    if tool is None:
        raise errors.invalid_params(f"Unknown tool: {name}", {"name": name})
    arguments = call.params.get("arguments")
    if arguments is None:
        arguments = {}
    elif not isinstance(arguments, dict):
        raise errors.invalid_params('"arguments" must be an object')
    if tool.required_capabilities:
        server.require_client_capabilities(tool.required_capabilities, call)
    as_task = tasks.run_as_task(server, call, tool)
    kwargs, problems = tool.validate_arguments(arguments)
    if problems:
        return tools.error_result(f"Invalid arguments for tool {name}: " + "; ".join(problems))
    if as_task:
        return await _start_task(server, call, tool, kwargs)
    return await run_with_inputs(server, call, tool.context_param, tool.fn, kwargs, tool)


async def _start_task(
    server: Server, call: Call, tool: tools.ToolDef, kwargs: dict[str, Any]
) -> dict[str, Any]:
    async def execute(ctx: Context) -> dict[str, Any]:
        run_kwargs = dict(kwargs)
        if tool.context_param is not None:
            run_kwargs[tool.context_param] = ctx
        return await run_handler(tool.fn, run_kwargs, tool)

    return await server.tasks.start(
        server,
        call,
        server.make_context,
        execute,
        escalates_itself=bool(getattr(tool.fn, tasks.ESCALATES, False)),
    )


async def run_with_inputs(
    server: Server,
    call: Call,
    context_param: str | None,
    fn: Callable[..., Any],
    kwargs: dict[str, Any],
    tool: tools.ToolDef | None = None,
    shape: Callable[[Any], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run a handler that may ask for client input; shape its value into a result."""
    ctx: Context | None = None
    if context_param is not None:
        ctx = server.make_context(call)
        kwargs[context_param] = ctx
    try:
        return await run_handler(fn, kwargs, tool, shape)
    except inputs._InputRequired as need:
        assert ctx is not None
        return server.input_required_result(call, ctx, need)


async def run_handler(
    fn: Callable[..., Any],
    kwargs: dict[str, Any],
    tool: tools.ToolDef | None = None,
    shape: Callable[[Any], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run a handler and shape its value into a result; `_InputRequired` propagates."""
    try:
        value = await _invoke(fn, kwargs)
    except errors.McpError:
        raise
    except Exception as exc:
        if tool is None:
            raise
        return tools.error_result(f"Error executing tool {tool.name}: {exc}")
    if tool is not None:
        result = tool.make_result(value)
        problems = tool.output_errors(result)
        if problems:
            return tools.error_result(
                f"Tool {tool.name} returned output that does not match its outputSchema: "
                + "; ".join(problems)
            )
        return result
    assert shape is not None
    return shape(value)


# --- resources -------------------------------------------------------------------------------


async def list_resources(server: Server, call: Call) -> dict[str, Any]:
    page, next_cursor = pagination.paginate(
        "resources", _visible(server.resources.values(), call), _cursor(call), server.page_size
    )
    result: dict[str, Any] = {"resources": [r.to_wire() for r in page]}
    if next_cursor:
        result["nextCursor"] = next_cursor
    return result


async def list_templates(server: Server, call: Call) -> dict[str, Any]:
    page, next_cursor = pagination.paginate(
        "templates", _visible(server.templates, call), _cursor(call), server.page_size
    )
    result: dict[str, Any] = {"resourceTemplates": [t.to_wire() for t in page]}
    if next_cursor:
        result["nextCursor"] = next_cursor
    return result


async def read_resource(server: Server, call: Call) -> dict[str, Any]:
    uri = _string_param(call, "uri")
    resource = server.resources.get(uri)
    if resource is not None:
        fn, kwargs, ctx_param, mime = resource.read, {}, resource.context_param, resource.mime_type
    else:
        for template in server.templates:
            found = template.match(uri)
            if found is not None:
                fn, kwargs = template.read, dict(found)
                ctx_param, mime = template.context_param, template.mime_type
                break
        else:
            raise errors.resource_not_found(uri, legacy_code=not call.modern)

    def shape(value: Any) -> dict[str, Any]:
        return {"contents": results.resource_contents(uri, value, mime)}

    return await run_with_inputs(server, call, ctx_param, fn, kwargs, shape=shape)


def _session(call: Call) -> LegacySession:
    """The legacy session of a legacy-only method (the engine routes those only to one)."""
    session = call.connection.legacy
    if session is None:
        raise errors.invalid_request(f"{call.method} needs an initialized session")
    return session


async def subscribe(server: Server, call: Call) -> dict[str, Any]:
    """Kept for the session's whole life, so bounded in number and in URI length."""
    subscriptions = _session(call).subscriptions
    uri = _string_param(call, "uri")
    if len(uri) > server.max_subscription_uri_chars:
        raise errors.invalid_params(
            f'"uri" is longer than {server.max_subscription_uri_chars} characters',
            {"limit": server.max_subscription_uri_chars})
    if uri not in subscriptions and len(subscriptions) >= server.max_subscriptions:
        raise errors.invalid_params(
            f"this session is already subscribed to {server.max_subscriptions} resources "
            "(the limit); unsubscribe from one first", {"limit": server.max_subscriptions})
    subscriptions.add(uri)
    return {}


async def unsubscribe(server: Server, call: Call) -> dict[str, Any]:
    _session(call).subscriptions.discard(_string_param(call, "uri"))
    return {}


# --- prompts ------------------------------------------------------------------------------------


async def list_prompts(server: Server, call: Call) -> dict[str, Any]:
    page, next_cursor = pagination.paginate(
        "prompts", _visible(server.prompts.values(), call), _cursor(call), server.page_size
    )
    result: dict[str, Any] = {"prompts": [p.to_wire() for p in page]}
    if next_cursor:
        result["nextCursor"] = next_cursor
    return result


async def get_prompt(server: Server, call: Call) -> dict[str, Any]:
    name = _string_param(call, "name")
    prompt = server.prompts.get(name)
    if prompt is None:
        raise errors.invalid_params(f"Unknown prompt: {name}", {"name": name})
    given = call.params.get("arguments") or {}
    if not isinstance(given, dict):
        raise errors.invalid_params('"arguments" must be an object')
    kwargs = prompt.check_arguments(given)

    def shape(value: Any) -> dict[str, Any]:
        return prompts.prompt_result(value, prompt.description)

    return await run_with_inputs(server, call, prompt.context_param, prompt.fn, kwargs, shape=shape)


# --- completion ---------------------------------------------------------------------------------


async def complete(server: Server, call: Call) -> dict[str, Any]:
    ref = call.params.get("ref")
    argument = call.params.get("argument")
    if not isinstance(ref, dict) or not isinstance(argument, dict):
        raise errors.invalid_params('"ref" and "argument" must be objects')
    key = server.completion_key(ref)
    arg_name, arg_value = argument.get("name"), argument.get("value", "")
    if not isinstance(arg_name, str) or not isinstance(arg_value, str):
        raise errors.invalid_params('"argument" needs a string "name" and "value"')
    context = call.params.get("context") or {}
    known = context.get("arguments") if isinstance(context, dict) else None
    completer = server.completions.get(key) or server.completions.get(("*", "*"))
    values: Any = []
    if completer is not None:
        values = await _invoke(
            completer, {"argument": arg_name, "value": arg_value, "context": known or {}}
        )
    if isinstance(values, dict):
        return {"completion": values}
    listed = [str(v) for v in values]
    completion: dict[str, Any] = {"values": listed[:100], "total": len(listed)}
    completion["hasMore"] = len(listed) > 100
    return {"completion": completion}


# --- subscriptions (modern) ----------------------------------------------------------------------


def _check_resource_subscriptions(server: Server, uris: Any) -> None:
    """A listen stream keeps its URIs for as long as it is open (and every resource update
    is matched against them): the same bounds as a legacy session's `resources/subscribe`
    (a 4 MiB body of short URIs held ~1.4 MiB per stream, 512 streams per caller)."""
    if not isinstance(uris, list):
        return
    if len(uris) > server.max_subscriptions:
        raise errors.invalid_params(
            f'"resourceSubscriptions" lists {len(uris)} URIs, over the limit of '
            f"{server.max_subscriptions}", {"limit": server.max_subscriptions})
    limit = server.max_subscription_uri_chars
    if any(isinstance(uri, str) and len(uri) > limit for uri in uris):
        raise errors.invalid_params(
            f'a URI in "resourceSubscriptions" is longer than {limit} characters',
            {"limit": limit})


async def listen(server: Server, call: Call) -> dict[str, Any]:
    wanted = call.params.get("notifications") or {}
    if not isinstance(wanted, dict):
        raise errors.invalid_params('"notifications" must be an object')
    _check_resource_subscriptions(server, wanted.get("resourceSubscriptions"))
    honoured = server.honoured_filter(wanted)
    listener = notifier.Listener(
        call.request_id, honoured, call.channel, principal=call.principal
    )
    ack = {"_meta": {meta.SUBSCRIPTION_ID: call.request_id}, "notifications": honoured}
    await call.channel.send(
        jsonrpc.encode_notification("notifications/subscriptions/acknowledged", ack)
    )
    server.notifier.add_listener(listener)  # ended at once if the server is stopping
    try:
        await listener.ended.wait()
    finally:
        server.notifier.listeners.discard(listener)
    await anyio.lowlevel.checkpoint()
    return {"_meta": {meta.SUBSCRIPTION_ID: call.request_id}}
