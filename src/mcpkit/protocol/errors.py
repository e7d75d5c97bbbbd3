"""JSON-RPC and MCP error codes, the `data` shapes the spec gives them, and the exceptions
that carry them.

Their place in mcpkit's one exception tree (drawn in `mcpkit.errors`):

    PeerError
    └── McpError              an error that has a JSON-RPC code, message and data
        └── ProtocolError     the peer sent something the protocol does not allow
    UsageError
    └── LocalError            this side was misused (bad arguments to an mcpkit API)

A handler raises `McpError` (or a subclass) to answer a request with that error. Any
other exception escaping a handler becomes -32603 without its message leaking details.
"""

from __future__ import annotations

from typing import Any

from mcpkit.errors import PeerError, UsageError

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# Implementation-defined (JSON-RPC reserves -32000..-32099 for the server): a request refused
# because its connection already has as many requests running as it may (retry later).
SERVER_BUSY = -32000
# Legacy (2025-11-25 and earlier).
RESOURCE_NOT_FOUND_LEGACY = -32002
URL_ELICITATION_REQUIRED = -32042
# 2026-07-28.
HEADER_MISMATCH = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022

MODERN_ERROR_CODES = frozenset(
    {HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION}
)


class McpError(PeerError):
    """An error with a JSON-RPC code: received, the peer's error answer; raised from a
    handler, the error this side answers its peer with (a `PeerError` either way: it is
    what one side tells the other went wrong)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        """The JSON-RPC `error` member."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code}, {self.message!r}, data={self.data!r})"


class ProtocolError(McpError):
    """The peer broke the protocol (malformed message, unknown method, bad params…)."""


class LocalError(UsageError):
    """This side misused an mcpkit API (a bad argument or setting). Not an answer to a peer;
    `code` and `data` say which JSON-RPC error it would be, for callers that report one."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code}, {self.message!r}, data={self.data!r})"


def parse_error(detail: str = "") -> ProtocolError:
    return ProtocolError(PARSE_ERROR, f"Parse error{': ' + detail if detail else ''}")


def invalid_request(detail: str = "") -> ProtocolError:
    return ProtocolError(INVALID_REQUEST, f"Invalid request{': ' + detail if detail else ''}")


def method_not_found(method: str) -> ProtocolError:
    return ProtocolError(METHOD_NOT_FOUND, f"Method not found: {method}", {"method": method})


def invalid_params(detail: str, data: Any = None) -> ProtocolError:
    return ProtocolError(INVALID_PARAMS, f"Invalid params: {detail}", data)


def internal_error(detail: str = "Internal error") -> McpError:
    return McpError(INTERNAL_ERROR, detail)


def server_busy(detail: str, limit: int) -> McpError:
    """The request was not started: a limit on concurrent work (`limit`) is reached; the
    same request may be sent again once some of the caller's work has finished."""
    return McpError(SERVER_BUSY, f"Server busy: {detail}", {"limit": limit})


def unsupported_protocol_version(requested: str, supported: tuple[str, ...]) -> ProtocolError:
    return ProtocolError(
        UNSUPPORTED_PROTOCOL_VERSION,
        f"Unsupported protocol version: {requested}",
        {"supported": list(supported), "requested": requested},
    )


def missing_client_capability(required: dict[str, Any]) -> ProtocolError:
    names = ", ".join(sorted(required))
    return ProtocolError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"Missing required client capability: {names}",
        {"requiredCapabilities": required},
    )


def header_mismatch(detail: str) -> ProtocolError:
    return ProtocolError(HEADER_MISMATCH, f"Header mismatch: {detail}")


def resource_not_found(uri: str, *, legacy_code: bool = False) -> ProtocolError:
    """Unknown resource: -32602 with `data.uri` (-32002 only for old peers that expect it)."""
    code = RESOURCE_NOT_FOUND_LEGACY if legacy_code else INVALID_PARAMS
    return ProtocolError(code, f"Resource not found: {uri}", {"uri": uri})
