"""A tool call's progress and outcome streamed to the browser while it runs, as NDJSON (one
JSON object a line), for console.js's "Try a tool":

    {"progress": 2, "total": 5, "message": "step 2"}     as the tool reports it
    {"html": "<section …>…</section>", "signed_out": false}   last: the rendered outcome

A browser that reads slowly skips progress (only the latest is sent, never a backlog: the
memory a call holds stays one line), never the outcome. A browser that goes away (its
request ends) cancels the call, which closes its /mcp request: the hub tells the upstream.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from mcpkit.hub.console.tool_calls import Outcome, Progress

NDJSON = "application/x-ndjson"
MAX_MESSAGE_CHARS = 300
"""A progress message shown (an upstream's text)."""

RunCall = Callable[[Progress], Awaitable[Outcome]]
"""Runs the call, telling the given callback each progress notification."""
Render = Callable[[Outcome], str]


class CallStream(Response):
    media_type = NDJSON

    def __init__(self, run: RunCall, render: Render, headers: Mapping[str, str]) -> None:
        # as StreamingResponse does: no body yet, so no Content-Length (Response's own
        # __init__ would announce an empty one)
        self.status_code = 200
        self.background = None
        self.init_headers(headers)
        self.run = run
        self.render_outcome = render

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code,
                    "headers": self.raw_headers})
        latest: list[bytes] = []
        changed = anyio.Event()

        def on_progress(progress: float, total: float | None, message: str | None) -> None:
            latest[:] = [_line({"progress": _number(progress), "total": _number(total),
                                "message": message[:MAX_MESSAGE_CHARS] if message else None})]
            changed.set()

        async def forward_progress() -> None:
            nonlocal changed
            while True:
                await changed.wait()
                changed = anyio.Event()
                if latest:
                    await send({"type": "http.response.body", "body": latest.pop(),
                                "more_body": True})

        async def until_disconnect(group: anyio.abc.TaskGroup) -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            group.cancel_scope.cancel()

        outcome: Outcome | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(until_disconnect, group)
            group.start_soon(forward_progress)
            outcome = await self.run(on_progress)
            group.cancel_scope.cancel()
        if outcome is None:  # the browser went away: the call was cancelled with it
            return
        final = {"html": self.render_outcome(outcome), "signed_out": outcome.signed_out}
        await send({"type": "http.response.body", "body": _line(final), "more_body": False})


def _line(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, ensure_ascii=False, allow_nan=False).encode() + b"\n"


def _number(value: float | None) -> float | None:
    """A number JSON (and the page's <progress>) can take: finite, else none."""
    return value if isinstance(value, int | float) and math.isfinite(value) else None
