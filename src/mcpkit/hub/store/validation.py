"""Checks of what callers hand the store; each failure is `Invalid(field, reason)`.

These are shape checks only. Whether an upstream URL may be reached (SSRF rules, DNS) is the
router's business at connect time.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast
from urllib.parse import urlsplit

from mcpkit.hub.db.models import AUTH_MODES, HEALTH_STATUSES, TRANSPORTS
from mcpkit.hub.store.errors import Invalid
from mcpkit.hub.store.records import AuthMode, HealthStatus, Outcome, Transport

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
# headers the hub's client sets itself (framing, routing, the MCP session)
RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "connection",
        "upgrade",
        "te",
        "trailer",
        "keep-alive",
        "proxy-connection",
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
    }
)
URL_SCHEMES: dict[str, tuple[str, ...]] = {
    "http": ("http", "https"),
    "sse": ("http", "https"),
    "ws": ("ws", "wss"),
}
MAX_URL = 2048
MAX_HEADERS = 50
MAX_HEADER_VALUE = 8192
MAX_BEARER = 8192
MAX_TOOL_NAMES = 1000
MAX_TOOL_NAME = 256
MAX_COMMAND_ARGS = 256
MAX_COMMAND_ARG = 4096
MAX_TIMEOUT_S = 3600.0
MAX_TOKEN_NAME = 100
MAX_ERROR_TEXT = 2000
OUTCOMES = ("ok", "tool_error", "error", "denied", "timeout")


def name(value: object, field: str = "name") -> str:
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        raise Invalid(field, "must match ^[a-z0-9][a-z0-9_-]{0,62}$ (lowercase letters, digits,"
                      " '_' and '-', starting with a letter or digit, at most 63 characters)")
    return value


STDIO_HINT = "`mcpkit hub serve --allow-stdio` or MCPKIT_HUB_ALLOW_STDIO=1 allows them"
"""What the operator changes to allow stdio upstreams, by option and variable."""


def transport(value: object, *, allow_stdio: bool) -> Transport:
    if value not in TRANSPORTS:
        raise Invalid("transport", f"must be one of {', '.join(TRANSPORTS)}")
    if value == "stdio" and not allow_stdio:
        raise Invalid("transport", f"stdio upstreams are disabled by the operator ({STDIO_HINT})")
    return cast(Transport, value)


def endpoint(
    kind: Transport, url: object, command: object
) -> tuple[str | None, list[str] | None]:
    """The (url, command) pair for a transport: a URL for http/sse/ws, an argv for stdio."""
    if kind == "stdio":
        if url is not None:
            raise Invalid("url", "a stdio upstream has a command, not a URL")
        return None, _command(command)
    if command is not None:
        raise Invalid("command", f"only stdio upstreams have a command, not {kind}")
    return _url(kind, url), None


def _url(kind: Transport, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise Invalid("url", f"a {kind} upstream needs a URL")
    if len(value) > MAX_URL:
        raise Invalid("url", f"longer than {MAX_URL} characters")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in value):
        raise Invalid("url", "contains whitespace or control characters")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as error:
        raise Invalid("url", f"not a valid URL ({error})") from None
    schemes = URL_SCHEMES[kind]
    if parts.scheme.lower() not in schemes:
        raise Invalid("url", f"a {kind} upstream's URL must start with {' or '.join(schemes)}://")
    if not parts.hostname:
        raise Invalid("url", "has no host")
    if parts.username is not None or parts.password is not None:
        raise Invalid("url", "must not hold credentials: use headers or bearer (stored encrypted)")
    return value


def _command(value: object) -> list[str]:
    if not isinstance(value, Sequence) or isinstance(value, str | bytes) or not value:
        raise Invalid("command", "a stdio upstream needs a command: a non-empty list of strings")
    if len(value) > MAX_COMMAND_ARGS:
        raise Invalid("command", f"more than {MAX_COMMAND_ARGS} arguments")
    for index, arg in enumerate(value):
        if not isinstance(arg, str) or "\0" in arg or len(arg) > MAX_COMMAND_ARG:
            raise Invalid(f"command[{index}]", "must be a string without NUL, at most 4096 chars")
    if not value[0]:
        raise Invalid("command[0]", "the program must not be empty")
    return list(value)


def headers(value: object, field: str = "headers") -> dict[str, str] | None:
    """Header names to values (`field` names the input in errors: `catalog_headers` too)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise Invalid(field, "must be an object of header names to string values")
    if len(value) > MAX_HEADERS:
        raise Invalid(field, f"more than {MAX_HEADERS} headers")
    seen: set[str] = set()
    result: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not HEADER_NAME_RE.fullmatch(key):
            raise Invalid(field, f"{str(key)[:64]!r} is not a valid header name")
        lower = key.lower()
        if lower in RESERVED_HEADERS:
            raise Invalid(f"{field}.{key}", "is set by the hub itself")
        if lower in seen:
            raise Invalid(f"{field}.{key}", "given twice (header names ignore case)")
        seen.add(lower)
        if not isinstance(item, str) or len(item) > MAX_HEADER_VALUE:
            raise Invalid(f"{field}.{key}", f"must be a string of at most {MAX_HEADER_VALUE} chars")
        if any(c in item for c in "\r\n\0"):
            raise Invalid(f"{field}.{key}", "must not contain CR, LF or NUL")
        result[key] = item
    return result or None


