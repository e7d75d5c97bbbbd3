"""A round-robin HTTP load balancer for the replica tests: each request goes to the next
backend (so one client session alternates between hub replicas), responses - SSE streams
included - are streamed back as they come. A backend that refuses the connection is skipped,
as a real balancer's health check would; `hits` counts what each backend answered."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections import Counter
from collections.abc import Iterator

import aiohttp
from aiohttp import web

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host",
              "upgrade", "proxy-connection", "te", "trailer"}


CLIENT = web.AppKey("client", aiohttp.ClientSession)


class Balancer:
    def __init__(self, backends: list[str]) -> None:
        self.backends = backends
        self.hits: Counter[str] = Counter()
        self._next = itertools.cycle(range(len(backends)))

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        session = request.app[CLIENT]
        for _attempt in range(len(self.backends)):
            backend = self.backends[next(self._next)]
            try:
                upstream = await session.request(
                    request.method, backend + request.path_qs, data=body, headers=headers,
                    allow_redirects=False)
            except aiohttp.ClientConnectionError:
                continue  # that replica is down: the next one
            self.hits[backend] += 1
            return await self._relay(request, upstream)
        return web.Response(status=502, text="no backend answered")

    async def _relay(self, request: web.Request, upstream: aiohttp.ClientResponse
                     ) -> web.StreamResponse:
        async with upstream:
            response = web.StreamResponse(status=upstream.status, headers={
                k: v for k, v in upstream.headers.items() if k.lower() not in HOP_BY_HOP})
            await response.prepare(request)
            with contextlib.suppress(aiohttp.ClientError, ConnectionResetError):
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
            with contextlib.suppress(ConnectionResetError):
                await response.write_eof()
            return response


@contextlib.contextmanager
def running_balancer(backends: list[str], port: int) -> Iterator[Balancer]:
    """The balancer on 127.0.0.1:`port` in a thread of its own; stopped after."""
    balancer = Balancer(backends)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    runner_box: list[web.AppRunner] = []

    async def start() -> None:
        app = web.Application()
        app[CLIENT] = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        app.router.add_route("*", "/{tail:.*}", balancer.handle)
        runner = web.AppRunner(app, shutdown_timeout=1.0)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        runner_box.append(runner)
        started.set()

    async def stop() -> None:
        runner = runner_box[0]
        await runner.app[CLIENT].close()
        await runner.cleanup()

    thread = threading.Thread(target=loop.run_forever, daemon=True, name="balancer")
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    try:
        yield balancer
    finally:
        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        if not thread.is_alive():
            loop.close()
