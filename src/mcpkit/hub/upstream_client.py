"""The one client the hub presents to its upstreams.

    client = upstream_client(upstream, credentials, settings)            # catalog, health
    client = upstream_client(upstream, credentials, settings,
                             events=UpstreamEvents(on_list_changed=...))  # the router's pool

Every connection the hub opens to an upstream is made here - the catalog fetch (registration,
`refresh`, `GET …/tools?refresh=true`, the health checker) and the calls (`router/pool.py`) -
so an upstream sees the same client on every path and lists to the catalog exactly what a
call can then use. (Upstreams may list a tool only to a client that declared what the tool
needs: the reference "everything" server lists its sampling and elicitation tools that way.
A catalog fetched by a client that declared less than the caller's connection had tools
missing, whose calls then answered "Unknown tool".) What the upstream sees:

- capabilities: sampling (with tools) and elicitation (form and URL). The hub answers none
  of them itself: each question goes to the caller whose forwarded call asked it
  (`router/relay.py`), who must have declared the capability in turn, else the upstream gets
  the caller's -32021 "missing capability" error. A question asked outside any forwarded
  call - during a catalog fetch, say - is refused.
- no roots: roots belong to a session, and one hub connection serves all of a user's callers,
  each with roots of its own, so no caller's roots can be the connection's. (An upstream that
  adopted one caller's roots would serve the others from them.)
- client info `HUB_CLIENT_INFO`, and no pinned era or version: the era is detected (and
  cached per upstream) the same way on every path.
- the target the operator allows: stdio only with `allow_stdio`; an IP-literal host checked
  here and every name resolved through `netguard.GuardedResolver` at each connect, unless
  `allow_private_upstreams`.
- headers: the upstream's own stored headers and bearer, never anything of the caller (its
  catalog credentials, when it has any, on catalog fetches and health checks: the callers
  pass the `Credentials` for their purpose); for an "oauth" upstream, its owner's own login
  (`credentials.auth`, hub/upstream_auth.py) instead of the bearer and any stored
  Authorization header.
- time: `connect_timeout_s` to connect, each request `call_timeout_s` at most.
- log messages asked for at `FORWARDED_LOG_LEVEL` (each caller's own level filters further).

What differs per path is only what the hub does with what it hears (`UpstreamEvents`), which
an upstream cannot see.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from mcpkit import __version__
from mcpkit.client import Behaviour, Client, ConnectOptions, Notifications, Responders, Timeouts
from mcpkit.errors import PeerError
from mcpkit.hub.store.records import Credentials, UpstreamRecord
from mcpkit.netguard import GuardedResolver, host_problem

if TYPE_CHECKING:
    from mcpkit.hub.settings import HubSettings

CLIENT_KINDS = {"http": "http", "sse": "sse", "ws": "websocket", "stdio": "stdio"}
"""The store's transport names → `mcpkit.Client`'s."""
HUB_CLIENT_INFO = {"name": "mcpkit-hub", "version": __version__}
ELICITATION_MODES = ("form", "url")
FORWARDED_LOG_LEVEL = "info"
"""What upstreams are asked to log (each caller's own level filters further)."""
PROBE_TIMEOUT_S = 3.0
"""At most this long (and never longer than the connect timeout) to probe an upstream's era."""
MAX_REASON = 500
"""An upstream's error, as shown and stored, is cut to this many characters."""


class UpstreamUnavailable(PeerError):
    """The upstream could not be reached or listed; `str()` is the reason (no secrets)."""


@dataclass(frozen=True, slots=True)
class UpstreamEvents:
    """What the hub does with an upstream's notifications on this connection (invisible to
    the upstream: the same client either way)."""

    on_list_changed: Callable[[str], Awaitable[None]] | None = None
    """(kind) after the upstream said its list of tools, prompts or resources changed."""
    on_resource_updated: Callable[[str], Awaitable[None]] | None = None
    """(uri) after the upstream said a subscribed resource changed."""


def upstream_client(
    upstream: UpstreamRecord,
    credentials: Credentials,
    settings: HubSettings,
    *,
    events: UpstreamEvents | None = None,
) -> Client:
    """A (not yet connected) `Client` for `upstream`, as the module describes.
    `UpstreamUnavailable` for a target the operator does not allow."""
    # The relay lives in the router package, which imports the catalog and so this module:
    # imported at first use, when every module is loaded.
    from mcpkit.hub.router import relay

    events = events or UpstreamEvents()
    login = credentials.auth
    headers = dict(credentials.headers)
    if login is not None:  # the login alone authorizes: no stored Authorization beside it
        headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
    return Client(
        _target(upstream, settings),
        bearer_token=None if login is not None else credentials.bearer,
        auth=login,
        connect=ConnectOptions(
            kind=CLIENT_KINDS[upstream.transport],
            headers=headers,
            resolver=GuardedResolver(allow_private=settings.allow_private_upstreams),
            connect_timeout=upstream.connect_timeout_s,
            probe_timeout=min(PROBE_TIMEOUT_S, upstream.connect_timeout_s),
        ),
        behaviour=Behaviour(
            client_info=HUB_CLIENT_INFO,
            log_level=FORWARDED_LOG_LEVEL,
            validate_output=False,
        ),
        responders=Responders(
            sampling=relay.relay_sampling,
            sampling_tools=True,
            elicitation=relay.relay_elicitation,
            elicitation_modes=ELICITATION_MODES,
        ),
        notifications=Notifications(
            on_log=relay.relay_log,
            on_list_changed=events.on_list_changed,
            on_resource_updated=events.on_resource_updated,
        ),
        timeouts=Timeouts(timeout=upstream.call_timeout_s, maximum=upstream.call_timeout_s),
    )


def reason(error: BaseException) -> str:
    """One line for an upstream failure: the message, else the exception's type name."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def _target(upstream: UpstreamRecord, settings: HubSettings) -> str | list[str]:
    if upstream.transport == "stdio":
        if not settings.allow_stdio:
            raise UpstreamUnavailable(f"{upstream.name}: stdio upstreams are disabled")
        if not upstream.command:
            raise UpstreamUnavailable(f"{upstream.name}: no command")
        return list(upstream.command)
    if not upstream.url:
        raise UpstreamUnavailable(f"{upstream.name}: no URL")
    if not settings.allow_private_upstreams:
        host = urlsplit(upstream.url).hostname or ""
        problem = host_problem(host)
        if problem is not None:
            raise UpstreamUnavailable(f"{upstream.name}: refused to connect to {host}: {problem}")
    return upstream.url


__all__ = [
    "CLIENT_KINDS",
    "HUB_CLIENT_INFO",
    "UpstreamEvents",
    "UpstreamUnavailable",
    "reason",
    "upstream_client",
]
