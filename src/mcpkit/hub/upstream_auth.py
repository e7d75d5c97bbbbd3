"""The owner's login to an OAuth-protected upstream, as a client auth object for the hub's
connections to it (pool, catalog, health).

    auth = await client_auth(context, upstream, purpose="call")    # HttpAuth | None
    client = upstream_client(upstream, credentials, settings, auth=auth)

An upstream with `auth_mode` "static" (the default) needs none: its stored headers and bearer
are sent. One with `auth_mode` "oauth" is called with its owner's own login, kept per (user,
upstream); with no login, or a dead one, `UpstreamNeedsLogin` names the endpoint that starts
one. The caller's hub token is never sent upstream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from mcpkit.hub.upstream_client import UpstreamUnavailable

if TYPE_CHECKING:
    from mcpkit.auth.provider import HttpAuth
    from mcpkit.hub.api.context import HubContext
    from mcpkit.hub.store import UpstreamRecord

Purpose = Literal["call", "catalog"]
"""What the connection is for: a caller's calls, or the catalog fetch (health checks too)."""


class UpstreamNeedsLogin(UpstreamUnavailable):
    """The upstream needs its owner's OAuth login, and there is none (never made, logged out,
    or found dead: `invalid_grant`). An `UpstreamUnavailable`, so every path that reports an
    unreachable upstream reports this too; the health check tells it apart (needs_auth)."""

    def __init__(self, upstream: UpstreamRecord, why: str = "no login") -> None:
        self.upstream_id = upstream.id
        super().__init__(
            f"{upstream.name}: needs its owner's OAuth login ({why}): "
            f"POST {start_path(upstream.id)}")


def start_path(upstream_id: str) -> str:
    """The REST endpoint that starts the owner's login to the upstream."""
    return f"/api/v1/upstreams/{upstream_id}/oauth/start"


async def client_auth(context: HubContext, upstream: UpstreamRecord, *,
                      purpose: Purpose = "call") -> HttpAuth | None:
    """The auth object for a connection to `upstream` (None: its static credentials do);
    `UpstreamNeedsLogin` when it needs its owner's login and has none that works."""
    return None


__all__ = ["Purpose", "UpstreamNeedsLogin", "client_auth", "start_path"]
