"""`peer_key`: the client a per-address limit counts against."""

from __future__ import annotations

import ipaddress

from hypothesis import given
from hypothesis import strategies as st

from mcpkit.transports.server.http.peers import UNKNOWN_PEER, peer_key


def test_ipv4_is_the_address_and_ipv6_its_64_network() -> None:
    assert peer_key({"client": ("203.0.113.7", 5000)}) == "203.0.113.7"
    assert peer_key({"client": ("2001:db8:1:2:aaaa::1", 1)}) == "2001:db8:1:2::/64"
    assert peer_key({"client": ("::ffff:198.51.100.1", 1)}) == "198.51.100.1"
    assert peer_key({"client": None}) == peer_key({}) == UNKNOWN_PEER


@given(st.ip_addresses(v=6))
def test_every_address_of_one_64_is_one_client(address: ipaddress.IPv6Address) -> None:
    network = ipaddress.IPv6Network((address, 64), strict=False)
    if address.ipv4_mapped is not None:
        return
    assert peer_key({"client": (str(address), 1)}) == peer_key(
        {"client": (str(network.network_address + 1), 2)}) == str(network)
