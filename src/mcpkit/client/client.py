"""`Client`: one API for any MCP server, whatever its era and transport.

    async with Client("http://127.0.0.1:8000/mcp") as client:
        tools = await client.list_tools()
        result = await client.call_tool("add", {"a": 1, "b": 2})

    async with Client(["npx", "-y", "@modelcontextprotocol/server-everything"]) as client: ...
    async with Client(my_server) as client: ...            # a mcpkit Server, in memory

Connecting detects the era (`mcpkit.client.era`): modern servers are spoken to statelessly
with `_meta` on every request; legacy ones get `initialize` and a session. The methods
below behave the same in both eras; where an era lacks a feature the difference is
documented on the method.
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import anyio
import msgspec

from mcpkit import __version__
from mcpkit.client import era as eras
from mcpkit.client import legacy_tasks
from mcpkit.client import tasks as task_following
from mcpkit.client.errors import (
    ClientError,
    ClientMisuse,
    IncompatibleServer,
    InvalidToolOutput,
    TooManyInputRounds,
)
from mcpkit.client.hosting import HostedTaskGroup
from mcpkit.client.listing import ListBudget, ListLimits
from mcpkit.client.modern import INPUT_METHODS, modern_headers, modern_meta
from mcpkit.client.responders import (
    ElicitationHandler,
    Responders,
    RootsSource,
    SamplingHandler,
)
from mcpkit.client.session import (
    ClientSession,
    InboundLimits,
    ProgressCallback,
    RequestTimeout,
    ServerError,
    Timeouts,
)
from mcpkit.client.targets import (
    ConnectOptions,
    kind_of,
    make_transport,
    make_url_transport,
    server_key,
)
from mcpkit.protocol import errors, headers, types
from mcpkit.protocol.versions import (
    LATEST_LEGACY_VERSION,
    LEGACY_VERSIONS,
    MODERN_VERSIONS,
    Era,
    era_of,
)
from mcpkit.schema_patterns import PatternPolicy
from mcpkit.transports.client.base import (
    ClientTransport,
    ConnectionClosed,
    HttpStatusError,
    SessionExpired,
    SessionTransport,
    TransportError,
)
from mcpkit.validation import SchemaValidator

log = logging.getLogger(__name__)

T = TypeVar("T")
LogHandler = Callable[[types.LoggingMessageNotificationParams], Awaitable[None] | None]
ListChangedHandler = Callable[[str], Awaitable[None] | None]
"""Called with "tools", "prompts" or "resources"."""
ResourceUpdatedHandler = Callable[[str], Awaitable[None] | None]
NotificationHandler = Callable[[str, dict[str, Any]], Awaitable[None] | None]
EraChoice = Literal["auto", "modern", "legacy"]
Limit = float | Literal["default"] | None
"""Seconds, None for no limit, or "default" for the client's setting."""

CACHED_KINDS = frozenset({"stdio", "http", "sse", "websocket"})
"""Transports whose server has a stable identity to cache its era under (not in-memory)."""
AUTH_STATUSES = frozenset({401, 403})
"""How long `close()` waits for the background tasks to finish after cancelling them."""
LISTEN_RETRIES = 5
LISTEN_CANCEL_S = 2.0
"""How long `close()` lets a listen stream send its cancellation."""


class Probe(enum.Enum):
    """What the era probe found."""

    MODERN = "modern"
    LEGACY = "legacy"  # an answer that is not modern
    SILENT = "silent"  # no answer within the probe timeout


def _era_choice(era: EraChoice, version: str | None) -> EraChoice:
    """The era to speak: a pinned version's (which must agree with a pinned era)."""
    if version is None:
        return era
    pinned = era_of(version)
    if pinned is None:
        raise ValueError(f"unknown protocol version {version!r}")
    if era != "auto" and pinned.value != era:
        raise ValueError(f"version {version} is not of the {era} era")
    return pinned.value


