"""Who is at the other end of a connection, for limits kept per client: `peer_key(scope)`.

An IPv4 client is its address; an IPv6 client is its /64 network, since one host commonly
holds a whole /64 and could otherwise take a fresh address for every request. Behind a
reverse proxy every client is the proxy unless uvicorn rewrites the address from
`X-Forwarded-For` (its `forwarded_allow_ips`, loopback by default).
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Mapping
from typing import Any

IPV6_PREFIX = 64
UNKNOWN_PEER = "unknown"
"""A client uvicorn gave no address for (a Unix socket): they all share one key."""


def peer_key(scope: Mapping[str, Any]) -> str:
    """The key of the client that sent this ASGI request ("203.0.113.7", "2001:db8::/64")."""
    client = scope.get("client")
    if not client:
        return UNKNOWN_PEER
    return host_key(str(client[0]))


def caller_key(scope: Mapping[str, Any]) -> str:
    """Whose quota a request counts against: the authenticated principal (the scope's
    "mcpkit.principal", `app.PRINCIPAL_KEY`), else "peer:" and the client's `peer_key`."""
    principal = str(scope.get("mcpkit.principal", ""))
    return principal or f"peer:{peer_key(scope)}"


@functools.lru_cache(maxsize=4096)
def host_key(host: str) -> str:
    """`peer_key` of a client whose address is `host` (cached: the same clients come back
    request after request, and parsing an address costs more than the rest of the check)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:100] or UNKNOWN_PEER
    if isinstance(address, ipaddress.IPv6Address):
        mapped = address.ipv4_mapped
        if mapped is not None:
            return str(mapped)
        network = ipaddress.IPv6Network((address, IPV6_PREFIX), strict=False)
        return str(network)
    return str(address)
