"""DNS-rebinding protection: which Host and Origin headers a local server accepts.

By default only loopback names (localhost, 127.0.0.1, [::1], any port) are accepted as
Host, and an Origin, when present, must point at a loopback host too. A server exposed on
other names must list them explicitly; "*" accepts anything.

Both headers are parsed strictly, since a lenient parser is what a rebinding attack
aims at (`http://localhost:80@evil.example` is a page of evil.example with a user name):
- Host is `host[:port]` and nothing else: a name of letters, digits, `-` and `.` (no
  trailing dot), a dotted IPv4 address, or an IPv6 address in brackets; the port, when
  given, is 1 to 5 digits up to 65535.
- Origin is `http(s)://host[:port]` and nothing else: no user info, path (not even `/`),
  query or fragment. An Origin the operator listed is accepted as written; the opaque
  `null` only if listed.
Anything else is refused (403).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "[::1]"})

_WEB_SCHEMES = frozenset({"http", "https"})
_MAX_PORT = 65535
_AUTHORITY = re.compile(
    r"(?P<host>\[[0-9a-f:.]+\]|[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)(?::(?P<port>[0-9]{1,5}))?"
)
_ORIGIN = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*)://(?P<authority>[^/?#@\\\s]+)")


def parse_authority(value: str) -> tuple[str, int | None] | None:
    """`host[:port]` → (host in canonical lower case, port), or None if it is anything else.
    IPv6 addresses keep their brackets and are compressed (`[0:0::1]` → `[::1]`)."""
    match = _AUTHORITY.fullmatch(value.strip().lower())
    if match is None:
        return None
    host, port_text = match["host"], match["port"]
    port = int(port_text) if port_text is not None else None
    if port is not None and port > _MAX_PORT:
        return None
    if host.startswith("["):
        try:
            host = f"[{ipaddress.IPv6Address(host[1:-1]).compressed}]"
        except ValueError:
            return None
    elif ".." in host:
        return None
    return host, port


def parse_origin(value: str) -> tuple[str, str, int | None] | None:
    """`scheme://host[:port]` → (scheme, host, port), or None if it is anything else."""
    match = _ORIGIN.fullmatch(value.strip().lower())
    if match is None:
        return None
    authority = parse_authority(match["authority"])
    if authority is None:
        return None
    return match["scheme"], authority[0], authority[1]


_REMEMBERED_VERDICTS = 256
"""How many header values' verdicts a guard keeps (per header; forgotten all at once when
full, so a client sending a new value each time costs a parse, never memory)."""


def _remember(verdicts: dict[str, bool], value: str, verdict: bool) -> None:
    if len(verdicts) >= _REMEMBERED_VERDICTS:
        verdicts.clear()
    verdicts[value] = verdict


def _authority_text(host: str, port: int | None) -> str:
    return host if port is None else f"{host}:{port}"


class HostGuard:
    def __init__(
        self,
        allowed_hosts: Iterable[str] | None = None,
        allowed_origins: Iterable[str] | None = None,
    ) -> None:
        self.any_host = allowed_hosts is not None and "*" in allowed_hosts
        self.hosts = {h.strip().lower() for h in allowed_hosts} if allowed_hosts else set(
            LOOPBACK_HOSTS
        )
        self.any_origin = allowed_origins is not None and "*" in allowed_origins
        self.origins = {o.strip().lower().rstrip("/") for o in allowed_origins or ()}
        # Verdicts on the header values seen lately: every request carries a Host, and
        # clients send the same few values again and again.
        self._host_verdicts: dict[str, bool] = {}
        self._origin_verdicts: dict[str, bool] = {}

    def host_ok(self, host: str | None) -> bool:
        if self.any_host:
            return True
        if not host:
            return False
        verdict = self._host_verdicts.get(host)
        if verdict is None:
            parsed = parse_authority(host)
            verdict = parsed is not None and self._allowed_host(*parsed)
            _remember(self._host_verdicts, host, verdict)
        return verdict

    def origin_ok(self, origin: str | None) -> bool:
        if origin is None or self.any_origin:
            return True
        verdict = self._origin_verdicts.get(origin)
        if verdict is None:
            verdict = self._judge_origin(origin)
            _remember(self._origin_verdicts, origin, verdict)
        return verdict

    def _judge_origin(self, origin: str) -> bool:
        if origin.strip().lower() in self.origins:
            return True
        parsed = parse_origin(origin)
        if parsed is None:
            return False
        scheme, host, port = parsed
        if scheme not in _WEB_SCHEMES:
            return False
        return host in LOOPBACK_HOSTS or self._allowed_host(host, port)

    def _allowed_host(self, host: str, port: int | None) -> bool:
        """A parsed host is allowed when its name, or its name with this port, is listed."""
        return host in self.hosts or _authority_text(host, port) in self.hosts
