"""One configured server under the manager: its client, its catalog and its life.

States: `disabled` (not started: `enabled: false`), `starting`, `ready`, `failed` (the
reason is kept: the error, with a stdio child's exit code and stderr tail), `needs_auth` (a
remote server that wants an OAuth login it does not have: `login` is the command to run,
see `login.py`), `restarting` (a stdio child died; it is started again with backoff),
`stopped`.

Invariants:
- `client` is set exactly while the server is `ready` (or being restarted from ready);
- the catalog (tools, resources, templates, prompts) is what the server listed, with the
  config's allow/deny lists applied to tools;
- a crash is noticed by a watcher on the client's connection, not by the next call; a call
  that the crash interrupted is repeated only when the tool is read-only (see `call_tool`);
- list changes are coalesced: one refresh at a time, at most one every
  `REFRESH_INTERVAL_S`, however many `list_changed` notifications the server sends (each
  used to start a refresh of its own: 5,000 of them, 5,000 catalog fetches at once).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import anyio
from anyio.abc import TaskGroup

from mcpkit.client import Client, ConnectionClosed, TransportError
from mcpkit.client.session import ProgressCallback
from mcpkit.manager.cli_render import mask_url
from mcpkit.manager.config import ServerConfig
from mcpkit.manager.errors import ServerUnavailable
from mcpkit.manager.login import login_command, needs_login
from mcpkit.protocol import types

log = logging.getLogger(__name__)

ClientFactory = Callable[["ManagedServer"], Client]
CatalogListener = Callable[["ManagedServer", str], Awaitable[None] | None]
"""Called with (server, kind) after a server's catalog changed ("tools", "prompts", …, "all")."""


REFRESH_INTERVAL_S = 1.0
"""The least time between two refreshes of one server's catalog for its list changes."""


class Status(StrEnum):
    DISABLED = "disabled"
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    NEEDS_AUTH = "needs_auth"
    RESTARTING = "restarting"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """How a crashed stdio server is started again: after 0.5 s, 1 s, 2 s … up to
    `max_delay_s`, at most `max_restarts` times in a row (a run of `stable_after_s`
    resets the count)."""

    max_restarts: int = 5
    first_delay_s: float = 0.5
    max_delay_s: float = 30.0
    stable_after_s: float = 60.0

    def delay(self, attempt: int) -> float:
        return float(min(self.max_delay_s, self.first_delay_s * 2 ** max(0, attempt - 1)))


