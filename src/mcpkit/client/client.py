"""`Client`: one API for any MCP server, whatever its era and transport.

    async with Client("http://127.0.0.1:8000/mcp") as client:
        tools = await client.list_tools()
        result = await client.call_tool("add", {"a": 1, "b": 2})

    async with Client(["npx", "-y", "@modelcontextprotocol/server-everything"]) as client: ...
    async with Client(my_server) as client: ...            # a mcpkit Server, in memory

Connecting settles the era (`mcpkit.client.negotiation`): modern servers are spoken to
statelessly with `_meta` on every request; legacy ones get `initialize` and a session. The
methods below behave the same in both eras; where an era lacks a feature the difference is
documented on the method.

This module holds the typed API and wires the Client's parts together, each in a module
of its own: `options` (the grouped settings), `negotiation` (the era), `sending` and
`rounds` (a request in each era), `listen`, `catalog`, `task_calls`, `notifications`.
They never see the Client: only what they are given, and its `live.LiveState`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Literal

import anyio

from mcpkit.auth.provider import HttpAuth
from mcpkit.client import legacy_tasks, listing, task_calls
from mcpkit.client.catalog import ToolCatalog
from mcpkit.client.errors import ClientError, ClientMisuse
from mcpkit.client.hosting import HostedTaskGroup
from mcpkit.client.listen import ListenStream
from mcpkit.client.negotiation import pinned
from mcpkit.client.notifications import Notifications
from mcpkit.client.options import Behaviour, Limits, settle, warn_old_version
from mcpkit.client.responders import Responders
from mcpkit.client.results import as_dict, typed
from mcpkit.client.sending import wire
from mcpkit.client.session import ClientSession, ProgressCallback, ServerError, Timeouts
from mcpkit.client.targets import ConnectOptions, kind_of, make_transport
from mcpkit.errors import InvalidArgument, Timeout
from mcpkit.protocol import errors, types
from mcpkit.protocol.versions import MODERN_VERSIONS, Era
from mcpkit.transports.client.base import ClientTransport, ConnectionClosed

log = logging.getLogger(__name__)

Limit = float | Literal["default"] | None
"""Seconds, None for no limit, or "default" for the client's setting."""


