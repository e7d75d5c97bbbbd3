"""The handler context: what a tool, resource or prompt handler can do while it runs.

It behaves the same in both eras; the differences live here, not in handlers:

| call            | legacy session                      | modern (2026-07-28)                     |
|-----------------|-------------------------------------|-----------------------------------------|
| report_progress | notifications/progress              | same, on the request's own stream       |
| log             | if ≥ the session's logging/setLevel | only if the request's `_meta` logLevel  |
| elicit/sample/  | a server→client request, awaited    | an `input_required` round: the handler  |
| list_roots      |                                     | is re-run with the answers (`key`s)     |

In the modern era a handler that asks for input is run again from the top on the retry, so
everything before its input requests must be safe to repeat; `state` carries a value of its
own (JSON-serializable) from one round to the next.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio

from mcpkit.auth.resource import AuthInfo
from mcpkit.protocol import capabilities, jsonrpc, meta
from mcpkit.server import inputs
from mcpkit.server.call import Call
from mcpkit.server.connection import Channel, Connection

if TYPE_CHECKING:
    from mcpkit.server.server import Server


class Context:
    """Passed to any handler parameter annotated with `Context`."""

    def __init__(
        self,
        server: Server,
        call: Call,
        *,
        answers: dict[str, Any] | None = None,
        state: Any = None,
    ) -> None:
        self.server = server
        self.call = call
        self.progress_token = meta.progress_token_of(call.params.get("_meta"))
        self.answers: dict[str, Any] = answers or {}  # offered by the client, unchecked
        self.accepted: dict[str, Any] = {}  # checked and consumed; carried to the next round
        self.state: Any = state
        self._counters: dict[str, itertools.count[int]] = {}

    # The request, as the engine decided it (era, version, what the client declared).

    @property
    def request_id(self) -> jsonrpc.RequestId:
        return self.call.request_id

    @property
    def method(self) -> str:
        return self.call.method

    @property
    def params(self) -> dict[str, Any]:
        return self.call.params

    @property
    def modern(self) -> bool:
        return self.call.modern

    @property
    def protocol_version(self) -> str:
        return self.call.protocol_version

    @property
    def auth(self) -> AuthInfo | None:
        """Who is calling, as the server's `ResourceAuth` verified it (subject, client id,
        scopes, claims); None on a server without one (stdio, an unprotected HTTP server)."""
        return self.call.auth

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return self.call.client_capabilities

    @property
    def client_info(self) -> dict[str, Any] | None:
        return self.call.client_info

    @property
    def log_level(self) -> str | None:
        return self.call.log_level

    @property
    def connection(self) -> Connection:
        return self.call.connection

    @property
    def channel(self) -> Channel:
        return self.call.channel

    # --- facts about the request ------------------------------------------------------------

    def client_supports(self, *path: str) -> bool:
        """Whether the client declared the capability `path`, e.g. ("sampling", "tools")."""
        return capabilities.has_capability(self.client_capabilities, *path)

    # --- notifications ----------------------------------------------------------------------

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send a progress notification, if the request asked for them (a progress token)."""
        if self.progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.channel.send(jsonrpc.encode_notification("notifications/progress", params))

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send a log message to the client, if its log level lets it through."""
        if not meta.log_level_allows(self.log_level, level):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self.channel.send(jsonrpc.encode_notification("notifications/message", params))

    async def debug(self, data: Any, logger: str | None = None) -> None:
        await self.log("debug", data, logger)

    async def info(self, data: Any, logger: str | None = None) -> None:
        await self.log("info", data, logger)

    async def warning(self, data: Any, logger: str | None = None) -> None:
        await self.log("warning", data, logger)

    async def error(self, data: Any, logger: str | None = None) -> None:
        await self.log("error", data, logger)

    # --- input from the client --------------------------------------------------------------

    async def elicit(
        self, message: str, requested_schema: dict[str, Any], *, key: str | None = None
    ) -> dict[str, Any]:
        """Ask the user for structured input (form mode). Returns the `ElicitResult`."""
        params = {"mode": "form", "message": message, "requestedSchema": requested_schema}
        if self.protocol_version in ("2025-06-18", "2025-03-26", "2024-11-05"):
            params.pop("mode")  # `mode` arrived in 2025-11-25
        answer: dict[str, Any] = await self.ask(inputs.ELICIT, params, key=key)
        return answer

    async def elicit_url(
        self, message: str, url: str, elicitation_id: str, *, key: str | None = None
    ) -> dict[str, Any]:
        """Send the user to a URL (URL mode elicitation). Returns the `ElicitResult`."""
        params = {"mode": "url", "message": message, "url": url, "elicitationId": elicitation_id}
        answer: dict[str, Any] = await self.ask(inputs.ELICIT, params, key=key)
        return answer

    async def sample(
        self,
        messages: Sequence[Any],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        tools: Sequence[Any] | None = None,
        tool_choice: dict[str, Any] | None = None,
        key: str | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """Ask the client's model for a completion. Returns the `CreateMessageResult`.

        `messages` items may be strings (user text) or `SamplingMessage`s; `options` are
        further `sampling/createMessage` params in wire spelling (temperature, stopSequences,
        modelPreferences, includeContext, metadata…).
        """
        params: dict[str, Any] = {
            "messages": [
                {"role": "user", "content": {"type": "text", "text": m}}
                if isinstance(m, str)
                else m
                for m in messages
            ],
            "maxTokens": max_tokens,
            **options,
        }
        if system_prompt is not None:
            params["systemPrompt"] = system_prompt
        if tools is not None:
            params["tools"] = list(tools)
        if tool_choice is not None:
            params["toolChoice"] = tool_choice
        answer: dict[str, Any] = await self.ask(inputs.SAMPLE, params, key=key)
        return answer

    async def list_roots(self, *, key: str | None = None) -> list[dict[str, Any]]:
        """The client's roots (`file://` URIs it exposes)."""
        result = await self.ask(inputs.LIST_ROOTS, {}, key=key)
        roots = result.get("roots", [])
        return roots if isinstance(roots, list) else []

    async def ask(self, method: str, params: dict[str, Any], *, key: str | None = None) -> Any:
        """One input request; `key` names it across modern rounds (default: by call order)."""
        answers = await self.ask_many({key or self._auto_key(method): (method, params)})
        return next(iter(answers.values()))

    async def ask_many(self, requests: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, Any]:
        """Several input requests at once: one round in the modern era, concurrent requests
        in a legacy session. Returns the answers by key."""
        for method, params in requests.values():
            inputs.check_capability(method, params, self.client_capabilities)
        if self.modern:
            return self._answers_or_raise(requests)
        return await self._ask_legacy(requests)

    def _answers_or_raise(self, requests: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, Any]:
        missing: dict[str, dict[str, Any]] = {}
        for key, (method, params) in requests.items():
            answer = self.answers.get(key)
            if inputs.is_valid_answer(method, answer):
                self.accepted[key] = answer
            else:
                missing[key] = {"method": method, "params": params}
        if missing:
            raise inputs._InputRequired(missing)
        return {key: self.accepted[key] for key in requests}

    async def _ask_legacy(self, requests: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, Any]:
        answers: dict[str, Any] = {}

        async def one(key: str, method: str, params: dict[str, Any]) -> None:
            answers[key] = await self.connection.request(method, params, self.channel)

        try:
            async with anyio.create_task_group() as tg:
                for key, (method, params) in requests.items():
                    tg.start_soon(one, key, method, params)
        except BaseExceptionGroup as group:
            # The first failure cancels the others: raise it as itself (an McpError from the
            # client must reach the engine as an McpError, not hidden in a group).
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        return answers

    def _auto_key(self, method: str) -> str:
        prefix = method.split("/")[0]
        counter = self._counters.setdefault(prefix, itertools.count(1))
        return f"{prefix}-{next(counter)}"

    # --- streams ------------------------------------------------------------------------------

    async def close_stream(self, retry_ms: int | None = None) -> None:
        """Legacy Streamable HTTP: close this request's SSE connection (the stream goes on and
        the client resumes it with GET + Last-Event-ID). No-op on other transports."""
        close = getattr(self.channel, "close_connection", None)
        if close is not None:
            await close(retry_ms)
