"""DNS-rebinding protection: which Host and Origin headers a local server accepts.

By default only loopback names (localhost, 127.0.0.1, [::1], any port) are accepted as
Host, and an Origin, when present, must point at a loopback host too. A server exposed on
other names must list them explicitly; "*" accepts anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]", "::1"})


def _host_name(host: str) -> str:
    """`host[:port]` → host, keeping IPv6 brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class HostGuard:
    def __init__(
        self,
        allowed_hosts: Iterable[str] | None = None,
        allowed_origins: Iterable[str] | None = None,
    ) -> None:
        self.any_host = allowed_hosts is not None and "*" in allowed_hosts
        self.hosts = {h.lower() for h in allowed_hosts} if allowed_hosts else set(LOOPBACK_HOSTS)
        self.any_origin = allowed_origins is not None and "*" in allowed_origins
        self.origins = {o.lower().rstrip("/") for o in allowed_origins or ()}

    def host_ok(self, host: str | None) -> bool:
        if self.any_host:
            return True
        if not host:
            return False
        return host.lower() in self.hosts or _host_name(host) in self.hosts

    def origin_ok(self, origin: str | None) -> bool:
        if origin is None or self.any_origin:
            return True
        origin = origin.lower().rstrip("/")
        if origin in self.origins:
            return True
        netloc = urlsplit(origin).netloc
        return bool(netloc) and (_host_name(netloc) in LOOPBACK_HOSTS or netloc in self.hosts)
