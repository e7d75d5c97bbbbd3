"""How a `Client` request goes out in the connection's era.

- Modern: every request carries `_meta` (version, the capabilities declared, the client's
  identity, the log level asked for) and, on Streamable HTTP, the `Mcp-Method`/`Mcp-Name`/
  `Mcp-Param-*` headers that mirror it; an `input_required` answer is driven to its
  final result by `mcpkit.client.rounds`.
- Legacy: the session carries all that; a request only gets a progress token when it
  wants progress, and a request that finds the HTTP session forgotten is sent once more
  on a new one (`Negotiation.renew`).

A part of `Client`: it reads the client's session, settled era and settings.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mcpkit.client import rounds
from mcpkit.client.modern import modern_headers, modern_meta
from mcpkit.client.responders import DeclaredCapabilities
from mcpkit.client.results import as_dict
from mcpkit.client.session import ProgressCallback, Timeouts
from mcpkit.transports.client.base import SessionExpired

if TYPE_CHECKING:
    from mcpkit.client.client import Client

log = logging.getLogger(__name__)


class Sender:
    def __init__(self, client: Client) -> None:
        self._client = client
        self.declared = DeclaredCapabilities(client.responders)
        """The capabilities declared at each version (in `_meta` and in `initialize`)."""

    async def modern(self, method: str, params: dict[str, Any],
                     on_progress: ProgressCallback | None, limits: Timeouts,
                     answer_inputs: bool = True, declare_tasks: bool = False) -> Any:
        """A modern request to its final result (its `input_required` rounds answered,
        unless `answer_inputs` is False)."""
        result = await self._round(method, on_progress, limits, declare_tasks, params)
        if answer_inputs and rounds.wants_input(result):
            send = functools.partial(self._round, method, on_progress, limits, declare_tasks)
            client = self._client
            return await rounds.more_rounds(send, method, params, result, client.responders,
                                            client.limits.input_rounds)
        return result

    async def declaring_tasks(self, method: str, params: Mapping[str, Any] | None = None, *,
                              on_progress: ProgressCallback | None = None,
                              timeout: Any = "default", max_timeout: Any = "default") -> Any:
        """`Client.request` in the modern era with the Tasks extension declared (the calls
        of a tool that requires task execution, and their polls)."""
        limits = self._client.default_timeouts.overridden(timeout, max_timeout)
        return await self.modern(method, dict(params or {}), on_progress, limits,
                                 declare_tasks=True)

    async def _round(self, method: str, on_progress: ProgressCallback | None,
                     limits: Timeouts, declare_tasks: bool, params: dict[str, Any]) -> Any:
        body = self.with_meta(params, on_progress, declare_tasks)
        return await self._client.session.request(
            method, body, timeouts=limits, on_progress=on_progress,
            headers=self.headers_for(method, body))

    async def legacy(self, method: str, params: dict[str, Any],
                     on_progress: ProgressCallback | None = None,
                     limits: Timeouts | None = None) -> Any:
        client = self._client
        body = self._with_progress(params, on_progress)
        generation = await client._negotiated.settled()
        limits = limits or client.default_timeouts
        try:
            return await client.session.request(method, body, timeouts=limits,
                                                on_progress=on_progress)
        except SessionExpired:
            log.info("%s forgot the session; initializing a new one", client.describe())
            await client._negotiated.renew(generation, client._listen.subscriptions)
            return await client.session.request(method, body, timeouts=limits,
                                                on_progress=on_progress)

    def with_meta(self, params: dict[str, Any], on_progress: ProgressCallback | None,
                  declare_tasks: bool = False) -> dict[str, Any]:
        """`params` (copied) with the modern `_meta` (and a progress token if wanted)."""
        client = self._client
        version = client._negotiated.protocol_version
        assert version is not None
        body = dict(params)
        capabilities = (self.declared.with_tasks(version) if declare_tasks
                        else self.declared.at(version))
        meta = modern_meta(as_dict(params.get("_meta")), version, capabilities,
                           client.behaviour.client_info, client.log_level)
        if on_progress is not None:
            meta["progressToken"] = client.session.next_progress_token()
        body["_meta"] = meta
        return body

    def _with_progress(self, params: dict[str, Any], on_progress: ProgressCallback | None
                       ) -> dict[str, Any]:
        if on_progress is None:
            return params
        body = dict(params)
        body["_meta"] = {**as_dict(params.get("_meta")),
                         "progressToken": self._client.session.next_progress_token()}
        return body

    def headers_for(self, method: str, params: dict[str, Any]) -> dict[str, str]:
        """The modern headers of a request, on transports with per-request streams."""
        client = self._client
        if not client.session.transport.per_request_streams:
            return {}
        annotations = None
        if method == "tools/call":
            annotations = client._catalog.annotations.get(str(params.get("name")))
        return modern_headers(method, params, annotations)
