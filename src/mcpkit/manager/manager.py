"""`ServerManager`: many MCP servers as one catalog.

    async with ServerManager.from_config() as manager:        # the config files' servers
        for tool in manager.tools():                           # mcp__<server>__<tool>
            ...
        result = await manager.call_tool("mcp__files__read_file", {"path": "README.md"})

- Every enabled server starts in parallel, each bounded by its `startup_timeout_sec`. One
  that fails is marked failed with the reason and the others go on, unless it is
  `required` (then `start()` raises `RequiredServerFailed` and nothing is left running).
- A URL server starts with the OAuth login kept for it (`mcpkit mcp login`), refreshed as
  needed. One that asks for a login it does not have is `needs_auth`, not failed, with the
  command that logs in (`server.login`); nothing prompts (`login.py`).
- Tools are exposed as `mcp__<server>__<tool>` (`names.py`: sanitized, ≤ 64 characters,
  collisions resolved and recorded in `name_collisions`); prompts the same way; resources
  keep their URIs and are read through their server. `enabled_tools`/`disabled_tools`
  apply to listing and calling alike.
- A server's catalog is listed again when it says it changed (`list_changed`; modern
  servers through `subscriptions/listen`); `on_change(server, kind)` is told.
- A crashed stdio server is restarted with backoff (`RestartPolicy`); an HTTP server that
  forgot its session is re-initialized by its `Client`. A call cut off by a crash is
  repeated only for read-only tools.
- `permission(request)` is asked before every tool call (allow / deny / ask; "ask" goes to
  `ask(request)`); `output_budget` cuts long text results, keeping head and tail.

The manager's background work (crash watchers, restarts, refreshes) runs in a task group
hosted by a task of its own, so `start()` and `close()` may be called from different tasks.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio

from mcpkit.client import Client, ConnectOptions, Notifications, Timeouts
from mcpkit.client.hosting import HostedTaskGroup
from mcpkit.client.session import ProgressCallback
from mcpkit.manager import budget, permissions
from mcpkit.manager.catalog import ManagedTool
from mcpkit.manager.config import ConfigError, ServerConfig
from mcpkit.manager.errors import (
    ManagerError,
    RequiredServerFailed,
    ToolNotAllowed,
    UnknownTool,
)
from mcpkit.manager.login import server_auth
from mcpkit.manager.managed import REFRESH_INTERVAL_S, ManagedServer, RestartPolicy, Status
from mcpkit.manager.names import NameTable
from mcpkit.manager.permissions import AskHook, PermissionHook, ToolCallRequest
from mcpkit.protocol import types

log = logging.getLogger(__name__)

ChangeListener = Callable[[str, str], Awaitable[None] | None]
"""`on_change(server, kind)`: a server's catalog changed (kind: tools/prompts/resources/all)."""


@dataclass(frozen=True, slots=True)
class ManagedPrompt:
    name: str
    """Exposed name: `mcp__<server>__<prompt>`."""
    server: str
    prompt: types.Prompt


@dataclass(frozen=True, slots=True)
class ManagedResource:
    server: str
    resource: types.Resource


