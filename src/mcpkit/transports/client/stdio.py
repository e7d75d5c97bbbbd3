"""The stdio transport for the client: a child process, one JSON-RPC message per line.

When the child closes its stdout (it exited or crashed), the session learns at once:
`Inbound.closed` gets a `ConnectionClosed` with the exit code and the tail of its stderr,
so every pending request fails together instead of each waiting out its timeout.

A line over `max_line_bytes` (16 MiB) is dropped; when it plainly answers one of our
requests (its id is its first or last member), that request fails at once with
`MessageTooLarge` instead of waiting out its timeout. The lines after it are read on.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence

import anyio
from anyio.abc import TaskGroup

from mcpkit.errors import InvalidArgument
from mcpkit.protocol.framing import DEFAULT_MAX_LINE_BYTES
from mcpkit.protocol.jsonrpc import RequestId
from mcpkit.transports.client.base import ConnectionClosed, Inbound, MessageTooLarge, Outgoing
from mcpkit.transports.client.process import StdioProcess, StdioProcessError

EXIT_WAIT_S = 2.0
"""How long to wait for the exit code after the child closed its stdout."""

_ID = rb'(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")'
_ID_FIRST = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _ID
                       + rb'\s*,\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"(?:result|error)"')
_RESULT_FIRST = re.compile(rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"(?:result|error)"')
_ID_LAST = re.compile(rb'[,{]\s*"id"\s*:\s*' + _ID + rb'\s*\}\s*\r?$')
"""A response's top-level id as its first member (after `jsonrpc`, before the result) or,
when the line starts with the result, its last (just before the closing brace, which a
nested object's id cannot be). A server request never matches either."""


class StdioTransport:
    kind = "stdio"
    per_request_streams = False

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        close_timeout: float = 2.0,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        if not command:
            raise InvalidArgument("a stdio server needs a command")
        self.process = StdioProcess(command, env=env, cwd=cwd, close_timeout=close_timeout,
                                    max_line_bytes=max_line_bytes)
        self.protocol_version: str | None = None
        self._opened = False
        self._closed = False

    def describe(self) -> str:
        return " ".join(self.process.command)

    async def open(self, inbound: Inbound, task_group: TaskGroup) -> None:
        try:
            await self.process.start(task_group)
        except OSError as exc:
            raise ConnectionClosed(f"cannot start {self.describe()!r}: {exc}") from exc
        self._opened = True
        self.process.on_oversized = lambda head, tail: self._oversized(inbound, head, tail)
        task_group.start_soon(self._read, inbound)

    def _oversized(self, inbound: Inbound, head: bytes, tail: bytes) -> None:
        """A line too large to read: fail the request it answers, when that is plain."""
        request_id = answered_id(head, tail)
        if request_id is not None:
            inbound.request_failed(request_id, MessageTooLarge(
                f"the answer from {self.describe()!r} exceeds the "
                f"{self.process.max_line_bytes}-byte line limit"))

    async def _read(self, inbound: Inbound) -> None:
        async for line in self.process.lines():
            if line.strip():
                inbound.receive(line)
        returncode = None
        if not self._closed:
            with anyio.move_on_after(EXIT_WAIT_S):
                returncode = await self.process.wait()
        inbound.closed(ConnectionClosed(
            f"the server process {self.describe()!r} closed its output",
            returncode=returncode if returncode is not None else self.process.returncode,
            stderr_tail=self.process.stderr_tail,
        ))

    async def send(self, message: Outgoing) -> None:
        try:
            await self.process.send(message.data)
        except StdioProcessError as exc:
            returncode = exc.returncode
            # Even when the exit status is known, `wait()` lets the stderr reader reach EOF
            # (bounded), so the error carries the child's last words.
            with anyio.move_on_after(EXIT_WAIT_S):
                returncode = await self.process.wait()
            raise ConnectionClosed(
                f"cannot write to the server process {self.describe()!r}",
                returncode=returncode, stderr_tail=self.process.stderr_tail,
            ) from exc

    async def abandon(self, request_id: RequestId) -> None:
        return None  # no per-request stream: cancellation is a notification

    async def close(self) -> None:
        if self._closed or not self._opened:
            self._closed = True
            return
        self._closed = True
        await self.process.aclose()


def answered_id(head: bytes, tail: bytes) -> RequestId | None:
    """The id of the response a dropped line held, from its first and last bytes; None
    when neither end shows a top-level id for sure."""
    for pattern, text in ((_ID_FIRST, head), (_ID_LAST, tail)):
        if pattern is _ID_LAST and _RESULT_FIRST.match(head) is None:
            break
        found = pattern.search(text)
        if found is not None:
            token = found.group(1)
            if token.startswith(b'"'):
                try:
                    value = json.loads(token)
                except ValueError:
                    continue
                return value if isinstance(value, str) else None
            return int(token)
    return None
