"""The stdio transport for the client: a child process, one JSON-RPC message per line.

When the child closes its stdout (it exited or crashed), the session learns at once:
`Inbound.closed` gets a `ConnectionClosed` with the exit code and the tail of its stderr,
so every pending request fails together instead of each waiting out its timeout.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import anyio
from anyio.abc import TaskGroup

from mcpkit.protocol.jsonrpc import RequestId
from mcpkit.transports.client.base import ConnectionClosed, Inbound, Outgoing
from mcpkit.transports.stdio_client import StdioProcess, StdioProcessError

EXIT_WAIT_S = 2.0
"""How long to wait for the exit code after the child closed its stdout."""


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
    ) -> None:
        if not command:
            raise ValueError("a stdio server needs a command")
        self.process = StdioProcess(command, env=env, cwd=cwd, close_timeout=close_timeout)
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
        task_group.start_soon(self._read, inbound)

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
