"""Binding the listening sockets before a server starts, so that a port in use or a host that
is not this machine's is one clear error (`ListenError`) and nothing has been announced yet;
uvicorn then serves on the sockets it is handed (`serve.run_http`, `mcpkit hub serve`).

    sockets = listen("127.0.0.1", 8000)      # bound and listening, or ListenError
    listening_url("127.0.0.1", sockets)      # "http://127.0.0.1:8000" (the real port for 0)
"""

from __future__ import annotations

import errno
import socket

from mcpkit.protocol.errors import INTERNAL_ERROR, LocalError

DEFAULT_BACKLOG = 2048
"""Connections the kernel queues before the server accepts them (uvicorn's default)."""


class ListenError(LocalError):
    """The server cannot listen where it was told to; `message` is one line that names the
    address and what to do about it."""

    def __init__(self, message: str) -> None:
        super().__init__(INTERNAL_ERROR, message)


def listen(host: str, port: int, *, backlog: int = DEFAULT_BACKLOG) -> list[socket.socket]:
    """Sockets bound to every address `host` names (one per address family, as
    `loop.create_server` would bind) on `port`, listening. Port 0 picks a free port, the same
    one for every address. Raises `ListenError` when any of them cannot be bound."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise ListenError(f"cannot listen on {host!r}: the name does not resolve "
                          f"({error.strerror}); pass --host with an address of this machine "
                          "(127.0.0.1 for this machine only)") from None
    sockets: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _name, address in infos:
            if (family, address[0]) in seen:
                continue
            seen.add((family, address[0]))
            bound_port = sockets[0].getsockname()[1] if sockets else port
            sockets.append(_bind(family, kind, proto, (address[0], bound_port, *address[2:]),
                                 host, port, backlog))
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _bind(family: int, kind: int, proto: int, address: tuple[object, ...], host: str,
          port: int, backlog: int) -> socket.socket:
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # restart over TIME_WAIT
        if family == socket.AF_INET6:  # as asyncio does: the IPv4 address is bound apart
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError as error:
        sock.close()
        raise ListenError(_explain(error, host, port)) from None
    sock.setblocking(False)
    return sock


def _explain(error: OSError, host: str, port: int) -> str:
    where = f"port {port} on {host or 'all addresses'}"
    if error.errno == errno.EADDRINUSE:
        return f"{where} is in use; stop what uses it or pass another port (--port N)"
    if error.errno == errno.EADDRNOTAVAIL:
        return (f"cannot listen on {host}: it is not an address of this machine; pass --host "
                "with one of its addresses (127.0.0.1 for this machine only, 0.0.0.0 for all)")
    if error.errno == errno.EACCES:
        return (f"not allowed to listen on {where} (ports below 1024 need privileges); pass "
                "--port with a port above 1023")
    return f"cannot listen on {where}: {error.strerror or error}"


def listening_url(host: str, sockets: list[socket.socket]) -> str:
    """`http://HOST:PORT` for the address the server was told, with the port it really got
    (`--port 0` picks one)."""
    port = sockets[0].getsockname()[1] if sockets else 0
    shown = host or "0.0.0.0"
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}"
