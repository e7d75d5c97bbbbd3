"""The modern era's multi-round requests (spec: MRTR): a server answers `tools/call`,
`prompts/get` or `resources/read` with `input_required` and the questions it needs
answered (sampling, elicitation, roots); the client answers them and sends the request
again with `inputResponses` and the server's `requestState`, until a final result.

    result = await send(params)
    if wants_input(result):
        result = await more_rounds(send, method, params, result, responders, max_rounds)

`send` sends one round of the request (the Client adds `_meta` and headers); the
questions are answered by the client's `Responders`, concurrently.

Invariants:
- At most `max_rounds` rounds after the first (TooManyInputRounds past them).
- Only the methods that allow it may ask for input (a ProtocolError otherwise).
- Each retry is the original params plus this round's answers and `requestState`, echoed
  byte for byte; nothing of an earlier round is carried over.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from mcpkit.client.errors import ClientError, TooManyInputRounds
from mcpkit.client.modern import INPUT_METHODS
from mcpkit.client.responders import Responders
from mcpkit.protocol import errors

Send = Callable[[dict[str, Any]], Awaitable[Any]]
"""Sends one round of the request with these params; returns its result."""


def wants_input(result: Any) -> bool:
    return isinstance(result, dict) and result.get("resultType") == "input_required"


async def more_rounds(send: Send, method: str, params: dict[str, Any], result: Any,
                      responders: Responders, max_rounds: int) -> Any:
    """Answer the rounds of `input_required` that follow `result`, to the final result."""
    rounds = 0
    while wants_input(result):
        if method not in INPUT_METHODS:
            raise errors.ProtocolError(
                errors.INVALID_REQUEST, f"the server asked for input on {method}, which "
                "does not allow it")
        rounds += 1
        if rounds > max_rounds:
            raise TooManyInputRounds(
                f"{method}: the server still wants input after {max_rounds} rounds; "
                "giving up")
        result = await send(await next_round(responders, params, result))
    return result


async def next_round(responders: Responders, params: dict[str, Any],
                     result: dict[str, Any]) -> dict[str, Any]:
    """The retry of the original request: its params plus this round's answers and the
    server's `requestState`, echoed byte for byte (none if none was given)."""
    retry = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
    asked = result.get("inputRequests")
    if isinstance(asked, dict) and asked:
        retry["inputResponses"] = await answer_inputs(responders, asked)
    if "requestState" in result:
        retry["requestState"] = result["requestState"]
    return retry


async def answer_inputs(responders: Responders, asked: dict[str, Any]) -> dict[str, Any]:
    """Answer every input request (concurrently: a user prompt and a model call may
    both be pending); the first failure is raised as itself, not as a group."""
    answers: dict[str, Any] = {}
    failures: list[Exception] = []

    async def answer_one(key: str, request: Any) -> None:
        try:
            answers[key] = await _answer_input(responders, key, request)
        except Exception as exc:
            failures.append(exc)

    async with anyio.create_task_group() as tg:
        for key, request in asked.items():
            tg.start_soon(answer_one, key, request)
    if failures:
        raise failures[0]
    return answers


async def _answer_input(responders: Responders, key: str, request: Any) -> Any:
    if not isinstance(request, dict) or not isinstance(request.get("method"), str):
        raise errors.ProtocolError(errors.INVALID_REQUEST,
                                   f"input request {key!r} is not a request")
    params = request.get("params")
    try:
        return await responders.answer(request["method"],
                                       params if isinstance(params, dict) else {})
    except errors.McpError as exc:
        raise ClientError(
            f"cannot answer the server's {request['method']} ({key!r}): {exc.message}"
        ) from exc