def bearer(value: object, field: str = "bearer") -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_BEARER:
        raise Invalid(field, f"must be a non-empty string of at most {MAX_BEARER} chars")
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise Invalid(field, "must not contain whitespace or control characters")
    return value


def tool_names(value: object, field: str, *, nullable: bool) -> list[str] | None:
    if value is None:
        if nullable:
            return None
        raise Invalid(field, "must be a list of tool names")
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        raise Invalid(field, "must be a list of tool names")
    if len(value) > MAX_TOOL_NAMES:
        raise Invalid(field, f"more than {MAX_TOOL_NAMES} names")
    result: list[str] = []
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item or len(item) > MAX_TOOL_NAME:
            raise Invalid(f"{field}[{index}]", f"must be a tool name of 1 to {MAX_TOOL_NAME} chars")
        if item not in result:
            result.append(item)
    return result


def timeout(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Invalid(field, "must be a number of seconds")
    number = float(value)
    if not math.isfinite(number) or not 0 < number <= MAX_TIMEOUT_S:
        raise Invalid(field, f"must be more than 0 and at most {MAX_TIMEOUT_S:g} seconds")
    return number


def flag(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise Invalid(field, "must be true or false")
    return value


def auth_mode(value: object) -> AuthMode:
    if value not in AUTH_MODES:
        raise Invalid("auth_mode", f"must be one of {', '.join(AUTH_MODES)}")
    return cast(AuthMode, value)


def health_status(value: object) -> HealthStatus:
    if value not in HEALTH_STATUSES:
        raise Invalid("health_status", f"must be one of {', '.join(HEALTH_STATUSES)}")
    return cast(HealthStatus, value)


def outcome(value: object) -> Outcome:
    if value not in OUTCOMES:
        raise Invalid("outcome", f"must be one of {', '.join(OUTCOMES)}")
    return cast(Outcome, value)


def token_name(value: object) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_TOKEN_NAME:
        raise Invalid("name", f"a token name is 1 to {MAX_TOKEN_NAME} characters")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise Invalid("name", "must not contain control characters")
    return value


def aware(value: object, field: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise Invalid(field, "must be a timezone-aware time")
    return value


def limit(value: object, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise Invalid("limit", f"must be a whole number from 1 to {maximum}")
    return value


def error_text(value: str | None) -> str | None:
    """An error message cut to a bounded length (what goes into last_error / audit)."""
    if value is None:
        return None
    return value if len(value) <= MAX_ERROR_TEXT else value[: MAX_ERROR_TEXT - 1] + "…"


def catalog_entries(
    value: object, field: str, key: str
) -> list[tuple[str, dict[str, Any]]]:
    """(key value, definition) of each wire object; a repeated key keeps its first object."""
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        raise Invalid(field, "must be a list of objects")
    entries: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for index, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise Invalid(f"{field}[{index}]", "must be an object")
        identity = item.get(key)
        if not isinstance(identity, str) or not identity:
            raise Invalid(f"{field}[{index}].{key}", "must be a non-empty string")
        if identity in seen:
            continue
        seen.add(identity)
        try:
            definition = json.loads(json.dumps(item, allow_nan=False))
        except (TypeError, ValueError) as error:
            raise Invalid(f"{field}[{index}]", f"is not plain JSON ({error})") from None
        entries.append((identity, definition))
    return entries
