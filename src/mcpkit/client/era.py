"""Detecting the era of a server (spec: basic/versioning.mdx, "Backward Compatibility").

The client probes with a modern request. A result, or a *recognized modern* JSON-RPC
error, means a modern server; anything else (another error, a 4xx without a modern error
body, silence until the probe's timeout) means a legacy one. The decision never rests on a
single legacy error code. Results are cached per server (stdio command, HTTP origin+path).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mcpkit.protocol import errors
from mcpkit.protocol.versions import MODERN_VERSIONS, Era
from mcpkit.transports.client.base import HttpStatusError

_CACHE: dict[str, Era] = {}
"""Era per server key, for the life of this process (spec: SHOULD cache)."""
MAX_CACHED = 1024


def cached_era(key: str) -> Era | None:
    return _CACHE.get(key)


def remember_era(key: str, era: Era) -> None:
    if len(_CACHE) >= MAX_CACHED and key not in _CACHE:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = era


def forget_era(key: str) -> None:
    _CACHE.pop(key, None)


def modern_error_of(exc: BaseException) -> dict[str, Any] | None:
    """The recognized modern JSON-RPC error (code, message, data) a probe failure carries."""
    if isinstance(exc, errors.McpError) and exc.code in errors.MODERN_ERROR_CODES:
        return {"code": exc.code, "message": exc.message, "data": exc.data}
    if isinstance(exc, HttpStatusError):
        body = exc.jsonrpc_error()
        if body is not None and body.get("code") in errors.MODERN_ERROR_CODES:
            return body
    return None


def supported_versions_of(error: dict[str, Any]) -> list[str]:
    """The `supported` list of an UnsupportedProtocolVersionError (empty when absent)."""
    data = error.get("data")
    supported = data.get("supported") if isinstance(data, dict) else None
    if not isinstance(supported, list):
        return []
    return [v for v in supported if isinstance(v, str)]


def pick_modern_version(offered: Iterable[str], preferred: str | None = None) -> str | None:
    """The newest modern version both sides speak (the preferred one if it is mutual)."""
    mutual = [v for v in MODERN_VERSIONS if v in set(offered)]
    if preferred is not None and preferred in mutual:
        return preferred
    return mutual[0] if mutual else None
