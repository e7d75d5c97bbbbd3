"""From what the user names (a URL, a command, a `Server`) to a client transport.

    "http://host/mcp", "https://…"  Streamable HTTP (falls back to HTTP+SSE for old servers)
    "ws://…", "wss://…"             WebSocket (subprotocol "mcp")
    ["cmd", "arg", …]               stdio: spawn the command
    a mcpkit `Server`               in memory, same process
    a `ClientTransport`             used as given

`kind` ("stdio", "http", "sse", "websocket") overrides the guess from a URL.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from mcpkit.auth.provider import HttpAuth
from mcpkit.errors import InvalidArgument, InvalidArgumentType
from mcpkit.transports.client.base import ClientTransport

URL_KINDS = {"http": "http", "https": "http", "ws": "websocket", "wss": "websocket"}
KINDS = ("stdio", "http", "sse", "websocket", "memory")


@dataclass(slots=True)
class ConnectOptions:
    """How a `Client` reaches its server. `kind` ("stdio", "http", "sse", "websocket",
    "memory") overrides the guess from the target; `headers` and `bearer_token` go with
    every HTTP/WebSocket request; a stdio child gets `env` over a minimal environment
    (`SAFE_ENV_NAMES`, never this process's secrets) unless `inherit_env`, in `cwd`."""

    kind: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    bearer_token: str | None = None
    env: Mapping[str, str] | None = None
    inherit_env: bool = False
    cwd: str | None = None
    connect_timeout: float = 30.0
    """Seconds for `connect()`: opening the transport and settling the era."""
    resolver: Any = None
    """An aiohttp resolver for HTTP and WebSocket connections (None: aiohttp's own;
    `mcpkit.netguard.GuardedResolver` refuses private addresses at connect time)."""
    auth: HttpAuth | None = None
    """Authorization of HTTP requests (set by `Client(auth=OAuth(…))`): asked for the
    `Authorization` header, handed the 401/403s (Streamable HTTP and HTTP+SSE)."""
    probe_timeout: float = 3.0
    """Seconds the era probe (`server/discover`) waits when the era is not pinned:
    silence means a legacy server."""


def is_url(target: object) -> bool:
    return isinstance(target, str) and "://" in target


def kind_of(target: object, options: ConnectOptions) -> str:
    if options.kind is not None:
        if options.kind not in KINDS:
            raise InvalidArgument(
                f"unknown transport {options.kind!r}; use one of {', '.join(KINDS)}")
        return options.kind
    if isinstance(target, str):
        if not is_url(target):
            raise InvalidArgument(
                f"{target!r} is not a URL; to run a command, pass it as a list: "
                f"Client([{target!r}, ...])"
            )
        scheme = _split(target).scheme.lower()
        if scheme not in URL_KINDS:
            raise InvalidArgument(f"unsupported URL scheme {scheme!r} in {target!r}")
        return URL_KINDS[scheme]
    if isinstance(target, Sequence):
        return "stdio"
    if _is_server(target):
        return "memory"
    if _is_transport(target):
        return str(target.kind)
    raise InvalidArgumentType(
        f"cannot connect to {target!r}: pass a URL, a command list, a Server or a transport"
    )


def _split(url: str) -> urllib.parse.SplitResult:
    """`urlsplit(url)`; a URL it cannot split (such as "http://[::1/mcp") is the caller's
    `InvalidArgument`, with urlsplit's ValueError as its cause."""
    try:
        return urllib.parse.urlsplit(url)
    except ValueError as exc:
        raise InvalidArgument(f"{url!r} is not a valid URL: {exc}") from exc


def make_transport(target: object, kind: str, options: ConnectOptions) -> ClientTransport:
    if _is_transport(target) and not isinstance(target, str | Sequence):
        return target
    if kind == "stdio":
        from mcpkit.transports.client.stdio import StdioTransport

        if isinstance(target, str) or not isinstance(target, Sequence):
            raise InvalidArgumentType(
                "a stdio server is a command list, e.g. ['python', 'server.py']")
        return StdioTransport([str(part) for part in target], env=child_environment(options),
                              cwd=options.cwd)
    if kind == "memory":
        from mcpkit.transports.client.memory import MemoryTransport

        return MemoryTransport(target)  # type: ignore[arg-type]
    if not isinstance(target, str):
        raise InvalidArgumentType(f"a {kind} server is named by its URL")
    return make_url_transport(target, kind, options)


SAFE_ENV_NAMES = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL",
                  "LC_CTYPE", "TMPDIR", "TZ", "SYSTEMROOT")
"""What a stdio child inherits from this process by default: enough to run, no secrets."""


def child_environment(options: ConnectOptions) -> dict[str, str] | None:
    """A stdio child's environment: the safe variables of this process plus `env`
    (`inherit_env=True`: all of this process's variables plus `env`)."""
    if options.inherit_env:
        return {**os.environ, **(options.env or {})}
    base = {name: os.environ[name] for name in SAFE_ENV_NAMES if name in os.environ}
    return {**base, **(options.env or {})}


def make_url_transport(url: str, kind: str, options: ConnectOptions) -> ClientTransport:
    common: dict[str, Any] = {
        "headers": dict(options.headers),
        "bearer_token": options.bearer_token,
        "connect_timeout": options.connect_timeout,
        "resolver": options.resolver,
    }
    if kind == "http":
        from mcpkit.transports.client.http import StreamableHttpTransport

        return StreamableHttpTransport(url, auth=options.auth, **common)
    if kind == "sse":
        from mcpkit.transports.client.sse import LegacySseTransport

        return LegacySseTransport(url, auth=options.auth, **common)
    if kind == "websocket":
        from mcpkit.transports.client.websocket import WebSocketTransport

        return WebSocketTransport(url, auth=options.auth, **common)
    raise InvalidArgument(f"a URL cannot be served over {kind!r}")


def server_key(target: object, kind: str, options: ConnectOptions) -> str:
    """What identifies "the same server" for the era cache: origin + path for URLs, the
    command line and directory for stdio, the object for in-memory servers."""
    if isinstance(target, str):
        parts = _split(target)
        return f"{kind}:{parts.scheme}://{parts.netloc}{parts.path}"
    if kind == "stdio" and isinstance(target, Sequence):
        return f"stdio:{options.cwd or ''}:{' '.join(map(str, target))}"
    return f"{kind}:{id(target)}"


def _is_server(obj: object) -> bool:
    # Duck-typed so the client does not import the server framework for this check.
    return all(hasattr(obj, name) for name in ("engine", "notifier", "add_tool"))


def _is_transport(obj: object) -> TypeGuard[ClientTransport]:
    return isinstance(obj, ClientTransport)
