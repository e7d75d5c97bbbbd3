"""Which network addresses may be reached: the SSRF policy shared by the coding server's
`fetch` tool and the hub's upstream connections.

Refused: loopback, private (RFC 1918, ULA), link-local, multicast, unspecified, reserved,
CGNAT and cloud metadata addresses, addresses that embed one of them (IPv4-mapped, 6to4,
Teredo, NAT64), and well-known internal names (`localhost`, `*.localhost`, metadata names).

Checking a name once and connecting later lets DNS rebinding through, so the check belongs
where the connection is made: `GuardedResolver` is an aiohttp resolver that refuses a host
when any address it resolves to is refused, at connect time. IP-literal hosts are not
resolved by aiohttp; callers check them (and names) up front with `host_problem`.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from mcpkit.errors import TransportError

Describe = Callable[[str, str, str], str]
"""(host, address, problem) → the message of a refusal."""


class BlockedAddress(TransportError):
    """A host that resolves to an address that may not be reached.

    A `TransportError`, hence an `OSError`, so that aiohttp's connector wraps it (in
    `ClientConnectorDNSError`) like any other resolution failure; callers unwrap it for the
    message.
    """


def default_message(host: str, address: str, problem: str) -> str:
    where = host if host == address else f"{host} ({address})"
    return f"refused to connect to {where}: {problem}"


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES = frozenset({
    ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, …
    ipaddress.ip_address("169.254.170.2"),  # AWS ECS task metadata
    ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
    ipaddress.ip_address("fd00:ec2::254"),  # AWS IPv6
})
BLOCKED_NAMES = frozenset({"localhost", "metadata.google.internal", "metadata.goog",
                           "metadata"})
CGNAT = ipaddress.ip_network("100.64.0.0/10")
NAT64 = ipaddress.ip_network("64:ff9b::/96")


def address_problem(ip: IPAddress) -> str | None:
    """Why `ip` is not to be reached (None when it is a public address)."""
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(ip, ipaddress.IPv6Address):
        translated = ip.ipv4_mapped
        if translated is None and ip in NAT64:
            translated = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if translated is not None:  # these reach exactly the IPv4 address inside
            inner = address_problem(translated)
            return None if inner is None else f"{inner} (as {ip})"
        tunnelled = ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if tunnelled is not None:
            inner = address_problem(tunnelled)
            if inner is not None:
                return f"{inner} (tunnelled in {ip})"
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_multicast:
        return "a multicast address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in CGNAT:
        return "a shared (CGNAT) address"
    if ip.is_reserved:
        return "a reserved address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global:
        return "not a public address"
    return None


def parse_ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def name_problem(host: str) -> str | None:
    """Why the host name itself is refused (None when only its addresses can tell)."""
    name = host.rstrip(".").lower()
    if name in BLOCKED_NAMES or name.endswith(".localhost"):
        if name == "localhost" or name.endswith(".localhost"):
            return "a loopback name"
        return "a cloud metadata name"
    return None


def host_problem(host: str) -> str | None:
    """Why a URL's host (a name or an IP literal) is refused before resolving it."""
    problem = name_problem(host)
    if problem is not None:
        return problem
    ip = parse_ip(host)
    return None if ip is None else address_problem(ip)


class GuardedResolver(AbstractResolver):
    """Resolves through `inner` (aiohttp's default) and refuses a host when any address it
    resolves to is not public, at the moment the connector is about to connect."""

    def __init__(self, allow_private: bool = False, describe: Describe = default_message,
                 inner: AbstractResolver | None = None) -> None:
        self.allow_private = allow_private
        self.describe = describe
        self.inner = inner if inner is not None else aiohttp.DefaultResolver()

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        if not self.allow_private:
            problem = name_problem(host)
            if problem is not None:
                raise BlockedAddress(self.describe(host, host, problem))
        results = await self.inner.resolve(host, port, family)
        if not self.allow_private:
            for result in results:
                ip = parse_ip(result["host"].split("%", 1)[0])
                problem = "an unparseable address" if ip is None else address_problem(ip)
                if problem is not None:
                    raise BlockedAddress(self.describe(host, result["host"], problem))
        return results

    async def close(self) -> None:
        await self.inner.close()
