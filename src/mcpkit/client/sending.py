"""How a `Client` request goes out in the connection's era.

- Modern: every request carries `_meta` (version, the capabilities declared, the client's
  identity, the log level asked for) and, on Streamable HTTP, the `Mcp-Method`/`Mcp-Name`/
  `Mcp-Param-*` headers that mirror it; an `input_required` answer is driven to its
  final result by `mcpkit.client.rounds`.
- Legacy: the session carries all that; a request only gets a progress token when it
  wants progress, and a request that finds the HTTP session forgotten is sent once more
  on a new one (`Negotiation.renew`).

A part that sits outside `Client`: it is given the client's live state
(`mcpkit.client.live`), the `Negotiation` that settled the era, and the fixed things a
request needs (responders, limits, identity, the listen stream's subscriptions, the tool
catalog's header annotations), all bound once: it is on every request's path. `wire`
makes a client's negotiation and sender, each given the other.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Any

from mcpkit.client import rounds
from mcpkit.client.catalog import ToolCatalog
from mcpkit.client.listen import ListenStream
from mcpkit.client.live import LiveState
from mcpkit.client.modern import modern_headers, modern_meta
from mcpkit.client.negotiation import Negotiation, OpenTransport
from mcpkit.client.options import Settings
from mcpkit.client.responders import DeclaredCapabilities, Responders
from mcpkit.client.results import as_dict
from mcpkit.client.session import ProgressCallback, Timeouts
from mcpkit.client.targets import ConnectOptions
from mcpkit.protocol.versions import Era
from mcpkit.transports.client.base import SessionExpired

log = logging.getLogger(__name__)

HeaderAnnotations = Mapping[str, Mapping[str, tuple[str, ...]]]
"""Each tool's `x-mcp-header` arguments, by tool name (`ToolCatalog.annotations`)."""


class Sender:
    def __init__(self, live: LiveState, negotiation: Negotiation, *, responders: Responders,
                 input_rounds: int, client_info: Mapping[str, Any], subscriptions: set[str],
                 annotations: HeaderAnnotations) -> None:
        """`subscriptions` and `annotations` are the listen stream's and the catalog's own
        (kept up to date by them, read here as they are at each request)."""
        self._live = live
        self._negotiation = negotiation
        self._responders = responders
        self._input_rounds = input_rounds
        self._client_info = client_info
        self._subscriptions = subscriptions
        self._annotations = annotations
        self.declared = DeclaredCapabilities(responders)
        """The capabilities declared at each version (in `_meta` and in `initialize`)."""

    async def modern(self, method: str, params: dict[str, Any],
                     on_progress: ProgressCallback | None, limits: Timeouts,
                     answer_inputs: bool = True, declare_tasks: bool = False) -> Any:
        """A modern request to its final result (its `input_required` rounds answered,
        unless `answer_inputs` is False)."""
        result = await self._round(method, on_progress, limits, declare_tasks, params)
        if answer_inputs and rounds.wants_input(result):
            send = functools.partial(self._round, method, on_progress, limits, declare_tasks)
            return await rounds.more_rounds(send, method, params, result, self._responders,
                                            self._input_rounds)
        return result

    async def declaring_tasks(self, method: str, params: Mapping[str, Any] | None = None, *,
                              on_progress: ProgressCallback | None = None,
                              timeout: Any = "default", max_timeout: Any = "default") -> Any:
        """`Client.request` in the modern era with the Tasks extension declared (the calls
        of a tool that requires task execution, and their polls)."""
        limits = self._live.default_timeouts.overridden(timeout, max_timeout)
        return await self.modern(method, dict(params or {}), on_progress, limits,
                                 declare_tasks=True)

    async def _round(self, method: str, on_progress: ProgressCallback | None,
                     limits: Timeouts, declare_tasks: bool, params: dict[str, Any]) -> Any:
        body = self.with_meta(params, on_progress, declare_tasks)
        return await self._live.session.request(
            method, body, timeouts=limits, on_progress=on_progress,
            headers=self.headers_for(method, body))

    async def legacy(self, method: str, params: dict[str, Any],
                     on_progress: ProgressCallback | None = None,
                     limits: Timeouts | None = None) -> Any:
        live = self._live
        body = self._with_progress(params, on_progress)
        generation = await self._negotiation.settled()
        limits = limits or live.default_timeouts
        try:
            return await live.session.request(method, body, timeouts=limits,
                                              on_progress=on_progress)
        except SessionExpired:
            log.info("%s forgot the session; initializing a new one", live.describe())
            await self._negotiation.renew(generation, self._subscriptions)
            return await live.session.request(method, body, timeouts=limits,
                                              on_progress=on_progress)

    def with_meta(self, params: dict[str, Any], on_progress: ProgressCallback | None,
                  declare_tasks: bool = False) -> dict[str, Any]:
        """`params` (copied) with the modern `_meta` (and a progress token if wanted)."""
        version = self._negotiation.protocol_version
        assert version is not None
        body = dict(params)
        capabilities = (self.declared.with_tasks(version) if declare_tasks
                        else self.declared.at(version))
        meta = modern_meta(as_dict(params.get("_meta")), version, capabilities,
                           self._client_info, self._live.log_level)
        if on_progress is not None:
            meta["progressToken"] = self._live.session.next_progress_token()
        body["_meta"] = meta
        return body

    def _with_progress(self, params: dict[str, Any], on_progress: ProgressCallback | None
                       ) -> dict[str, Any]:
        if on_progress is None:
            return params
        body = dict(params)
        body["_meta"] = {**as_dict(params.get("_meta")),
                         "progressToken": self._live.session.next_progress_token()}
        return body

    def headers_for(self, method: str, params: dict[str, Any]) -> dict[str, str]:
        """The modern headers of a request, on transports with per-request streams."""
        if not self._live.session.transport.per_request_streams:
            return {}
        annotations = None
        if method == "tools/call":
            annotations = self._annotations.get(str(params.get("name")))
        return modern_headers(method, params, annotations)


def wire(live: LiveState, era: Era | None, version: str | None, settings: Settings,
         listen: ListenStream, catalog: ToolCatalog, *, target: object,
         connect: ConnectOptions, open_transport: OpenTransport) -> tuple[Negotiation, Sender]:
    """A client's `Negotiation` (of the pinned `era` and `version`, or None) and `Sender`,
    each given the other: negotiating sends requests, and a request that finds a legacy
    session forgotten has a new one negotiated. Both see the client only as `live`.
    `connect` is the client's own copy of `settings.connect` (the HTTP+SSE fallback sets
    its `kind`)."""
    client_info = settings.behaviour.client_info
    negotiation = Negotiation(live, era, version, target=target, connect=connect,
                              open_transport=open_transport, client_info=client_info)
    sender = Sender(live, negotiation, responders=settings.responders,
                    input_rounds=settings.limits.input_rounds, client_info=client_info,
                    subscriptions=listen.subscriptions, annotations=catalog.annotations)
    negotiation.sender = sender
    return negotiation, sender