class ManagedServer:
    def __init__(self, config: ServerConfig, *, make_client: ClientFactory,
                 on_catalog: CatalogListener, restart: RestartPolicy,
                 refresh_interval_s: float = REFRESH_INTERVAL_S) -> None:
        self.config = config
        self.refresh_interval_s = refresh_interval_s
        self.status = Status.STOPPED if config.enabled else Status.DISABLED
        self.error: str | None = None
        self.failure: BaseException | None = None
        """The exception behind `error`, when there was one (for diagnosing it)."""
        self.login: str | None = None
        """While `needs_auth`: the command that logs in (`mcpkit mcp login NAME`)."""
        self.client: Client | None = None
        self.tools: list[types.Tool] = []
        self.resources: list[types.Resource] = []
        self.resource_templates: list[types.ResourceTemplate] = []
        self.prompts: list[types.Prompt] = []
        self.startup_s: float | None = None
        """How long the last start took (connect + catalog)."""
        self.restarts = 0
        self._make_client = make_client
        self._on_catalog = on_catalog
        self._restart = restart
        self._tg: TaskGroup | None = None
        self._settled = anyio.Event()
        """Set whenever the server is not starting/restarting (callers may wait on it)."""
        self._stopping = False
        self._ready_since = 0.0
        self._close_seen = anyio.Event()
        """Set by the watcher once it has handled the end of the current connection."""
        self._changed: set[str] = set()
        """Kinds whose list changed since the refresher last looked."""
        self._refresher_running = False

    def stop_requested(self) -> bool:
        return self._stopping

    @property
    def name(self) -> str:
        return self.config.name

    def describe(self) -> str:
        """For logs: the command without its arguments and the URL masked, since both are
        interpolated and an argument or a query parameter may be a `${TOKEN}`'s value."""
        config = self.config
        if config.type == "stdio":
            target = (config.command or "") + (" …" if config.args else "")
        else:
            target = mask_url(config.url or "")
        return f"{self.name} ({config.type}: {target})"

    # --- starting and stopping -------------------------------------------------------------

    async def start(self, task_group: TaskGroup) -> None:
        """Connect and list the catalog, bounded by `startup_timeout_sec`. Never raises for
        a server that does not come up: the status says `failed` and `error` says why."""
        self._tg = task_group
        self._stopping = False
        await self._connect_settling()

    async def _connect_settling(self) -> None:
        """`_connect` with the status `starting` and callers waiting (`until_settled`)."""
        self.status = Status.STARTING
        self._settled = anyio.Event()
        try:
            await self._connect()
        finally:
            self._settled.set()

    async def _connect(self) -> None:
        started = time.monotonic()
        limit = self.config.startup_timeout_sec
        try:
            client = self._make_client(self)  # e.g. an unset bearer_token_env_var
        except Exception as exc:
            self._fail(str(exc) or type(exc).__name__, exc)
            return
        try:
            with anyio.fail_after(limit):
                await client.connect()
                await self._load_catalog(client)
        except TimeoutError as exc:
            await client.close()
            self._fail(f"did not start within {limit:g} s (startup_timeout_sec)", exc)
            return
        except Exception as exc:  # any failure of one server must not stop the others
            await client.close()
            self._fail(str(exc) or type(exc).__name__, exc)
            return
        self.startup_s = time.monotonic() - started
        self.client = client
        self._close_seen = anyio.Event()
        self.status = Status.READY
        self.error = None
        self.failure = None
        self.login = None
        self._ready_since = time.monotonic()
        assert self._tg is not None
        self._tg.start_soon(self._watch, client)
        await self._listen(client)

    def _fail(self, reason: str, failure: BaseException | None = None) -> None:
        self.failure = failure
        self.client = None
        if needs_login(self.config, failure):
            self.status = Status.NEEDS_AUTH
            self.login = login_command(self.name)
            self.error = f"needs login: run `{self.login}`"
            log.warning("MCP server %s needs login (%s): run `%s`", self.describe(), reason,
                        self.login)
            return
        self.status = Status.FAILED
        self.error = reason
        self.login = None
        log.warning("MCP server %s failed: %s", self.describe(), reason)

    async def stop(self) -> None:
        self._stopping = True
        client, self.client = self.client, None
        if client is not None:
            await client.close()
        if self.status is not Status.DISABLED:
            self.status = Status.STOPPED
        self._settled.set()

    # --- the catalog ---------------------------------------------------------------------

    async def _load_catalog(self, client: Client, kind: str = "all") -> None:
        """List one kind of the catalog ("tools", "prompts", "resources") or all of them;
        a kind the server does not offer is empty."""
        caps = client.server_capabilities
        if kind in ("all", "tools"):
            tools = await client.list_tools() if "tools" in caps else []
            self.tools = [t for t in tools if self.config.allows_tool(t.name)]
        if kind in ("all", "resources"):
            if "resources" in caps:
                self.resources = await client.list_resources()
                self.resource_templates = await client.list_resource_templates()
            else:
                self.resources, self.resource_templates = [], []
        if kind in ("all", "prompts"):
            self.prompts = await client.list_prompts() if "prompts" in caps else []

    async def refresh(self, kind: str = "all") -> None:
        """List the catalog again (all of it, or one kind) and tell the manager."""
        client = self.client
        if client is None:
            return
        try:
            await self._load_catalog(client, kind)
        except Exception as exc:  # keep the old catalog; the next change tries again
            log.warning("could not refresh the %s of %s: %s", kind, self.describe(), exc)
            return
        outcome = self._on_catalog(self, kind)
        if outcome is not None:
            await outcome

    def list_changed(self, kind: str) -> None:
        """The client's `on_list_changed`: refresh in the background (the client's
        notification dispatch must not wait for a request of its own), coalesced with the
        other changes that come before the refresh starts."""
        if self._tg is not None and self.status is Status.READY:
            self._changed.add(kind)
            if not self._refresher_running:
                self._refresher_running = True
                self._tg.start_soon(self._refresh_changed)

    async def _refresh_changed(self) -> None:
        """Refresh what changed, one refresh at a time and at most one every
        `refresh_interval_s`, until no change is left."""
        try:
            while self._changed and self.status is Status.READY:
                kinds, self._changed = self._changed, set()
                await self.refresh(kinds.pop() if len(kinds) == 1 else "all")
                await anyio.sleep(self.refresh_interval_s)
        finally:
            self._refresher_running = False

    async def _listen(self, client: Client) -> None:
        """Modern servers send list changes only on a `subscriptions/listen` stream."""
        caps = client.server_capabilities
        wanted = {kind: bool(isinstance(caps.get(kind), dict)
                             and caps[kind].get("listChanged"))
                  for kind in ("tools", "prompts", "resources")}
        if any(wanted.values()):
            try:
                await client.listen(**wanted)
            except Exception as exc:
                log.info("no list-changed stream from %s: %s", self.describe(), exc)

    # --- crashes and restarts ------------------------------------------------------------

    async def _watch(self, client: Client) -> None:
        reason = await client.wait_closed()
        if self._stopping or self.client is not client:
            return
        self.client = None  # callers wait for the restart from here on
        self.status = Status.RESTARTING
        self._settled = anyio.Event()
        self._close_seen.set()
        await client.close()
        log.warning("MCP server %s stopped: %s", self.describe(), reason)
        if self.config.type != "stdio":
            self._fail(f"the connection closed: {reason}")
            self._settled.set()
            return
        await self._restart_with_backoff(str(reason))

    async def _restart_with_backoff(self, reason: str) -> None:
        if time.monotonic() - self._ready_since >= self._restart.stable_after_s:
            self.restarts = 0
        try:
            while not self.stop_requested():
                self.restarts += 1
                if self.restarts > self._restart.max_restarts:
                    self._fail(f"crashed {self._restart.max_restarts + 1} times in a row; "
                               f"last: {reason}")
                    return
                self.status = Status.RESTARTING
                self.error = reason
                await anyio.sleep(self._restart.delay(self.restarts))
                if self.stop_requested():  # stop() was called while we slept
                    return
                await self._connect()
                if self.status is Status.READY:
                    log.info("MCP server %s restarted", self.describe())
                    return
                reason = self.error or reason
        finally:
            self._settled.set()

    async def until_settled(self) -> None:
        """Until a (re)start in progress has ended, bounded by the startup timeout."""
        with anyio.move_on_after(self.config.startup_timeout_sec + self._restart.max_delay_s):
            await self._settled.wait()

    # --- calls ---------------------------------------------------------------------------

    async def ready_client(self) -> Client:
        current = self.client
        if current is not None and current.closed_reason is not None:
            await self._await_watcher()  # it died; the watcher may not have run yet
        if self.status in (Status.STARTING, Status.RESTARTING):
            await self.until_settled()
        client = self.client
        if self.status is Status.NEEDS_AUTH:
            raise ServerUnavailable(f"MCP server {self.name} needs login: run `{self.login}`")
        if client is None or self.status is not Status.READY:
            why = f": {self.error}" if self.error else ""
            raise ServerUnavailable(f"MCP server {self.name} is {self.status.value}{why}")
        return client

    async def call_tool(self, tool: str, arguments: Mapping[str, Any] | None, *,
                        read_only: bool, on_progress: ProgressCallback | None = None,
                        timeout: float | None = None,  # noqa: ASYNC109 (idle limit, reset by progress)
                        ) -> types.CallToolResult:
        """Call a tool; if the connection breaks during the call, a read-only tool is
        called once more after the server is back, any other tool is not (it may have
        done its work already) and `ServerUnavailable` says so."""
        limit = self.config.tool_timeout_sec if timeout is None else timeout
        client = await self.ready_client()
        try:
            return await client.call_tool(tool, arguments, on_progress=on_progress,
                                          timeout=limit)
        except (ConnectionClosed, TransportError) as exc:
            if not read_only:
                raise ServerUnavailable(
                    f"MCP server {self.name} went away during {tool} ({exc}); not retried "
                    "because the tool is not marked read-only") from exc
            log.info("retrying read-only %s on %s after: %s", tool, self.name, exc)
        await self._reconnect_after_failure(client)
        client = await self.ready_client()
        return await client.call_tool(tool, arguments, on_progress=on_progress, timeout=limit)

    async def _await_watcher(self) -> None:
        """The watcher handles a closed connection as soon as it closes, but a caller
        woken by the same close may run first: give the watcher its turn."""
        with anyio.move_on_after(1.0):
            await self._close_seen.wait()

    async def _reconnect_after_failure(self, failed: Client) -> None:
        """Make sure a fresh connection is (being) made: stdio children are restarted by
        the watcher; an HTTP server is connected again here."""
        if self.config.type == "stdio" and failed.closed_reason is not None:
            await self._await_watcher()
            await self.until_settled()
            return
        if self.client is failed:
            self.client = None
            self._stopping = True  # the old watcher must not react to this close
            await failed.close()
            self._stopping = False
            await self._connect_settling()
