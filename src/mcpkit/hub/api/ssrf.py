"""The SSRF check of an upstream's URL at registration (POST, and PATCH of `url`).

Unless the operator allows private upstreams (`--allow-private-upstreams`), the host must not
be a loopback, private, link-local, CGNAT, metadata or otherwise non-public address or name
(`mcpkit.netguard`); a name is resolved - bounded by `dns_timeout_s` - and every address it
gives must pass too. Numeric spellings the resolver understands (`2130706433`, `0x7f.1`) are
caught by the same resolution. This refuses the obvious at once, with a reason; the real guard
is at connect time (`GuardedResolver`), because a name may point elsewhere later.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import anyio

from mcpkit.hub.api.context import HostResolver
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Invalid
from mcpkit.netguard import address_problem, host_problem, parse_ip

DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}
HINT = ("the hub reaches only public addresses unless its operator allows private upstreams "
        "(`mcpkit hub serve --allow-private-upstreams` or MCPKIT_HUB_ALLOW_PRIVATE_UPSTREAMS=1)")
"""Said with every refusal: what the operator changes to allow it, by option and variable."""


async def check_upstream_url(url: str, settings: HubSettings, resolve: HostResolver) -> None:
    """`Invalid("url", why)` when the URL's host may not be reached. The URL is already
    well-formed (the store's shape check ran first)."""
    if settings.allow_private_upstreams:
        return
    parts = urlsplit(url)
    host = (parts.hostname or "").rstrip(".")
    problem = host_problem(host)
    if problem is not None:
        raise Invalid("url", f"{host} is {problem}: {HINT}")
    if parse_ip(host) is not None:
        return  # a public IP literal: nothing to resolve
    port = parts.port or DEFAULT_PORTS.get(parts.scheme.lower(), 443)
    try:
        with anyio.fail_after(settings.dns_timeout_s):
            addresses = await resolve(host, port)
    except TimeoutError:
        raise Invalid("url", f"{host} did not resolve within {settings.dns_timeout_s:g} s") \
            from None
    except (OSError, UnicodeError, ValueError) as error:
        raise Invalid("url", f"{host} does not resolve ({error})") from None
    if not addresses:
        raise Invalid("url", f"{host} does not resolve")
    for address in addresses:
        ip = parse_ip(address.split("%", 1)[0])
        why = "an unparseable address" if ip is None else address_problem(ip)
        if why is not None:
            raise Invalid("url", f"{host} resolves to {address}, {why}: {HINT}")
