"""Input requests: what a handler asks of the client (elicitation, sampling, roots).

In a legacy session each becomes a server→client request. In the modern era the handler is
interrupted with `_InputRequired`; the engine answers `input_required` with the pending
requests and a sealed `requestState`, and re-runs the handler when the client retries with
the answers. An answer is validated when a request consumes it: a malformed one counts as
not given (the client is asked again) rather than reaching the handler.
"""

from __future__ import annotations

from typing import Any

from mcpkit.protocol import capabilities, errors

ELICIT = "elicitation/create"
SAMPLE = "sampling/createMessage"
LIST_ROOTS = "roots/list"


class _InputRequired(BaseException):
    """Raised inside a modern handler that needs client input it does not have yet.

    A BaseException so that a handler's `except Exception` does not swallow it.
    """

    def __init__(self, requests: dict[str, dict[str, Any]]) -> None:
        super().__init__(", ".join(requests))
        self.requests = requests


def required_capability(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The client capability an input request needs."""
    if method == ELICIT:
        if params.get("mode") == "url":
            return {"elicitation": {"url": {}}}
        return {"elicitation": {}}
    if method == SAMPLE:
        if params.get("tools") or params.get("toolChoice"):
            return {"sampling": {"tools": {}}}
        return {"sampling": {}}
    if method == LIST_ROOTS:
        return {"roots": {}}
    # Reached from a handler (`ctx.ask`): an McpError, so its caller is answered with it.
    raise errors.internal_error(f"not an input request method: {method}")


def check_capability(method: str, params: dict[str, Any], declared: dict[str, Any]) -> None:
    """Raise -32021 if the client did not declare what `method` needs."""
    needed = required_capability(method, params)
    if method == ELICIT and params.get("mode", "form") == "form":
        # Form mode: `elicitation: {}` (or `elicitation.form`) suffices.
        if capabilities.has_capability(declared, "elicitation"):
            return
    missing = capabilities.missing_capabilities(needed, declared)
    if missing:
        raise errors.missing_client_capability(missing)


def is_valid_answer(method: str, answer: Any) -> bool:
    """Whether `answer` has the shape of a result of `method`."""
    if not isinstance(answer, dict):
        return False
    if method == ELICIT:
        content = answer.get("content")
        return answer.get("action") in ("accept", "decline", "cancel") and (
            content is None or isinstance(content, dict)
        )
    if method == SAMPLE:
        return isinstance(answer.get("role"), str) and "content" in answer
    if method == LIST_ROOTS:
        roots = answer.get("roots")
        return isinstance(roots, list) and all(
            isinstance(r, dict) and isinstance(r.get("uri"), str) for r in roots
        )
    return False


def candidate_answers(responses: Any, previous: dict[str, Any]) -> dict[str, Any]:
    """The answers a retry offers: earlier rounds' (verified) plus this one's `inputResponses`.

    Nothing is trusted yet: each answer is checked against the method of the request that
    consumes it (`is_valid_answer`), and keys no request asks for are simply never read.
    """
    answers = dict(previous)
    if isinstance(responses, dict):
        answers.update(responses)
    return answers
