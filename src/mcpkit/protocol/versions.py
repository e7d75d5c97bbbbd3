"""Protocol versions and eras.

Modern versions (2026-07-28 and later) carry version, identity and capabilities on every
request's `_meta`; legacy versions negotiate them once with `initialize`.
"""

from __future__ import annotations

import enum

MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
"""Modern (stateless) versions this implementation speaks, newest first."""

LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""Legacy (session) versions this implementation speaks, newest first."""

ALL_VERSIONS: tuple[str, ...] = MODERN_VERSIONS + LEGACY_VERSIONS
LATEST_VERSION = MODERN_VERSIONS[0]
LATEST_LEGACY_VERSION = LEGACY_VERSIONS[0]

# Streamable HTTP: a legacy request without MCP-Protocol-Version is taken as 2025-03-26.
DEFAULT_HTTP_LEGACY_VERSION = "2025-03-26"


class Era(enum.Enum):
    MODERN = "modern"
    LEGACY = "legacy"


def era_of(version: str) -> Era | None:
    """The era of a version this implementation knows, or None for an unknown one."""
    if version in MODERN_VERSIONS:
        return Era.MODERN
    if version in LEGACY_VERSIONS:
        return Era.LEGACY
    return None


def negotiate_legacy_version(requested: str, supported: tuple[str, ...] = LEGACY_VERSIONS) -> str:
    """The version a legacy server answers to `initialize`.

    The requested version if supported, otherwise the newest supported one (the client
    then decides whether it can continue).
    """
    if requested in supported:
        return requested
    return supported[0]


def allows_batches(version: str) -> bool:
    """JSON-RPC batches exist only in the 2025-03-26 revision."""
    return version == "2025-03-26"


def has_protocol_version_header(version: str) -> bool:
    """Whether HTTP clients of this version send `MCP-Protocol-Version` (2025-06-18 on)."""
    return version not in ("2024-11-05", "2025-03-26")


def primes_sse_streams(version: str) -> bool:
    """Whether Streamable HTTP SSE streams open with a priming event (id, empty data) so the
    client can resume them: 2025-11-25 on."""
    return version in LEGACY_VERSIONS and version >= "2025-11-25"