class Client:
    """A connection to one MCP server (an async context manager)."""

    def __init__(
        self,
        target: object,
        *,
        transport: str | None = None,
        era: EraChoice = "auto",
        version: str | None = None,
        headers: Mapping[str, str] | None = None,
        bearer_token: str | None = None,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = False,
        cwd: str | None = None,
        resolver: Any = None,
        client_info: Mapping[str, Any] | None = None,
        sampling: SamplingHandler | None = None,
        sampling_tools: bool = False,
        elicitation: ElicitationHandler | None = None,
        elicitation_modes: Sequence[str] = ("form",),
        roots: RootsSource | None = None,
        on_log: LogHandler | None = None,
        on_list_changed: ListChangedHandler | None = None,
        on_resource_updated: ResourceUpdatedHandler | None = None,
        on_notification: NotificationHandler | None = None,
        timeout: float | None = 60.0,
        max_timeout: float | None = 600.0,
        reset_timeout_on_progress: bool = True,
        connect_timeout: float = 30.0,
        probe_timeout: float = 3.0,
        max_input_rounds: int = 10,
        log_level: str | None = None,
        validate_output: bool = True,
        tasks: bool = False,
        max_task_polls: int = legacy_tasks.DEFAULT_MAX_POLLS,
        inbound_limits: InboundLimits | None = None,
        list_limits: ListLimits | None = None,
    ) -> None:
        """Describe the connection; nothing happens until `async with` (or `connect()`).

        A stdio child gets `env` over a minimal environment (PATH, HOME, LANG, …; see
        `targets.SAFE_ENV_NAMES`), never this process's secrets, unless `inherit_env`.
        `era`/`version` pin what to speak (a version implies its era); by default the era
        is detected and cached per server. `timeout` is the idle limit of each request
        (restarted by progress unless `reset_timeout_on_progress` is False); `max_timeout`
        bounds a request regardless. `resolver` is an aiohttp resolver for HTTP and
        WebSocket connections (`mcpkit.netguard.GuardedResolver` refuses private addresses
        at connect time). `sampling`, `elicitation` and `roots` answer the
        server; the capabilities declared follow from which are given. A tool that
        requires task execution (`execution.taskSupport: "required"`) is called as a task
        and followed to its end by `call_tool` in both eras (the 2025-11-25 `tasks`
        utility: `task` in the call, `tasks/get` polls, `tasks/result`; the modern Tasks
        extension, declared on that call: polls, `tasks/update` with the answers).
        `tasks=True` also runs the "optional" ones as tasks (and declares the modern
        extension on every request); `max_task_polls` bounds the `tasks/get` polls of one
        call (TaskPollLimit past it), the call's `max_timeout` its whole time.
        `inbound_limits` bounds what the server makes the client do on its own at once
        (server requests answered, notification handlers running); `list_limits` bounds
        the lists `list_tools()` and friends fetch page by page.
        """
        era = _era_choice(era, version)
        self.target = target
        self._options = ConnectOptions(
            kind=transport, headers=dict(headers or {}), bearer_token=bearer_token,
            env=env, inherit_env=inherit_env, cwd=cwd, connect_timeout=connect_timeout,
            resolver=resolver,
        )
        self._kind = kind_of(target, self._options)
        self._pinned_era: EraChoice = era
        self._pinned_version = version
        self.client_info: dict[str, Any] = dict(client_info or {"name": "mcpkit",
                                                                "version": __version__})
        self.responders = Responders(
            sampling=sampling, sampling_tools=sampling_tools, elicitation=elicitation,
            elicitation_modes=tuple(elicitation_modes), roots=roots,
            extensions={task_following.EXTENSION: {}} if tasks else {},
        )
        self.on_log = on_log
        self.on_list_changed = on_list_changed
        self.on_resource_updated = on_resource_updated
        self.on_notification = on_notification
        self.default_timeouts = Timeouts(timeout, max_timeout, reset_timeout_on_progress)
        self.connect_timeout = connect_timeout
        self.probe_timeout = probe_timeout
        self.max_input_rounds = max_input_rounds
        self.prefer_tasks = tasks
        self.max_task_polls = max_task_polls
        self.log_level = log_level
        self.validate_output = validate_output
        self.inbound_limits = inbound_limits or InboundLimits()
        self.list_limits = list_limits or ListLimits()

        self.era: Era | None = None
        self.protocol_version: str | None = None
        self.server_info: types.Implementation | None = None
        self.server_capabilities: dict[str, Any] = {}
        self.instructions: str | None = None
        self.supported_versions: list[str] = []

        self._hosted = HostedTaskGroup()
        self._session: ClientSession | None = None
        self._tools: dict[str, dict[str, Any]] | None = None
        self._validators: dict[str, SchemaValidator] = {}
        self._unsafe_tools: set[str] = set()
        self._annotations: dict[str, dict[str, tuple[str, ...]]] = {}
        self._known_tools: dict[str, Mapping[str, Any]] = {}  # know_tool's, by name
        self._capabilities: dict[str, dict[str, Any]] = {}
        self._task_capabilities: dict[str, dict[str, Any]] = {}  # with the modern extension
        self._listen_filter: dict[str, Any] | None = None
        self._listen_scope: anyio.CancelScope | None = None
        self._listen_done = anyio.Event()
        self._listen_done.set()  # no listen stream yet
        self._subscriptions: set[str] = set()
        self._reinit_lock = anyio.Lock()
        self._acknowledged: anyio.Event | None = None
        self._legacy_hint: str | None = None
        self._session_generation = 0

    # --- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> Client:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Open the transport and settle the era (bounded by `connect_timeout`).

        The client's background work (readers, answering the server) runs in a task
        group hosted by a task of its own, so a connected client may be used from any task
        of the event loop and closed from any other: `connect()` and `close()` need not
        share a task or a cancel scope. (asyncio only, like the HTTP transports.)
        """
        if self._hosted.running:
            raise ClientMisuse("this Client is already connected")
        await self._hosted.open()
        try:
            with anyio.move_on_after(self.connect_timeout) as deadline:
                await self._connect()
        except BaseException:
            await self.close()
            raise
        if deadline.cancelled_caught:
            await self.close()
            raise TimeoutError(
                f"connecting to {self.describe()} took longer than {self.connect_timeout:g} s")

    async def close(self) -> None:
        """Close the connection (ends a legacy HTTP session; stops a stdio child)."""
        if not self._hosted.running:
            return
        with anyio.CancelScope(shield=True):
            if self._listen_scope is not None:
                # Let the listen request tell the server it is cancelled before the
                # transport goes (on stdio the server would otherwise hold it open).
                self._listen_scope.cancel()
                with anyio.move_on_after(LISTEN_CANCEL_S):
                    await self._listen_done.wait()
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
        if self._session is not None:
            return self._session.transport.describe()
        return repr(self.target)

    @property
    def session(self) -> ClientSession:
        if self._session is None:
            raise ClientMisuse("the Client is not connected: use `async with Client(...)`")
        return self._session

    # --- connecting and era detection --------------------------------------------------------

    async def _connect(self) -> None:
        pinned = self._pinned_era_value()
        await self._open(make_transport(self.target, self._kind, self._options))
        if pinned is Era.LEGACY:
            await self._start_legacy(pinned=True)
        elif pinned is Era.MODERN:
            await self._try_modern(pinned=True)
        else:
            await self._detect_era()

    async def _detect_era(self) -> None:
        """The spec's probe-then-fall-back, with the outcome cached per server."""
        key = (server_key(self.target, self._kind, self._options)
               if self._kind in CACHED_KINDS else None)
        if key is not None and eras.cached_era(key) is Era.LEGACY:
            try:
                await self._start_legacy()
                return
            except ServerError as exc:  # the cached assumption failed: probe again
                log.info("%s no longer answers initialize (%s); probing its era",
                         self.describe(), exc)
                eras.forget_era(key)
        outcome = await self._try_modern(pinned=False)
        if outcome is not Probe.MODERN:
            try:
                await self._start_legacy()
            except ServerError:
                if outcome is not Probe.SILENT:
                    raise
                # The probe went unanswered, yet initialize is refused: a modern server
                # that was still starting (e.g. under npx). Ask again, patiently.
                log.info("%s refused initialize after a silent probe; probing again",
                         self.describe())
                await self._try_modern(pinned=True)
        if key is not None and self.era is not None:
            eras.remember_era(key, self.era)

    def _pinned_era_value(self) -> Era | None:
        return None if self._pinned_era == "auto" else Era(self._pinned_era)

    async def _open(self, transport: ClientTransport) -> None:
        self._session = ClientSession(
            transport, on_request=self._answer_server,
            on_notification=self._dispatch_notification, limits=self.inbound_limits,
        )
        await self._session.open(self._hosted.group)

    async def _try_modern(self, *, pinned: bool) -> Probe:
        """Probe with `server/discover`; a modern server is set up on the way.

        Pinned: anything but a modern server raises `IncompatibleServer`.
        """
        version = self._pinned_version or MODERN_VERSIONS[0]
        last: BaseException | None = None
        for _ in range(3):
            try:
                result = await self._discover_at(version, pinned=pinned)
            except (ServerError, HttpStatusError, RequestTimeout) as exc:
                if isinstance(exc, SessionExpired) or (pinned and isinstance(exc, RequestTimeout)):
                    raise
                if isinstance(exc, HttpStatusError) and exc.status in AUTH_STATUSES:
                    raise  # not an era question: the credentials are missing or wrong
                modern = eras.modern_error_of(exc)
                if modern is None:
                    if pinned:
                        raise IncompatibleServer(
                            f"{self.describe()} does not speak the modern protocol: {exc}"
                        ) from exc
                    log.debug("era probe of %s: legacy (%s)", self.describe(), exc)
                    return Probe.SILENT if isinstance(exc, RequestTimeout) else Probe.LEGACY
                if modern.get("code") != errors.UNSUPPORTED_PROTOCOL_VERSION:
                    raise IncompatibleServer(
                        f"{self.describe()} refused server/discover: {modern.get('message')}"
                    ) from exc
                offered = eras.supported_versions_of(modern)
                choice = eras.pick_modern_version(offered)
                legacy = [v for v in LEGACY_VERSIONS if v in offered]
                if choice is None and legacy and not pinned:
                    self._legacy_hint = legacy[0]  # it only offers versions of the old era
                    return Probe.LEGACY
                if choice is None:
                    raise IncompatibleServer(
                        f"{self.describe()} supports {eras.supported_versions_of(modern)}; "
                        f"this client speaks {list(MODERN_VERSIONS) + list(LEGACY_VERSIONS)}"
                    ) from exc
                version, last = choice, exc
                continue
            self._adopt_discover(result, version)
            return Probe.MODERN
        raise IncompatibleServer(
            f"{self.describe()} kept refusing protocol version {version}: {last}"
        )

    async def _discover_at(self, version: str, *, pinned: bool) -> dict[str, Any]:
        self.era, self.protocol_version = Era.MODERN, version
        self.session.transport.protocol_version = version
        self.session.cancel_by_notification = not self.session.transport.per_request_streams
        params = self._with_meta({}, None)
        # Probing an unknown server: silence means legacy, so wait only `probe_timeout`.
        # With the era pinned, discover is an ordinary request.
        limits = self.default_timeouts if pinned else Timeouts(
            self.probe_timeout, self.probe_timeout, False)
        result = await self.session.request(
            "server/discover", params, timeouts=limits,
            headers=self._headers_for("server/discover", params), cancel_remote=False,
        )
        if not isinstance(result, dict):
            raise ServerError(errors.INVALID_REQUEST, "server/discover returned a non-object")
        return result

    def _adopt_discover(self, result: dict[str, Any], version: str) -> None:
        supported = result.get("supportedVersions")
        self.supported_versions = [v for v in supported or [] if isinstance(v, str)]
        choice = eras.pick_modern_version(self.supported_versions or [version], version)
        if choice is None:
            raise IncompatibleServer(
                f"{self.describe()} supports {self.supported_versions}, none of which this "
                f"client speaks"
            )
        self.protocol_version = choice
        self.session.transport.protocol_version = choice
        self.server_capabilities = _dict(result.get("capabilities"))
        self.instructions = _str_or_none(result.get("instructions"))
        meta = _dict(result.get("_meta"))
        info = meta.get("io.modelcontextprotocol/serverInfo") or result.get("serverInfo")
        self.server_info = _implementation(info)

    async def _start_legacy(self, *, pinned: bool = False) -> None:
        try:
            await self._initialize()
        except ServerError as exc:
            if not pinned:
                raise
            raise IncompatibleServer(
                f"{self.describe()} refused initialize ({exc}); it may speak only the modern "
                f"protocol: connect with era='auto' or era='modern'"
            ) from exc
        except HttpStatusError as exc:
            if self._kind != "http" or exc.status not in (400, 404, 405) \
                    or not isinstance(self.target, str):
                raise
            # Spec (2025-03-26, backwards compatibility): a 4xx to the initialize POST
            # means the server predates Streamable HTTP: try the HTTP+SSE transport.
            log.info("%s refused initialize over Streamable HTTP (%s); trying HTTP+SSE",
                     self.describe(), exc.status)
            await self.session.transport.close()
            self._kind = "sse"
            await self._open(make_url_transport(self.target, "sse", self._options))
            await self._initialize()

    async def _initialize(self) -> None:
        version = self._pinned_version or self._legacy_hint or LATEST_LEGACY_VERSION
        session = self.session
        self.era, self.protocol_version = Era.LEGACY, None
        session.transport.protocol_version = None
        session.cancel_by_notification = True
        params = {
            "protocolVersion": version,
            "capabilities": self._capabilities_at(version),
            "clientInfo": self.client_info,
        }
        result = await session.request("initialize", params, timeouts=self.default_timeouts)
        negotiated = _dict(result).get("protocolVersion")
        if negotiated not in LEGACY_VERSIONS:
            raise IncompatibleServer(
                f"{self.describe()} answered initialize with protocol version {negotiated!r}; "
                f"this client speaks {', '.join(LEGACY_VERSIONS)} in a session"
            )
        self.protocol_version = negotiated
        session.transport.protocol_version = negotiated
        self.server_capabilities = _dict(result.get("capabilities"))
        self.server_info = _implementation(result.get("serverInfo"))
        self.instructions = _str_or_none(result.get("instructions"))
        self.supported_versions = [negotiated]
        await session.notify("notifications/initialized")
        if isinstance(session.transport, SessionTransport):
            try:
                await session.transport.open_standalone_stream()
            except TransportError as exc:
                log.info("no standalone stream from %s: %s", self.describe(), exc)
        if self.log_level is not None and "logging" in self.server_capabilities:
            await self._legacy_request("logging/setLevel", {"level": self.log_level})

    async def _reinitialize(self, seen_generation: int) -> None:
        """A legacy HTTP session was forgotten by the server (404): start a new one, once
        for all the requests that found out at the same time."""
        async with self._reinit_lock:
            if self._session_generation != seen_generation:
                return  # another request already started the new session
            if isinstance(self.session.transport, SessionTransport):
                self.session.transport.reset_session()
            await self._initialize()
            self._session_generation += 1
            for uri in sorted(self._subscriptions):
                await self.session.request("resources/subscribe", {"uri": uri},
                                           timeouts=self.default_timeouts)

    # --- requests, both eras ------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        on_progress: ProgressCallback | None = None,
        timeout: Limit = "default",
        max_timeout: Limit = "default",
        answer_inputs: bool = True,
    ) -> Any:
        """Send any request in the connection's era and return its result (plain JSON).

        Modern: adds `_meta` and the HTTP headers, and answers `input_required` rounds for
        tools/call, prompts/get and resources/read (`answer_inputs=False` returns such a
        result as it is, for a caller that relays the questions elsewhere). Legacy: retries
        once on a new session if the server forgot this one.
        """
        limits = self._timeouts(timeout, max_timeout)
        body = dict(params or {})
        if self.era is Era.MODERN:
            return await self._modern_request(method, body, on_progress, limits, answer_inputs)
        return await self._legacy_request(method, body, on_progress, limits)

    @property
    def can_exchange(self) -> bool:
        """Whether `exchange` works: a modern server over Streamable HTTP."""
        return self.era is Era.MODERN and self.session.can_exchange

    async def exchange(self, method: str, params: Mapping[str, Any]) -> Any:
        """A modern request answered in the calling task, for a caller that forwards
        requests (the hub): no progress, an `input_required` result returned as it is, the
        client's time limits as one deadline; log messages on the request's stream reach
        `on_log` as usual. Cheaper than `request` (no task, no pending entry, no timer);
        only where `can_exchange`. Errors are `request`'s: `ServerError`, `RequestTimeout`,
        `TransportError`."""
        body = self._with_meta(dict(params), None)
        return await self.session.exchange(method, body, timeouts=self.default_timeouts,
                                           headers=self._headers_for(method, body))

    def _timeouts(self, timeout: Any, max_timeout: Any) -> Timeouts:
        base = self.default_timeouts
        if timeout == "default" and max_timeout == "default":
            return base  # the common case: no new object per request
        return Timeouts(
            base.timeout if timeout == "default" else timeout,
            base.maximum if max_timeout == "default" else max_timeout,
            base.reset_on_progress,
        )

    async def _legacy_request(
        self, method: str, params: dict[str, Any],
        on_progress: ProgressCallback | None = None, limits: Timeouts | None = None,
    ) -> Any:
        body = self._with_progress(params, on_progress)
        if self._reinit_lock.locked():  # a new session is being set up: wait for it
            async with self._reinit_lock:
                pass
        generation = self._session_generation
        limits = limits or self.default_timeouts
        try:
            return await self.session.request(method, body, timeouts=limits,
                                              on_progress=on_progress)
        except SessionExpired:
            log.info("%s forgot the session; initializing a new one", self.describe())
            await self._reinitialize(generation)
            return await self.session.request(method, body, timeouts=limits,
                                              on_progress=on_progress)

    async def _modern_request(
        self, method: str, params: dict[str, Any],
        on_progress: ProgressCallback | None, limits: Timeouts, answer_inputs: bool = True,
        declare_tasks: bool = False,
    ) -> Any:
        rounds = 0
        retry = params
        while True:
            body = self._with_meta(retry, on_progress, declare_tasks)
            result = await self.session.request(
                method, body, timeouts=limits, on_progress=on_progress,
                headers=self._headers_for(method, body),
            )
            if not (isinstance(result, dict) and result.get("resultType") == "input_required"):
                return result
            if not answer_inputs:
                return result
            if method not in INPUT_METHODS:
                raise errors.ProtocolError(
                    errors.INVALID_REQUEST, f"the server asked for input on {method}, which "
                    "does not allow it")
            rounds += 1
            if rounds > self.max_input_rounds:
                raise TooManyInputRounds(
                    f"{method}: the server still wants input after {self.max_input_rounds} "
                    "rounds; giving up")
            retry = await self._next_round(params, result)

    async def _next_round(self, params: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        """The retry of the original request: its params plus this round's answers and the
        server's `requestState`, echoed byte for byte (none if none was given)."""
        retry = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
        asked = result.get("inputRequests")
        if isinstance(asked, dict) and asked:
            retry["inputResponses"] = await self._answer_inputs(asked)
        if "requestState" in result:
            retry["requestState"] = result["requestState"]
        return retry

    async def _answer_inputs(self, asked: dict[str, Any]) -> dict[str, Any]:
        """Answer every input request (concurrently: a user prompt and a model call may
        both be pending); the first failure is raised as itself, not as a group."""
        answers: dict[str, Any] = {}
        failures: list[Exception] = []

        async def answer_one(key: str, request: Any) -> None:
            try:
                answers[key] = await self._answer_input(key, request)
            except Exception as exc:
                failures.append(exc)

        async with anyio.create_task_group() as tg:
            for key, request in asked.items():
                tg.start_soon(answer_one, key, request)
        if failures:
            raise failures[0]
        return answers

    async def _answer_input(self, key: str, request: Any) -> Any:
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            raise errors.ProtocolError(errors.INVALID_REQUEST,
                                       f"input request {key!r} is not a request")
        try:
            return await self.responders.answer(request["method"], _dict(request.get("params")))
        except errors.McpError as exc:
            raise ClientError(
                f"cannot answer the server's {request['method']} ({key!r}): {exc.message}"
            ) from exc

    def _with_meta(self, params: dict[str, Any], on_progress: ProgressCallback | None,
                   declare_tasks: bool = False) -> dict[str, Any]:
        assert self.protocol_version is not None
        body = dict(params)
        capabilities = (self._capabilities_with_tasks(self.protocol_version) if declare_tasks
                        else self._capabilities_at(self.protocol_version))
        meta = modern_meta(
            _dict(params.get("_meta")), self.protocol_version, capabilities,
            self.client_info, self.log_level,
        )
        if on_progress is not None:
            meta["progressToken"] = self.session.next_progress_token()
        body["_meta"] = meta
        return body

    def _with_progress(self, params: dict[str, Any], on_progress: ProgressCallback | None
                       ) -> dict[str, Any]:
        if on_progress is None:
            return params
        body = dict(params)
        body["_meta"] = {**_dict(params.get("_meta")),
                         "progressToken": self.session.next_progress_token()}
        return body

    def _capabilities_at(self, version: str) -> dict[str, Any]:
        """The client capabilities at `version` (fixed once the client is built)."""
        caps = self._capabilities.get(version)
        if caps is None:
            caps = self._capabilities[version] = self.responders.capabilities(version)
        return caps

    def _capabilities_with_tasks(self, version: str) -> dict[str, Any]:
        """The capabilities at `version` plus the modern Tasks extension (declared on the
        requests of a call to a tool that requires task execution)."""
        caps = self._task_capabilities.get(version)
        if caps is None:
            base = self._capabilities_at(version)
            caps = self._task_capabilities[version] = {
                **base, "extensions": {**_dict(base.get("extensions")),
                                       task_following.EXTENSION: {}}}
        return caps

    async def _request_declaring_tasks(
        self, method: str, params: Mapping[str, Any] | None = None, *,
        on_progress: ProgressCallback | None = None, timeout: Limit = "default",
        max_timeout: Limit = "default",
    ) -> Any:
        """`request` in the modern era with the Tasks extension declared."""
        return await self._modern_request(method, dict(params or {}), on_progress,
                                          self._timeouts(timeout, max_timeout),
                                          declare_tasks=True)

    def _headers_for(self, method: str, params: dict[str, Any]) -> dict[str, str]:
        if not self.session.transport.per_request_streams:
            return {}
        annotations = None
        if method == "tools/call":
            annotations = self._annotations.get(str(params.get("name")))
        return modern_headers(method, params, annotations)

    # --- typed requests ----------------------------------------------------------------------

    async def discover(self) -> types.DiscoverResult:
        """`server/discover`. On a legacy server: the same facts from `initialize`."""
        if self.era is Era.MODERN:
            result = await self.request("server/discover")
            self._adopt_discover(result, self.protocol_version or MODERN_VERSIONS[0])
            return _typed(result, types.DiscoverResult, "server/discover")
        return types.DiscoverResult(
            cache_scope="private",
            capabilities=msgspec.convert(self.server_capabilities, types.ServerCapabilities),
            result_type="complete",
            supported_versions=list(self.supported_versions),
            ttl_ms=0,
            instructions=self.instructions if self.instructions is not None else msgspec.UNSET,
        )

    async def ping(self) -> None:
        """Check the server answers. Modern servers have no `ping`: `server/discover` is
        used instead."""
        await self.request("ping" if self.era is Era.LEGACY else "server/discover")

    async def list_tools(self) -> list[types.Tool]:
        """Every tool (all pages). Modern era: tools whose `x-mcp-header` annotations are
        invalid are left out (spec: clients must not call them), with a warning."""
        raw = await self._list_all("tools/list", "tools")
        kept: dict[str, dict[str, Any]] = {}
        self._unsafe_tools.clear()
        self._annotations.clear()
        self._known_tools.clear()
        for tool in raw:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            annotations = _header_annotations(tool)
            if self.era is Era.MODERN and annotations is None:
                log.warning("ignoring tool %r: invalid x-mcp-header annotations", tool["name"])
                self._unsafe_tools.add(tool["name"])
                continue
            kept[tool["name"]] = tool
            if annotations:
                self._annotations[tool["name"]] = annotations
        self._tools = kept
        self._validators.clear()
        return [_typed(tool, types.Tool, "tools/list") for tool in kept.values()]

    def know_tool(self, tool: Mapping[str, Any]) -> None:
        """Take `tool` (its wire object) as the server's, as `list_tools` would: its
        `x-mcp-header` arguments then go with its calls as `Mcp-Param-*` headers (modern
        era). For a relay that lists tools on one connection and calls them on another
        (the hub: its stored catalog, its pooled connection)."""
        name = tool.get("name")
        if not isinstance(name, str) or self._known_tools.get(name) is tool:
            return  # the same object again (a relay's cached catalog): nothing new to learn
        self._known_tools[name] = tool
        annotations = _header_annotations(dict(tool))
        if annotations:
            self._annotations[name] = annotations
        else:
            self._annotations.pop(name, None)

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        on_progress: ProgressCallback | None = None,
        timeout: Limit = "default",
        max_timeout: Limit = "default",
        meta: Mapping[str, Any] | None = None,
        task: bool | None = None,
    ) -> types.CallToolResult:
        """Call a tool. A tool failure is a result with `is_error` (not an exception).

        When the tool declares an `outputSchema`, `structured_content` is checked against
        it (`InvalidToolOutput`); the catalog is fetched once for that if needed.
        A tool the server runs as a task is followed to its result (see `__init__`);
        `task` says whether to run an "optional" one as a task (default: `tasks=`).
        `max_timeout` bounds the whole call, task included.
        """
        tool = await self._known_tool(name)
        if tool is None and name in self._unsafe_tools:
            raise ClientError(
                f"tool {name!r} has invalid x-mcp-header annotations; refusing to call it")
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        if meta:
            params["_meta"] = dict(meta)
        as_task = legacy_tasks.wants_task(tool, self.prefer_tasks if task is None else task)
        legacy_task = as_task and self.era is Era.LEGACY and legacy_tasks.server_runs_tool_tasks(
            self.protocol_version, self.server_capabilities)
        if legacy_task:
            params["task"] = {}
        # Modern: the extension is declared on this call's requests when the tool needs it.
        send = (self._request_declaring_tasks
                if as_task and self.era is Era.MODERN and not self.prefer_tasks
                else self.request)
        started = anyio.current_time()
        result = await send("tools/call", params, on_progress=on_progress,
                            timeout=timeout, max_timeout=max_timeout)
        maximum = self._timeouts(timeout, max_timeout).maximum
        left = None if maximum is None else max(0.0, maximum - (anyio.current_time() - started))
        created = legacy_tasks.created_task(result) if self.era is Era.LEGACY else None
        if created is not None:
            result = await legacy_tasks.follow(
                created, self.request, max_seconds=left, max_polls=self.max_task_polls,
                can_cancel=legacy_tasks.can_cancel(self.server_capabilities))
        elif task_following.is_task(result):
            result = await task_following.follow(
                result, send, self._answer_inputs, max_seconds=left,
                max_polls=self.max_task_polls)
        typed = _typed(result, types.CallToolResult, "tools/call")
        if tool is not None and self.validate_output:
            self._check_output(name, tool, typed)
        return typed

    async def _known_tool(self, name: str) -> dict[str, Any] | None:
        # The catalog says which tools need task execution (and their output schemas, and
        # their x-mcp-header arguments).
        needs_catalog = self.validate_output or (
            self.era is Era.MODERN and self.session.transport.per_request_streams) or (
            self.era is Era.LEGACY and legacy_tasks.server_runs_tool_tasks(
                self.protocol_version, self.server_capabilities)) or (
            self.era is Era.MODERN and "extensions" in self.server_capabilities)
        if self._tools is None and needs_catalog and "tools" in self.server_capabilities:
            try:
                await self.list_tools()
            except (ServerError, errors.ProtocolError) as exc:
                log.info("could not list tools of %s: %s", self.describe(), exc)
                self._tools = {}
        return (self._tools or {}).get(name)

    def _check_output(self, name: str, tool: dict[str, Any], result: types.CallToolResult) -> None:
        schema = tool.get("outputSchema")
        if not isinstance(schema, dict) or result.is_error is True:
            return
        if result.structured_content is msgspec.UNSET:
            raise InvalidToolOutput(
                f"tool {name!r} declares an outputSchema but returned no structuredContent")
        validator = self._validators.get(name)
        if validator is None:
            # The server chose both the schema and the value: a pattern RE2 cannot run is
            # skipped (logged), never handed to a backtracking engine.
            validator = self._validators[name] = SchemaValidator(
                schema, patterns=PatternPolicy.SKIP)
        problems = validator.errors(result.structured_content)
        if problems:
            raise InvalidToolOutput(
                f"tool {name!r} returned structuredContent that does not match its "
                f"outputSchema: {'; '.join(problems)}")

    async def list_resources(self) -> list[types.Resource]:
        raw = await self._list_all("resources/list", "resources")
        return [_typed(item, types.Resource, "resources/list") for item in raw]

    async def list_resource_templates(self) -> list[types.ResourceTemplate]:
        raw = await self._list_all("resources/templates/list", "resourceTemplates")
        return [_typed(item, types.ResourceTemplate, "resources/templates/list") for item in raw]

    async def read_resource(self, uri: str, **kwargs: Any) -> types.ReadResourceResult:
        result = await self.request("resources/read", {"uri": uri}, **kwargs)
        return _typed(result, types.ReadResourceResult, "resources/read")

    async def list_prompts(self) -> list[types.Prompt]:
        raw = await self._list_all("prompts/list", "prompts")
        return [_typed(item, types.Prompt, "prompts/list") for item in raw]

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None, **kwargs: Any
    ) -> types.GetPromptResult:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        result = await self.request("prompts/get", params, **kwargs)
        return _typed(result, types.GetPromptResult, "prompts/get")

    async def complete(
        self,
        ref: Mapping[str, Any],
        argument_name: str,
        value: str,
        *,
        context: Mapping[str, str] | None = None,
    ) -> types.CompleteResultCompletion:
        """`completion/complete` for a prompt (`{"type": "ref/prompt", "name": …}`) or a
        resource template (`{"type": "ref/resource", "uri": …}`) argument."""
        params: dict[str, Any] = {"ref": dict(ref), "argument": {"name": argument_name,
                                                                 "value": value}}
        if context is not None:
            params["context"] = {"arguments": dict(context)}
        result = await self.request("completion/complete", params)
        return _typed(result, types.CompleteResult, "completion/complete").completion

    async def set_logging_level(self, level: str) -> None:
        """Legacy: `logging/setLevel`. Modern: sent as `_meta.logLevel` on every request
        from now on (the modern era has no session to hold it)."""
        if level not in types.LoggingLevel.__args__:  # type: ignore[attr-defined]
            raise ValueError(f"unknown log level {level!r}")
        self.log_level = level
        if self.era is Era.LEGACY:
            await self.request("logging/setLevel", {"level": level})

    async def subscribe(self, uri: str) -> None:
        """Get `on_resource_updated(uri)` calls when the resource changes (legacy:
        `resources/subscribe`; modern: added to the `subscriptions/listen` stream)."""
        self._subscriptions.add(uri)
        if self.era is Era.LEGACY:
            await self.request("resources/subscribe", {"uri": uri})
        else:
            await self._restart_listen()

    async def unsubscribe(self, uri: str) -> None:
        self._subscriptions.discard(uri)
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
        self._listen_filter = {"toolsListChanged": tools, "promptsListChanged": prompts,
                               "resourcesListChanged": resources}
        if self.era is Era.MODERN:
            await self._restart_listen()

    # --- tasks (extension) ---------------------------------------------------------------------

    async def get_task(self, task_id: str) -> dict[str, Any]:
        """`tasks/get`: the task's status (and, in the modern tasks extension, its result)."""
        return _dict(await self.request("tasks/get", {"taskId": task_id}))

    async def cancel_task(self, task_id: str) -> dict[str, Any]:
        return _dict(await self.request("tasks/cancel", {"taskId": task_id}))

    async def update_task(self, task_id: str, input_responses: Mapping[str, Any]
                          ) -> dict[str, Any]:
        """Modern tasks extension: answer a task that is waiting for input."""
        return _dict(await self.request(
            "tasks/update", {"taskId": task_id, "inputResponses": dict(input_responses)}))

    async def list_tasks(self) -> list[dict[str, Any]]:
        """Legacy (2025-11-25) `tasks/list`, all pages."""
        return [_dict(t) for t in await self._list_all("tasks/list", "tasks")]

    async def task_result(self, task_id: str) -> dict[str, Any]:
        """Legacy (2025-11-25) `tasks/result`: waits for the task and returns its result."""
        return _dict(await self.request("tasks/result", {"taskId": task_id}, timeout=None))

    # --- the listen stream (modern) ----------------------------------------------------------

    async def _restart_listen(self) -> None:
        if self._listen_scope is not None:
            self._listen_scope.cancel()
            self._listen_scope = None
        wanted = dict(self._listen_filter or {})
        if self._subscriptions:
            wanted["resourceSubscriptions"] = sorted(self._subscriptions)
        if not any(wanted.values()):
            return
        acknowledged = anyio.Event()
        self._listen_scope = anyio.CancelScope()
        self._listen_done = anyio.Event()
        self._hosted.group.start_soon(self._listen_loop, wanted, self._listen_scope, acknowledged,
                            self._listen_done)
        self._acknowledged = acknowledged
        with anyio.move_on_after(self.default_timeouts.timeout or 30.0):
            await acknowledged.wait()

    async def _listen_loop(self, wanted: dict[str, Any], scope: anyio.CancelScope,
                           acknowledged: anyio.Event, done: anyio.Event) -> None:
        try:
            with scope:
                await self._listen_attempts(wanted, acknowledged)
        finally:
            done.set()

    async def _listen_attempts(self, wanted: dict[str, Any], acknowledged: anyio.Event) -> None:
        for attempt in range(LISTEN_RETRIES):
            try:
                await self.request("subscriptions/listen", {"notifications": wanted},
                                   timeout=None, max_timeout=None)
                log.info("%s ended the listen stream", self.describe())
            except Exception as exc:  # a background task must not take the client down
                log.warning("listen stream to %s failed: %s", self.describe(), exc)
                if isinstance(exc, ServerError | ConnectionClosed):
                    acknowledged.set()
                    return
            await anyio.sleep(min(30.0, 0.5 * 2**attempt))
        acknowledged.set()

    # --- what the server sends ---------------------------------------------------------------

    async def _answer_server(self, method: str, params: dict[str, Any]) -> Any:
        return await self.responders.answer(method, params)

    async def _dispatch_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/message" and self.on_log is not None:
            with contextlib.suppress(errors.McpError):
                await _maybe_await(self.on_log(_typed(
                    params, types.LoggingMessageNotificationParams, method)))
        elif method.endswith("/list_changed"):
            kind = method.split("/")[1]
            if kind == "tools":
                self._tools = None
            if self.on_list_changed is not None and kind in ("tools", "prompts", "resources"):
                await _maybe_await(self.on_list_changed(kind))
        elif method == "notifications/resources/updated":
            uri = params.get("uri")
            if self.on_resource_updated is not None and isinstance(uri, str):
                await _maybe_await(self.on_resource_updated(uri))
        elif method == "notifications/subscriptions/acknowledged":
            if self._acknowledged is not None:
                self._acknowledged.set()
        if self.on_notification is not None:
            await _maybe_await(self.on_notification(method, params))

    async def notify_roots_changed(self) -> None:
        """Tell a legacy server the roots changed (modern servers ask for roots each time)."""
        if self.era is Era.LEGACY:
            await self.session.notify("notifications/roots/list_changed")

    # --- helpers -----------------------------------------------------------------------------

    async def _list_all(self, method: str, key: str) -> list[Any]:
        """Every page of a list, within `list_limits` (ListTooLarge past them)."""
        items: list[Any] = []
        async with contextlib.aclosing(self.list_pages(method, key)) as pages:
            async for batch in pages:
                items.extend(batch)
        return items

    async def list_pages(self, method: str, key: str) -> AsyncGenerator[list[Any], None]:
        """The `key` items of each page of the paginated `method`, as they arrive, following
        `nextCursor` within `list_limits` (ListTooLarge past them; a repeated cursor is a
        ProtocolError). For a caller that checks items page by page (the hub's catalog)."""
        cursor: str | None = None
        budget = ListBudget(self.list_limits, method)
        while True:
            params = {"cursor": cursor} if cursor is not None else {}
            page = _dict(await self.request(method, params))
            batch = page.get(key)
            if not isinstance(batch, list):
                raise errors.ProtocolError(
                    errors.INVALID_REQUEST, f"{method}: the result has no {key!r} list")
            budget.page(batch)
            yield batch
            cursor = page.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                return
            budget.cursor(cursor)


def _header_annotations(tool: dict[str, Any]) -> dict[str, tuple[str, ...]] | None:
    """A tool's x-mcp-header annotations, or None when they are invalid."""
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return {}
    try:
        return headers.header_params(schema)
    except ValueError:
        return None


def _typed(value: Any, type_: type[T], what: str) -> T:
    try:
        return msgspec.convert(value, type_)
    except msgspec.ValidationError as exc:
        raise errors.ProtocolError(
            errors.INVALID_REQUEST, f"the server sent an invalid {what} result: {exc}"
        ) from None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _implementation(value: Any) -> types.Implementation | None:
    try:
        return msgspec.convert(value, types.Implementation) if value is not None else None
    except msgspec.ValidationError:
        return None


async def _maybe_await(outcome: Any) -> None:
    if inspect.isawaitable(outcome):
        await outcome
