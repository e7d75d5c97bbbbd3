"""One error shape for every failure of the REST API, and the handlers that produce it.

    {"error": {"code": "invalid", "message": "must match ^[a-z0-9]…", "field": "name"}}

| status | code                    | when                                                  |
|--------|-------------------------|-------------------------------------------------------|
| 400    | malformed_json          | the body is not JSON                                  |
| 401    | unauthorized            | no bearer token, or not a valid one                   |
| 403    | forbidden               | an admin route, called by a non-admin                 |
| 404    | not_found               | no such resource *for this caller* (another user's    |
|        |                         | upstream is answered exactly like a missing one)      |
| 405    | method_not_allowed      |                                                       |
| 409    | conflict                | a name is taken, or `version` is stale (`field` says) |
| 413    | payload_too_large       | the body is over the operator's limit                 |
| 415    | unsupported_media_type  | a body that is not application/json                   |
| 422    | invalid                 | a field is wrong: `field` names it, `message` says why|
| 502    | upstream_unavailable    | a refresh could not reach or list the upstream        |
| 502    | upstream_needs_auth     | a refresh found the upstream asking for authorization |
|        |                         | (its login or credentials): `message` says how        |
| 503    | unavailable             | the database cannot be reached                        |
| 500    | internal                | a bug: logged with its traceback, never its details   |

Validation errors of FastAPI/pydantic are rewritten into this shape (the first problem; its
location becomes `field`: `headers.X-Api-Key`, `enabled_tools[3]`, `limit`), and so are the
store's `Invalid`/`NotFound`/`Conflict`/`StoreUnavailable`. Messages never carry the input
value, so a secret sent in a wrong place is not echoed back.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from mcpkit.errors import PeerError
from mcpkit.hub.api.schemas import ErrorOut
from mcpkit.hub.crypto import KEY_FILE_NAME, SECRET_KEY_ENV, CredentialError
from mcpkit.hub.store import Conflict, Invalid, NotFound, StoreError, StoreUnavailable

log = logging.getLogger(__name__)

STATUS_CODES = {
    400: "malformed_json",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid",
    500: "internal",
    502: "upstream_unavailable",
    503: "unavailable",
}
BEARER_CHALLENGE = 'Bearer realm="mcpkit-hub"'


class ApiError(StarletteHTTPException, PeerError):
    """An error response in the API's shape. A Starlette `HTTPException`, so FastAPI lets it
    through wherever it is raised (a dependency, the body reader, a route)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        field: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(status, message, dict(headers) if headers else None)
        self.code = code or STATUS_CODES.get(status, "error")
        self.message = message
        self.field = field


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    detail: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        detail["field"] = field
    return {"error": detail}


def error_response(
    status: int,
    message: str,
    *,
    field: str | None = None,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(
        error_body(code or STATUS_CODES.get(status, "error"), message, field),
        status_code=status,
        headers=dict(headers) if headers else None,
    )


def field_path(location: Sequence[Any]) -> str | None:
    """pydantic's error location as a field name: ("body", "headers", "X-A") → "headers.X-A",
    ("body", "enabled_tools", 3) → "enabled_tools[3]", ("query", "limit") → "limit"."""
    parts = list(location)
    if parts and parts[0] in ("body", "query", "path", "header", "cookie"):
        source, parts = parts[0], parts[1:]
        if not parts:
            return str(source)
    text = ""
    for part in parts:
        if part == "[key]":  # a mapping's key was wrong: the entry names it already
            continue
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + str(part)
    return text or None


# --- handlers -------------------------------------------------------------------------------


async def _api_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, StarletteHTTPException)
    if isinstance(error, ApiError):
        return error_response(error.status_code, error.message, field=error.field,
                              code=error.code, headers=error.headers)
    # Starlette's own: unknown route (404), wrong method (405, with Allow), …
    message = error.detail if isinstance(error.detail, str) else "request refused"
    return error_response(error.status_code, message, headers=error.headers)


async def _validation_error(_request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    problems = list(error.errors())
    if not problems:
        return error_response(422, "the request is not valid")
    first = problems[0]
    kind = str(first.get("type", ""))
    location = first.get("loc", ())
    if kind == "json_invalid":
        return error_response(400, "the body is not valid JSON", field="body")
    field = field_path(location)
    message = str(first.get("msg", "invalid"))
    if kind == "missing":
        message = "is required"
    elif kind == "extra_forbidden":
        message = "is not a known field"
    if len(problems) > 1:
        message += f" (and {len(problems) - 1} more problem{'s' if len(problems) > 2 else ''})"
    return error_response(422, message, field=field)


async def _store_error(_request: Request, error: Exception) -> JSONResponse:
    if isinstance(error, Invalid):
        return error_response(422, error.reason, field=error.field)
    if isinstance(error, NotFound):
        return error_response(404, f"no {error.kind} with this id")
    if isinstance(error, Conflict):
        return error_response(409, error.reason, field=error.field)
    if isinstance(error, StoreUnavailable):
        log.warning("database unavailable: %s", error)
        return error_response(503, "the hub's database is unavailable; try again shortly")
    log.error("store error: %s", error, exc_info=error)
    return error_response(500, "internal error")


async def _credential_error(_request: Request, error: Exception) -> JSONResponse:
    # the operator's key does not open the stored credentials: theirs to fix, not the caller's
    log.error("upstream credentials: %s", error)
    return error_response(500, "the hub cannot open stored credentials (operator: "
                               f"{SECRET_KEY_ENV} or the data directory's {KEY_FILE_NAME} is "
                               "not the key they were stored with)")


async def _unexpected(request: Request, error: Exception) -> JSONResponse:
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=error)
    return error_response(500, "internal error")


def install_handlers(app: FastAPI) -> None:
    app.add_exception_handler(StarletteHTTPException, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StoreError, _store_error)
    app.add_exception_handler(CredentialError, _credential_error)
    app.add_exception_handler(Exception, _unexpected)


# --- OpenAPI --------------------------------------------------------------------------------

_DESCRIPTIONS = {
    400: "The body is not valid JSON",
    401: "Missing or invalid bearer token",
    403: "Not an admin",
    404: "Not found (for this caller)",
    409: "Conflict: a name is taken or the version is stale",
    413: "The body is too large",
    415: "The body is not application/json",
    422: "A field is invalid",
    502: "The upstream could not be reached or listed",
    503: "The database is unavailable",
}


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for these error statuses, all with `ErrorOut`."""
    return {status: {"model": ErrorOut, "description": _DESCRIPTIONS[status]}
            for status in statuses}


AUTHED = (401, 503)
WITH_BODY = (400, 413, 415, 422)