class ServerManager:
    def __init__(
        self,
        servers: Iterable[ServerConfig],
        *,
        permission: PermissionHook | None = None,
        ask: AskHook | None = None,
        output_budget: int | None = None,
        on_change: ChangeListener | None = None,
        restart: RestartPolicy | None = None,
        environ: Mapping[str, str] | None = None,
        client_options: Mapping[str, Any] | None = None,
        refresh_interval_s: float = REFRESH_INTERVAL_S,
    ) -> None:
        """`client_options` are passed to every `mcpkit.Client` (e.g. `era=`,
        `responders=Responders(…)`, `notifications=Notifications(on_log=…)`; the
        connection itself comes from the server's config); `environ` is where `env_vars` and
        `bearer_token_env_var` are read (default: this process's environment).
        `refresh_interval_s`: the least time between two catalog refreshes of one server
        for its list changes (they are coalesced)."""
        self.servers: dict[str, ManagedServer] = {}
        policy = restart or RestartPolicy()
        for config in servers:
            if config.name in self.servers:
                raise ConfigError(f"duplicate server name {config.name!r}")
            self.servers[config.name] = ManagedServer(
                config, make_client=self._make_client, on_catalog=self._catalog_changed,
                restart=policy, refresh_interval_s=refresh_interval_s)
        self.permission = permission
        self.ask = ask
        self.output_budget = output_budget
        self.on_change = on_change
        self._environ = os.environ if environ is None else environ
        self._client_options = dict(client_options or {})
        self._tool_names = NameTable()
        self._prompt_names = NameTable()
        self._tools: dict[str, ManagedTool] = {}
        self._prompts: dict[str, ManagedPrompt] = {}
        self._built_for: tuple[Any, ...] = ()
        self._hosted = HostedTaskGroup()
        self._logins: dict[str, Any] = {}
        """Server name → its `OAuth` (kept login) or `MachineAuth` (found by `start`)."""

    @classmethod
    def from_config(cls, *, cwd: Path | None = None, **options: Any) -> ServerManager:
        """The servers of the user's and the project's config files (`configfile.load`)."""
        from mcpkit.manager import configfile

        loaded = configfile.load(cwd=cwd, environ=options.get("environ"))
        return cls(loaded.servers.values(), **options)

    # --- lifecycle -----------------------------------------------------------------------

    async def __aenter__(self) -> ServerManager:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Start every enabled server in parallel; returns when each is ready or failed."""
        if self._hosted.running:
            raise ManagerError("this ServerManager is already started")
        tg = await self._hosted.open()
        try:
            await self._find_logins()
            async with anyio.create_task_group() as starting:
                for server in self.servers.values():
                    if server.config.enabled:
                        starting.start_soon(server.start, tg)
        except BaseException:
            await self.close()
            raise
        self._rebuild_names()
        failed = [s for s in self.servers.values()
                  if s.config.required and s.status is not Status.READY]
        if failed:
            await self.close()
            raise RequiredServerFailed("; ".join(f"required MCP server {s.name} failed: "
                                                 f"{s.error}" for s in failed))

    async def close(self) -> None:
        """Stop every server (stdio children end; HTTP sessions are closed)."""
        if not self._hosted.running:
            return
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for server in self.servers.values():
                    tg.start_soon(server.stop)
            await self._hosted.close()

    # --- clients -------------------------------------------------------------------------

    async def _find_logins(self) -> None:
        """The authorization of each enabled URL server with no token of its own: its kept
        OAuth login (`mcpkit mcp login`) or its client_credentials grant (`login.py`); an
        `auth` in `client_options` wins."""
        if "auth" in self._client_options:
            return
        for server in self.servers.values():
            if server.config.enabled and server.config.type != "stdio":
                auth = await server_auth(server.config, self._environ)
                if auth is not None:
                    self._logins[server.name] = auth

    def _make_client(self, server: ManagedServer) -> Client:
        config = server.config
        options: dict[str, Any] = {"timeouts": Timeouts(timeout=config.tool_timeout_sec),
                                   **self._client_options}
        # The server's own list changes keep its catalog fresh unless the caller listens.
        notifications = options.pop("notifications", None) or Notifications()
        if notifications.on_list_changed is None:
            notifications = replace(notifications, on_list_changed=server.list_changed)
        if config.type == "stdio":
            connect = ConnectOptions(env=config.child_env(self._environ), cwd=config.cwd)
        else:
            connect = ConnectOptions(headers=config.headers,
                                     bearer_token=config.bearer_token(self._environ))
        connect = replace(connect, kind=config.client_kind,
                          connect_timeout=config.startup_timeout_sec)
        login = self._logins.get(server.name)
        if login is not None:
            options["auth"] = login
        return Client(config.target(), connect=connect, notifications=notifications, **options)

    # --- the catalog ---------------------------------------------------------------------

    async def _catalog_changed(self, server: ManagedServer, kind: str) -> None:
        self._rebuild_names()
        if self.on_change is not None:
            outcome = self.on_change(server.name, kind)
            if outcome is not None:
                await outcome

    def _rebuild_names(self) -> None:
        """Names follow the config order, then each server's listing order, so they are
        the same from run to run for the same catalogs."""
        tool_names, prompt_names = NameTable(), NameTable()
        tools: dict[str, ManagedTool] = {}
        prompts: dict[str, ManagedPrompt] = {}
        for server in self.servers.values():
            if server.status is not Status.READY:
                continue
            for tool in server.tools:
                name = tool_names.add(server.name, tool.name)
                tools[name] = ManagedTool(name, server.name, tool)
            for prompt in server.prompts:
                name = prompt_names.add(server.name, prompt.name)
                prompts[name] = ManagedPrompt(name, server.name, prompt)
        for collision in tool_names.collisions:
            log.warning("tool name collision: %s", collision)
        self._tool_names, self._prompt_names = tool_names, prompt_names
        self._tools, self._prompts = tools, prompts
        self._built_for = self._catalog_signature()

    @property
    def name_collisions(self) -> list[Any]:
        return [*self._tool_names.collisions, *self._prompt_names.collisions]

    def tools(self, server: str | None = None) -> list[ManagedTool]:
        """The tools of every ready server (or of one), allow/deny lists applied."""
        self._sync_names()
        return [t for t in self._tools.values() if server is None or t.server == server]

    def tool(self, name: str) -> ManagedTool:
        """A tool by its exposed name (`mcp__server__tool`)."""
        self._sync_names()
        found = self._tools.get(name)
        if found is None:
            raise UnknownTool(self._unknown_message("tool", name))
        return found

    def prompts(self, server: str | None = None) -> list[ManagedPrompt]:
        self._sync_names()
        return [p for p in self._prompts.values() if server is None or p.server == server]

    def resources(self, server: str | None = None) -> list[ManagedResource]:
        return [ManagedResource(s.name, r) for s in self._ready(server) for r in s.resources]

    def resource_templates(self, server: str | None = None
                           ) -> list[tuple[str, types.ResourceTemplate]]:
        return [(s.name, t) for s in self._ready(server) for t in s.resource_templates]

    def _ready(self, server: str | None) -> list[ManagedServer]:
        chosen = self.servers.values() if server is None else [self.server(server)]
        return [s for s in chosen if s.status is Status.READY]

    def server(self, name: str) -> ManagedServer:
        found = self.servers.get(name)
        if found is None:
            known = ", ".join(self.servers) or "none"
            raise ManagerError(f"no MCP server named {name!r} (configured: {known})")
        return found

    def _sync_names(self) -> None:
        """Rebuild the names when a server stopped, came back or listed anew since."""
        if self._catalog_signature() != self._built_for:
            self._rebuild_names()

    def _catalog_signature(self) -> tuple[Any, ...]:
        # A refresh replaces the lists, so their identities tell a new listing apart.
        return tuple((s.name, s.status, id(s.tools), id(s.prompts))
                     for s in self.servers.values())

    def _unknown_message(self, what: str, name: str) -> str:
        server_part = name.split("__")[1] if name.count("__") >= 2 else None
        server = self.servers.get(server_part or "")
        if server is not None and server.status is not Status.READY:
            return (f"no {what} {name!r}: MCP server {server.name} is {server.status.value}"
                    + (f" ({server.error})" if server.error else ""))
        return f"no {what} named {name!r}; list them with tools()/prompts()"

    # --- calls ---------------------------------------------------------------------------

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        on_progress: ProgressCallback | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (the idle limit, reset by progress)
    ) -> types.CallToolResult:
        """Call a tool by its exposed name. A tool failure is a result with `is_error`;
        the manager raises `UnknownTool` (also for a tool the config excludes),
        `PermissionDenied` or `ServerUnavailable` when the call cannot be made."""
        tool = self.tool(name)  # the catalog holds only tools the allow/deny lists admit
        server = self.server(tool.server)
        await permissions.check(ToolCallRequest(tool, dict(arguments or {})),
                                self.permission, self.ask)
        result = await server.call_tool(tool.tool.name, arguments, read_only=tool.read_only,
                                        on_progress=on_progress, timeout=timeout)
        if self.output_budget is not None:
            result = budget.apply_budget(result, self.output_budget)
        return result

    async def call_server_tool(self, server: str, tool: str,
                               arguments: Mapping[str, Any] | None = None,
                               **options: Any) -> types.CallToolResult:
        """Call a tool by server and original name (what `mcpkit call SERVER TOOL` does)."""
        managed = self.server(server)
        if not managed.config.allows_tool(tool):
            raise ToolNotAllowed(f"{tool} is excluded by the config of {server}")
        self._sync_names()
        exposed = self._tool_names.name_of(server, tool)
        if exposed is None:
            raise UnknownTool(self._unknown_message("tool", f"mcp__{server}__{tool}"))
        return await self.call_tool(exposed, arguments, **options)

    async def read_resource(self, server: str, uri: str) -> types.ReadResourceResult:
        client = await self.server(server).ready_client()
        return await client.read_resource(uri)

    async def get_prompt(self, name: str, arguments: Mapping[str, str] | None = None
                         ) -> types.GetPromptResult:
        self._sync_names()
        prompt = self._prompts.get(name)
        if prompt is None:
            raise UnknownTool(self._unknown_message("prompt", name))
        client = await self.server(prompt.server).ready_client()
        return await client.get_prompt(prompt.prompt.name, dict(arguments or {}))

    async def refresh(self, server: str | None = None) -> None:
        """List the catalog of one server (or all) again."""
        async with anyio.create_task_group() as tg:
            for managed in self._ready(server):
                tg.start_soon(managed.refresh, "all")