class Client:
    """A connection to one MCP server (an async context manager)."""

    def __init__(
        self,
        target: object,
        *,
        era: str = "auto",
        connect: ConnectOptions | None = None,
        timeouts: Timeouts | None = None,
        responders: Responders | None = None,
        notifications: Notifications | None = None,
        limits: Limits | None = None,
        behaviour: Behaviour | None = None,
        bearer_token: str | None = None,
        auth: HttpAuth | None = None,
        **deprecated: Any,
    ) -> None:
        """Describe the connection; nothing happens until `async with` (or `connect()`).

        `target`: a URL, a command list (stdio), a mcpkit `Server` (in memory) or a
        transport. `era`: "auto" (detected, cached per server), "modern", "legacy" or a
        protocol version ("2025-11-25"), which pins its era. The other groups are value
        objects with defaults, described in `mcpkit.client.options`; `auth=OAuth(…)`
        authorizes by OAuth. `bearer_token` is a shortcut for `connect=ConnectOptions(
        bearer_token=…)`. The flat keywords of earlier releases (`timeout=`, `version=`,
        …) still work, with a DeprecationWarning naming the new form."""
        if "version" in deprecated:
            warn_old_version()
        pinned_era, pinned_version = pinned(era, deprecated.pop("version", None))
        given = settle({"connect": connect, "timeouts": timeouts, "responders": responders,
                        "notifications": notifications, "limits": limits,
                        "behaviour": behaviour}, bearer_token, deprecated, auth)
        self.target = target
        # A copy, with the transport kind settled (an HTTP+SSE fallback changes it).
        self._connect = dataclasses.replace(given.connect, kind=kind_of(target, given.connect))
        self.default_timeouts = given.timeouts
        self.responders = given.responders
        self.notifications = given.notifications
        self.limits = given.limits
        self.behaviour = given.behaviour
        self.log_level = given.behaviour.log_level
        self._catalog = ToolCatalog()
        self._listen = ListenStream(self.request, self.describe)
        self._negotiated, self._sender = wire(
            self, pinned_era, pinned_version, given, self._listen, self._catalog,
            target=target, connect=self._connect, open_transport=self._open)
        self._hosted = HostedTaskGroup()
        self._session: ClientSession | None = None

    # --- what the server is (settled by connecting) ------------------------------------------

    @property
    def era(self) -> Era | None:
        return self._negotiated.era

    @property
    def protocol_version(self) -> str | None:
        return self._negotiated.protocol_version

    @property
    def server_info(self) -> types.Implementation | None:
        return self._negotiated.server_info

    @property
    def server_capabilities(self) -> dict[str, Any]:
        return self._negotiated.server_capabilities

    @property
    def instructions(self) -> str | None:
        return self._negotiated.instructions

    @property
    def supported_versions(self) -> list[str]:
        return self._negotiated.supported_versions

    # --- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> Client:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Open the transport and settle the era (within `ConnectOptions.connect_timeout`).

        The client's background work (readers, answering the server) runs in a task
        group hosted by a task of its own, so a connected client may be used from any task
        of the event loop and closed from any other: `connect()` and `close()` need not
        share a task or a cancel scope. (asyncio only, like the HTTP transports.)
        """
        if self._hosted.running:
            raise ClientMisuse("this Client is already connected")
        await self._hosted.open()
        seconds = self._connect.connect_timeout
        try:
            with anyio.move_on_after(seconds) as deadline:
                await self._open(make_transport(self.target, str(self._connect.kind),
                                                self._connect))
                await self._negotiated.connect()
        except BaseException:
            await self.close()
            raise
        if deadline.cancelled_caught:
            await self.close()
            raise Timeout(f"connecting to {self.describe()} took longer than {seconds:g} s")

    async def close(self) -> None:
        """Close the connection (ends a legacy HTTP session; stops a stdio child)."""
        if not self._hosted.running:
            return
        with anyio.CancelScope(shield=True):
            # The listen request tells the server it is cancelled before the transport
            # goes (on stdio the server would otherwise hold it open).
            await self._listen.stop()
            if self._session is not None:
                await self._session.transport.close()
                self._session.closed(ConnectionClosed("the client closed the connection"))
            await self._hosted.close()

    @property
    def closed_reason(self) -> BaseException | None:
        """Why the connection ended (None while it is open or before it was opened)."""
        return None if self._session is None else self._session.closed_reason

    async def wait_closed(self) -> BaseException:
        """Until the connection ends (a stdio server exits, the client closes): the reason."""
        session = self.session
        await session.ended.wait()
        reason = session.closed_reason
        assert reason is not None
        return reason

    def describe(self) -> str:
        return repr(self.target) if self._session is None else self._session.transport.describe()

    @property
    def session(self) -> ClientSession:
        if self._session is None:
            raise ClientMisuse("the Client is not connected: use `async with Client(...)`")
        return self._session

    async def _open(self, transport: ClientTransport) -> None:
        self._session = ClientSession(transport, on_request=self.responders.answer,
                                      on_notification=self._on_notification,
                                      limits=self.limits.inbound)
        await self._session.open(self._hosted.group)

    # --- requests, both eras ------------------------------------------------------------------

    async def request(self, method: str, params: Mapping[str, Any] | None = None, *,
                      on_progress: ProgressCallback | None = None, timeout: Limit = "default",
                      max_timeout: Limit = "default", answer_inputs: bool = True) -> Any:
        """Send any request in the connection's era and return its result (plain JSON).

        Modern: adds `_meta` and the HTTP headers, and answers `input_required` rounds for
        tools/call, prompts/get and resources/read (`answer_inputs=False` returns such a
        result as it is, for a caller that relays the questions elsewhere). Legacy: retries
        once on a new session if the server forgot this one.
        """
        limits = self.default_timeouts.overridden(timeout, max_timeout)
        body = dict(params or {})
        if self._negotiated.era is Era.MODERN:
            return await self._sender.modern(method, body, on_progress, limits, answer_inputs)
        return await self._sender.legacy(method, body, on_progress, limits)

    @property
    def can_exchange(self) -> bool:
        """Whether `exchange` works: a modern server over Streamable HTTP."""
        return self._negotiated.era is Era.MODERN and self.session.can_exchange

    async def exchange(self, method: str, params: Mapping[str, Any]) -> Any:
        """A modern request answered in the calling task, for a caller that forwards
        requests (the hub): no progress, an `input_required` result returned as it is, the
        client's time limits as one deadline; log messages on the request's stream reach
        `on_log` as usual. Cheaper than `request` (no task, no pending entry, no timer);
        only where `can_exchange`. Errors are `request`'s: `ServerError`, `RequestTimeout`,
        `TransportError`."""
        body = self._sender.with_meta(dict(params), None)
        return await self.session.exchange(method, body, timeouts=self.default_timeouts,
                                           headers=self._sender.headers_for(method, body))

    # --- typed requests ----------------------------------------------------------------------

    async def discover(self) -> types.DiscoverResult:
        """`server/discover`. On a legacy server: the same facts from `initialize`."""
        if self.era is Era.MODERN:
            result = await self.request("server/discover")
            self._negotiated.adopt_discover(result, self.protocol_version or MODERN_VERSIONS[0])
            return typed(result, types.DiscoverResult, "server/discover")
        return self._negotiated.as_discover_result()

    async def ping(self) -> None:
        """Check the server answers (modern servers have no `ping`: `server/discover`)."""
        await self.request("ping" if self.era is Era.LEGACY else "server/discover")

    async def list_tools(self) -> list[types.Tool]:
        """Every tool (all pages). Modern era: tools whose `x-mcp-header` annotations are
        invalid are left out (spec: clients must not call them), with a warning."""
        raw = await self._list_all("tools/list", "tools")
        kept = self._catalog.adopt(raw, modern=self.era is Era.MODERN)
        return [typed(tool, types.Tool, "tools/list") for tool in kept]

    def know_tool(self, tool: Mapping[str, Any]) -> None:
        """Take `tool` (its wire object) as the server's, as `list_tools` would: its
        `x-mcp-header` arguments then go with its calls as `Mcp-Param-*` headers (modern
        era). For a relay that lists tools on one connection and calls them on another
        (the hub: its stored catalog, its pooled connection)."""
        self._catalog.know(tool)

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None, *,
                        on_progress: ProgressCallback | None = None, timeout: Limit = "default",
                        max_timeout: Limit = "default", meta: Mapping[str, Any] | None = None,
                        task: bool | None = None) -> types.CallToolResult:
        """Call a tool. A tool failure is a result with `is_error` (not an exception).

        When the tool declares an `outputSchema`, `structured_content` is checked against
        it (`InvalidToolOutput`); the catalog is fetched once for that if needed.
        A tool the server runs as a task is followed to its result (see `__init__`);
        `task` says whether to run an "optional" one as a task (default:
        `Behaviour.tasks`). `max_timeout` bounds the whole call, task included.
        """
        tool = await self._known_tool(name)
        if tool is None and name in self._catalog.unsafe:
            raise ClientError(
                f"tool {name!r} has invalid x-mcp-header annotations; refusing to call it")
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        if meta:
            params["_meta"] = dict(meta)
        server = self._negotiated
        how = task_calls.plan(tool, self.behaviour.tasks if task is None else task,
                              self.behaviour.tasks, server.era, server.protocol_version,
                              server.server_capabilities)
        if how.legacy_task:
            params["task"] = {}
        send = self._sender.declaring_tasks if how.declare_extension else self.request
        started = anyio.current_time()
        result = await send("tools/call", params, on_progress=on_progress,
                            timeout=timeout, max_timeout=max_timeout)
        result = await task_calls.follow(
            result, era=server.era, request=self.request, send=send,
            responders=self.responders, capabilities=server.server_capabilities, started=started,
            maximum=self.default_timeouts.overridden(timeout, max_timeout).maximum,
            max_polls=self.limits.task_polls)
        typed_result = typed(result, types.CallToolResult, "tools/call")
        if tool is not None and self.behaviour.validate_output:
            self._catalog.check_output(name, tool, typed_result)
        return typed_result

    def _needs_catalog(self) -> bool:
        """Whether calls need the catalog: which tools need task execution, their output
        schemas, their x-mcp-header arguments."""
        server = self._negotiated
        capabilities = server.server_capabilities
        return "tools" in capabilities and (self.behaviour.validate_output or (
            legacy_tasks.server_runs_tool_tasks(server.protocol_version, capabilities)
            if server.era is Era.LEGACY else self.session.transport.per_request_streams
            or "extensions" in capabilities))

    async def _known_tool(self, name: str) -> dict[str, Any] | None:
        if self._catalog.tools is None and self._needs_catalog():
            try:
                await self.list_tools()
            except (ServerError, errors.ProtocolError) as exc:
                log.info("could not list tools of %s: %s", self.describe(), exc)
                self._catalog.tools = {}
        return (self._catalog.tools or {}).get(name)

    async def list_resources(self) -> list[types.Resource]:
        raw = await self._list_all("resources/list", "resources")
        return [typed(item, types.Resource, "resources/list") for item in raw]

    async def list_resource_templates(self) -> list[types.ResourceTemplate]:
        raw = await self._list_all("resources/templates/list", "resourceTemplates")
        return [typed(item, types.ResourceTemplate, "resources/templates/list") for item in raw]

    async def read_resource(self, uri: str, **kwargs: Any) -> types.ReadResourceResult:
        result = await self.request("resources/read", {"uri": uri}, **kwargs)
        return typed(result, types.ReadResourceResult, "resources/read")

    async def list_prompts(self) -> list[types.Prompt]:
        raw = await self._list_all("prompts/list", "prompts")
        return [typed(item, types.Prompt, "prompts/list") for item in raw]

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None, **kwargs: Any
    ) -> types.GetPromptResult:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        result = await self.request("prompts/get", params, **kwargs)
        return typed(result, types.GetPromptResult, "prompts/get")

    async def complete(self, ref: Mapping[str, Any], argument_name: str, value: str, *,
                       context: Mapping[str, str] | None = None
                       ) -> types.CompleteResultCompletion:
        """`completion/complete` for a prompt (`{"type": "ref/prompt", "name": …}`) or a
        resource template (`{"type": "ref/resource", "uri": …}`) argument."""
        params: dict[str, Any] = {"ref": dict(ref), "argument": {"name": argument_name,
                                                                 "value": value}}
        if context is not None:
            params["context"] = {"arguments": dict(context)}
        result = await self.request("completion/complete", params)
        return typed(result, types.CompleteResult, "completion/complete").completion

    async def set_logging_level(self, level: str) -> None:
        """Legacy: `logging/setLevel`. Modern: sent as `_meta.logLevel` on every request
        from now on (the modern era has no session to hold it)."""
        if level not in types.LoggingLevel.__args__:  # type: ignore[attr-defined]
            raise InvalidArgument(f"unknown log level {level!r}")
        self.log_level = level
        if self.era is Era.LEGACY:
            await self.request("logging/setLevel", {"level": level})

    async def subscribe(self, uri: str) -> None:
        """Get `on_resource_updated(uri)` calls when the resource changes (legacy:
        `resources/subscribe`; modern: added to the `subscriptions/listen` stream)."""
        self._listen.subscriptions.add(uri)
        if self.era is Era.LEGACY:
            await self.request("resources/subscribe", {"uri": uri})
        else:
            await self._restart_listen()

    async def unsubscribe(self, uri: str) -> None:
        self._listen.subscriptions.discard(uri)
        if self.era is Era.LEGACY:
            await self.request("resources/unsubscribe", {"uri": uri})
        else:
            await self._restart_listen()

    async def listen(self, *, tools: bool = True, prompts: bool = True,
                     resources: bool = True) -> None:
        """Receive list-changed notifications (and updates of subscribed resources).

        Modern: opens a `subscriptions/listen` stream in the background (returns once the
        server acknowledged it). Legacy: the session already carries them; nothing to do.
        """
        self._listen.filter = {"toolsListChanged": tools, "promptsListChanged": prompts,
                               "resourcesListChanged": resources}
        if self.era is Era.MODERN:
            await self._restart_listen()

    # --- tasks (extension) ---------------------------------------------------------------------

    async def get_task(self, task_id: str) -> dict[str, Any]:
        """`tasks/get`: the task's status (and, in the modern tasks extension, its result)."""
        return as_dict(await self.request("tasks/get", {"taskId": task_id}))

    async def cancel_task(self, task_id: str) -> dict[str, Any]:
        return as_dict(await self.request("tasks/cancel", {"taskId": task_id}))

    async def update_task(self, task_id: str, input_responses: Mapping[str, Any]
                          ) -> dict[str, Any]:
        """Modern tasks extension: answer a task that is waiting for input."""
        return as_dict(await self.request(
            "tasks/update", {"taskId": task_id, "inputResponses": dict(input_responses)}))

    async def list_tasks(self) -> list[dict[str, Any]]:
        """Legacy (2025-11-25) `tasks/list`, all pages."""
        return [as_dict(t) for t in await self._list_all("tasks/list", "tasks")]

    async def task_result(self, task_id: str) -> dict[str, Any]:
        """Legacy (2025-11-25) `tasks/result`: waits for the task and returns its result."""
        return as_dict(await self.request("tasks/result", {"taskId": task_id}, timeout=None))

    async def _restart_listen(self) -> None:
        await self._listen.restart(self._hosted.group, self.default_timeouts.timeout or 30.0)

    # --- what the server sends ---------------------------------------------------------------

    async def _on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/tools/list_changed":
            self._catalog.forget()
        elif method == "notifications/subscriptions/acknowledged":
            self._listen.acknowledge()
        await self.notifications.deliver(method, params)

    async def notify_roots_changed(self) -> None:
        """Tell a legacy server the roots changed (modern servers ask for roots each time)."""
        if self.era is Era.LEGACY:
            await self.session.notify("notifications/roots/list_changed")

    # --- lists -------------------------------------------------------------------------------

    async def _list_all(self, method: str, key: str) -> list[Any]:
        """Every page of a list, within `Limits.lists` (ListTooLarge past them)."""
        return await listing.every_item(self.list_pages(method, key))

    def list_pages(self, method: str, key: str) -> AsyncGenerator[list[Any], None]:
        """The `key` items of each page of the paginated `method`, as they arrive, following
        `nextCursor` within `Limits.lists` (ListTooLarge past them; a repeated cursor is a
        ProtocolError). For a caller that checks items page by page (the hub's catalog)."""
        return listing.pages(self.request, self.limits.lists, method, key)
