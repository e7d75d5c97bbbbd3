"""Which of this client's requests a server→client request belongs to: its *origin*.

A server may ask the client something (sampling, elicitation, roots) while it handles one
of the client's requests. Code that shares one `Client` among many callers - a gateway
relaying each question to the caller whose request caused it - needs to know which one:

    with request_origin(caller):              # around the request
        await client.request("tools/call", params)

    async def sampling(params):               # the client's sampling handler
        caller = current_origin()              # the `caller` above, or None

How the origin is found: the value set around a request is kept with it. When a server
request arrives on that request's own stream (Streamable HTTP sends it there), it is that
request's origin. Otherwise (stdio, the standalone stream) it is the origin of the only
request in flight that has one; with none or several, `current_origin()` is None: the
handler cannot tell, and should refuse rather than guess. Notifications (log messages)
are handled with their origin found the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

_ORIGIN: ContextVar[object | None] = ContextVar("mcpkit_request_origin", default=None)


@contextlib.contextmanager
def request_origin(origin: object) -> Iterator[None]:
    """Requests sent inside this block carry `origin` (see the module docstring)."""
    token = _ORIGIN.set(origin)
    try:
        yield
    finally:
        _ORIGIN.reset(token)


def current_origin() -> object | None:
    """In a server-request handler: the origin of the request it belongs to, if known.
    While sending: the origin requests get."""
    return _ORIGIN.get()
