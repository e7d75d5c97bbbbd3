"""`RequestLimits`: an ASGI middleware in front of the REST API that refuses, before any
route reads a byte, a body over the operator's limit (413) and a body that is not JSON (415).

The declared `Content-Length` is checked up front; a chunked body is counted as it streams and
the read fails with 413 the moment it passes the limit, so no request can make the hub buffer
more than `max_body_bytes`. Only paths under `/api/` are policed: `/mcp` has rules of its own.
"""

from __future__ import annotations

from email.message import Message

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as AsgiMessage

from mcpkit.hub.api.errors import ApiError, error_response

BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def is_json(content_type: str | None) -> bool:
    if not content_type:
        return False
    message = Message()
    message["content-type"] = content_type
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


class RequestLimits:
    def __init__(self, app: ASGIApp, max_body_bytes: int, prefix: str = "/api/") -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] != "http" or scope["method"] not in BODY_METHODS
                or not str(scope["path"]).startswith(self.prefix)):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        declared = headers.get("content-length")
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = int(declared) if declared is not None and declared.isdigit() else None
        if length is not None and length > self.max_body_bytes:
            response = error_response(
                413, f"the body is over {self.max_body_bytes} bytes", field="body")
            await response(scope, receive, send)
            return
        if ((length or chunked) and not is_json(headers.get("content-type"))):
            response = error_response(415, "the body must be application/json",
                                      field="content-type")
            await response(scope, receive, send)
            return
        await self.app(scope, self._counting(receive), send)

    def _counting(self, receive: Receive) -> Receive:
        seen = 0
        limit = self.max_body_bytes

        async def counted() -> AsgiMessage:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise ApiError(413, f"the body is over {limit} bytes", field="body")
            return message

        return counted
