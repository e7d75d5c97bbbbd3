"""A TCP relay on uvloop: the cheapest hop a Python process can be, for `hub_bench.py --relay`.

    .venv/bin/python bench/tcp_relay.py LISTEN_PORT UPSTREAM_PORT

Every connection accepted on 127.0.0.1:LISTEN_PORT gets its own connection to
127.0.0.1:UPSTREAM_PORT, and bytes are copied both ways as they arrive: no parsing, no
buffering beyond what the transports hold, no HTTP. What it costs per call is what putting
one more process between the client and the echo server costs on this machine (the wake-ups,
the reads and writes, the loop) before the hop does any work of its own; the hub does that
and all of its work.
"""

from __future__ import annotations

import asyncio
import sys
from typing import cast

import uvloop


class Side(asyncio.Protocol):
    """One end of a relayed connection: what it receives goes out of its peer. A peer whose
    send buffer is full pauses this side's reading (and the other way round)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: Side | None = None
        self.early: list[bytes] = []  # bytes that came before the peer was connected

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def pair(self, peer: Side) -> None:
        self.peer = peer
        if peer.transport is not None:
            for data in self.early:
                peer.transport.write(data)
        self.early = []

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is None or peer.transport is None:
            self.early.append(data)
        else:
            peer.transport.write(data)

    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()


class Downstream(Side):
    """A client's connection: opens its upstream connection when it arrives."""

    def __init__(self, upstream_port: int) -> None:
        super().__init__()
        self.upstream_port = upstream_port
        self.connecting: asyncio.Future[None] | None = None
        """The task opening the upstream connection, held here: the loop keeps only a weak
        reference to its tasks."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.connecting = asyncio.ensure_future(self.connect())

    async def connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, upstream = await loop.create_connection(Side, "127.0.0.1", self.upstream_port)
        except OSError:
            if self.transport is not None:
                self.transport.close()
            return
        upstream.pair(self)
        self.pair(upstream)


async def relay(listen_port: int, upstream_port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Downstream(upstream_port), "127.0.0.1",
                                      listen_port)
    async with server:
        await server.serve_forever()


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: tcp_relay.py LISTEN_PORT UPSTREAM_PORT")
    uvloop.run(relay(int(sys.argv[1]), int(sys.argv[2])))


if __name__ == "__main__":
    main()
