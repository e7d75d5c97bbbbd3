"""Per-request `_meta` rules of the modern era (2026-07-28).

Every modern request carries its protocol version and client capabilities (required) and
may carry client identity and a log level. A request missing a required field is malformed:
-32602 (HTTP 400).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mcpkit.protocol import errors

PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
LOG_LEVEL = "io.modelcontextprotocol/logLevel"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
PROGRESS_TOKEN = "progressToken"
RELATED_TASK = "io.modelcontextprotocol/related-task"

LOG_LEVELS: tuple[str, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_LOG_RANK = {name: rank for rank, name in enumerate(LOG_LEVELS)}

_LABEL = r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_META_KEY = re.compile(
    rf"^(?:{_LABEL}(?:\.{_LABEL})*/)?(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?$"
)


@dataclass(slots=True, frozen=True)
class RequestMeta:
    """What a modern request's `_meta` says about the request."""

    protocol_version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    log_level: str | None
    progress_token: str | int | None


def has_modern_meta(meta: Any) -> bool:
    """Whether a `_meta` value marks its request as modern (it names a protocol version)."""
    return isinstance(meta, dict) and PROTOCOL_VERSION in meta


def parse_request_meta(meta: Any) -> RequestMeta:
    """Validate a modern request's `_meta`; raise -32602 naming what is missing or wrong."""
    if not isinstance(meta, dict):
        raise errors.invalid_params("missing _meta (protocolVersion and clientCapabilities)")
    version = meta.get(PROTOCOL_VERSION)
    if not isinstance(version, str) or not version:
        raise errors.invalid_params(f"_meta is missing {PROTOCOL_VERSION}")
    caps = meta.get(CLIENT_CAPABILITIES)
    if not isinstance(caps, dict):
        raise errors.invalid_params(f"_meta is missing {CLIENT_CAPABILITIES} (an object)")
    info = meta.get(CLIENT_INFO)
    if info is not None and not isinstance(info, dict):
        raise errors.invalid_params(f"_meta {CLIENT_INFO} must be an object")
    level = meta.get(LOG_LEVEL)
    if level is not None and (not isinstance(level, str) or level not in _LOG_RANK):
        raise errors.invalid_params(f"_meta {LOG_LEVEL} must be one of {', '.join(LOG_LEVELS)}")
    return RequestMeta(version, caps, info, level, progress_token_of(meta))


def progress_token_of(meta: Any) -> str | int | None:
    """The progress token a request opted into, if any (strings and integers only)."""
    if not isinstance(meta, dict):
        return None
    token = meta.get(PROGRESS_TOKEN)
    if isinstance(token, str) or (isinstance(token, int) and not isinstance(token, bool)):
        return token
    return None


def log_level_allows(threshold: str | None, level: str) -> bool:
    """Whether a message at `level` passes a minimum `threshold` (None: nothing passes)."""
    if threshold is None:
        return False
    return _LOG_RANK.get(level, 0) >= _LOG_RANK.get(threshold, 0)


def is_valid_meta_key(key: str) -> bool:
    """Whether `key` follows the `_meta` key naming rules (optional dotted prefix + name)."""
    return bool(_META_KEY.match(key))
