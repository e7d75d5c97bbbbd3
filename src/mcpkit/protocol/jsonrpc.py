"""The JSON-RPC 2.0 envelope and codec.

Decoding is two-step (a JSON-RPC message is not one tagged union: responses have no
`method`): the envelope is decoded first with `params`/`result` kept as `msgspec.Raw`, so
that a failure inside them still knows the message's id and kind; then a request's or
notification's params are decoded here, at once, into plain Python values. A response's
`result` stays raw until the request it answers decodes it.

`decode_message` is the one guard every transport's input passes (stdio lines, WebSocket
frames, HTTP bodies, batch members): it never raises anything but `DecodeFailure`, which
carries the JSON-RPC error to answer with and, when it could be read, the offending
message's id. Anything it returns has a well-formed envelope and, for requests and
notifications, params that are a decoded JSON object (no number out of range, no invalid
UTF-8, no lone surrogate, no nesting deeper than msgspec follows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias, TypeGuard

import msgspec

from mcpkit.errors import PeerError
from mcpkit.protocol import errors

RequestId: TypeAlias = str | int
Params: TypeAlias = dict[str, Any]
"""A request's or notification's params, decoded (MCP params are always a JSON object)."""


@dataclass(slots=True, frozen=True)
class Request:
    id: RequestId
    method: str
    params: Params | None = None
    footprint: int = 0
    """Bytes its params are estimated to hold once decoded (`params_footprint`): what a
    running request is charged against the server's byte budgets (server/admission.py)."""


@dataclass(slots=True, frozen=True)
class Notification:
    method: str
    params: Params | None = None


@dataclass(slots=True, frozen=True)
class Response:
    id: RequestId
    result: msgspec.Raw


@dataclass(slots=True, frozen=True)
class ErrorResponse:
    id: RequestId | None
    code: int
    message: str
    data: Any = None


Message: TypeAlias = Request | Notification | Response | ErrorResponse


class DecodeFailure(PeerError):
    """A message could not be decoded; `error` is what to answer, `id` the request's id.

    `notification` is set when the envelope was a well-formed notification (a method, no
    id) whose params could not be decoded: JSON-RPC answers no notification, so a
    transport that streams messages drops it (HTTP refuses the POST with its status).
    `response` is set when it was a response (a result or an error, no method): it is
    answered like any malformed message, and the request it answers (`id`) can be failed
    with `error` at once instead of waiting for its timeout.
    """

    def __init__(
        self, error: errors.ProtocolError, id: RequestId | None = None, *,
        notification: bool = False, response: bool = False,
    ) -> None:
        super().__init__(error.message)
        self.error = error
        self.id = id
        self.notification = notification
        self.response = response

    @property
    def answerable(self) -> bool:
        """Whether a JSON-RPC error message may be sent for it (not for a notification)."""
        return not self.notification

    def as_error_response(self) -> ErrorResponse | None:
        """For a response that did not decode: an error response settling the request it
        answers (None when its id could not be read)."""
        if not self.response or self.id is None:
            return None
        return ErrorResponse(self.id, self.error.code, self.error.message)


class _Envelope(msgspec.Struct):
    # Every member is loosely typed so that decoding never fails on shape; the shape is
    # checked by hand below, which lets us answer with the precise error and the id.
    jsonrpc: Any = msgspec.UNSET
    id: Any = msgspec.UNSET
    method: Any = msgspec.UNSET
    params: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_envelope_decoder = msgspec.json.Decoder(_Envelope)
_batch_decoder = msgspec.json.Decoder(list[msgspec.Raw])
_any_decoder = msgspec.json.Decoder()


def is_request_id(value: Any) -> TypeGuard[RequestId]:
    """Whether `value` can be a request id: a string or an integer (not a bool)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _from_envelope(env: _Envelope) -> Message:
    raw_id = env.id
    readable_id: RequestId | None = raw_id if is_request_id(raw_id) else None
    if env.jsonrpc != "2.0":
        raise DecodeFailure(errors.invalid_request('"jsonrpc" must be "2.0"'), readable_id)
    if env.method is not msgspec.UNSET:
        return _request_or_notification(env, readable_id)
    if env.result is not msgspec.UNSET or env.error is not msgspec.UNSET:
        return _response(env, readable_id)
    raise DecodeFailure(
        errors.invalid_request("not a request, notification or response"), readable_id
    )


MAX_PARAMS_FOOTPRINT = 128 * 1024 * 1024
"""The most memory one message's params may take once decoded (estimated before decoding,
`params_footprint`): decoding multiplies small JSON values - 4 MiB of `[{},{},…]` become
~97 MiB of dicts (estimated ~270) - so a message's byte limit does not bound its cost."""

_SMALL_PARAMS = 4096
_OBJECT_COST = 200
"""A decoded dict or list (CPython 3.11: a dict of one to five entries is 184 bytes, an empty
list 56 plus 8 a slot, each plus its own slot in its parent)."""
_STRING_COST = 32
"""Half a decoded str per quote character (a str is at least ~50 bytes, plus its slot)."""
_ELEMENT_COST = 40
"""Per comma: the next element's slot in its list or dict, and the number it may be (a float
is 24 bytes; `1.5,` is 4 bytes of JSON)."""
_SMALL_FACTOR = 80
"""The worst case of the above per byte of JSON (`{"":0},` is 7 bytes for ~220 decoded,
`{},` 3 bytes for ~72)."""


def params_footprint(raw: bytes | msgspec.Raw) -> int:
    """An upper estimate of the bytes `raw` (JSON params) takes once decoded to Python.

    Containers, strings and elements cost far more decoded than their JSON text, so they
    are counted (four `bytes.count` scans, C speed; a quote or comma inside a string is
    over-counted, never under-counted). Small params are charged their worst case without
    scanning."""
    size = len(raw)
    if size <= _SMALL_PARAMS:
        return size * _SMALL_FACTOR
    text = bytes(raw)
    containers = text.count(b"{") + text.count(b"[")
    return (size + _OBJECT_COST * containers + _STRING_COST * text.count(b'"')
            + _ELEMENT_COST * text.count(b","))


def _request_or_notification(env: _Envelope, readable_id: RequestId | None) -> Message:
    if not isinstance(env.method, str) or not env.method:
        raise DecodeFailure(errors.invalid_request('"method" must be a string'), readable_id)
    is_notification = env.id is msgspec.UNSET
    if not is_notification and readable_id is None:
        raise DecodeFailure(errors.invalid_request('"id" must be a string or an integer'))
    params = None
    footprint = 0
    if env.params is not msgspec.UNSET:
        footprint = params_footprint(env.params)
        if footprint > MAX_PARAMS_FOOTPRINT:
            failure = errors.invalid_params(
                f"params too large once decoded: about {footprint} bytes, over the limit of "
                f"{MAX_PARAMS_FOOTPRINT} (too many JSON objects, arrays or strings)")
            raise DecodeFailure(failure, readable_id, notification=is_notification)
        params = _decode_params(env.params, readable_id, is_notification)
    if is_notification:
        return Notification(env.method, params)
    assert readable_id is not None
    return Request(readable_id, env.method, params, footprint)


def _decode_params(raw: msgspec.Raw, id: RequestId | None, notification: bool) -> Params:
    """A request's or notification's params as Python values, or the `DecodeFailure` to
    answer: the envelope decoder only skipped over them, checking their JSON syntax but not
    what the values decode to."""
    try:
        value = _any_decoder.decode(raw)
    except msgspec.ValidationError as exc:
        # Well-formed JSON whose value cannot be represented: a number beyond a float's
        # range (1e400) or an integer of thousands of digits.
        failure = errors.invalid_params(f"undecodable params: {exc}")
        raise DecodeFailure(failure, id, notification=notification) from None
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
        # Invalid UTF-8 or a lone surrogate escape inside a string, or nesting too deep.
        failure = errors.parse_error(f"undecodable params: {exc}")
        raise DecodeFailure(failure, id, notification=notification) from None
    if not isinstance(value, dict):
        # MCP params are always objects; JSON-RPC's positional arrays are not used.
        raise DecodeFailure(errors.invalid_request('"params" must be an object'), id)
    return value


def _response(env: _Envelope, readable_id: RequestId | None) -> Message:
    if env.result is not msgspec.UNSET:
        if readable_id is None or env.error is not msgspec.UNSET:
            raise DecodeFailure(
                errors.invalid_request("malformed response"), readable_id, response=True)
        return Response(readable_id, env.result)
    assert not isinstance(env.error, msgspec.UnsetType)
    try:
        # `error` was only skipped over, like `params`: its `data` may hold anything.
        err = _any_decoder.decode(env.error)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
        failure = errors.parse_error(f"undecodable error response: {exc}")
        raise DecodeFailure(failure, readable_id, response=True) from None
    if not isinstance(err, dict) or not isinstance(err.get("code"), int):
        raise DecodeFailure(
            errors.invalid_request("malformed error response"), readable_id, response=True)
    message = err.get("message")
    return ErrorResponse(
        readable_id, err["code"], message if isinstance(message, str) else "", err.get("data")
    )


def decode_message(data: bytes | str) -> Message:
    """Decode one JSON-RPC message (not a batch)."""
    try:
        env = _envelope_decoder.decode(data)
    except msgspec.ValidationError as exc:
        # Valid JSON, but not an object (an array, a number…), or an envelope member whose
        # value cannot be represented (an `id` of 1e400).
        raise DecodeFailure(errors.invalid_request(_not_a_message(data, exc))) from None
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
        # msgspec raises UnicodeDecodeError for invalid UTF-8 inside a JSON string, and
        # RecursionError for nesting deeper than it can follow.
        raise DecodeFailure(errors.parse_error(str(exc))) from None
    return _from_envelope(env)


def _not_a_message(data: bytes | str, exc: msgspec.ValidationError) -> str:
    head = data.lstrip()[:1]
    if head in (b"{", "{"):
        return f"undecodable message: {exc}"
    return "a message must be a JSON object"


def is_batch(data: bytes | str) -> bool:
    """Whether the payload is a JSON array (a JSON-RPC batch)."""
    head = data.lstrip()[:1]
    return head in (b"[", "[")


def decode_batch(data: bytes | str) -> list[Message | DecodeFailure]:
    """Decode a JSON-RPC batch; each element decodes (or fails) on its own.

    An empty batch is itself an invalid request.
    """
    try:
        items = _batch_decoder.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise DecodeFailure(errors.parse_error(str(exc))) from None
    if not items:
        raise DecodeFailure(errors.invalid_request("empty batch"))
    out: list[Message | DecodeFailure] = []
    for item in items:
        try:
            out.append(decode_message(bytes(item)))
        except DecodeFailure as failure:
            out.append(failure)
    return out


# --- encoding -------------------------------------------------------------------------------


# `jsonrpc` is a required field (never a default): omit_defaults would drop it.
class _RequestOut(msgspec.Struct, omit_defaults=True):
    jsonrpc: str
    id: RequestId
    method: str
    params: Any = msgspec.UNSET


class _NotificationOut(msgspec.Struct, omit_defaults=True):
    jsonrpc: str
    method: str
    params: Any = msgspec.UNSET


class _ResultOut(msgspec.Struct):
    jsonrpc: str
    id: RequestId
    result: Any


class _ErrorOut(msgspec.Struct):
    jsonrpc: str
    id: RequestId | None
    error: Any


_encoder = msgspec.json.Encoder()
encode = _encoder.encode
"""Encode any value (structs, dicts, Raw…) as compact JSON bytes."""


def encode_request(id: RequestId, method: str, params: Any = msgspec.UNSET) -> bytes:
    return _encoder.encode(_RequestOut("2.0", id, method, params))


def encode_notification(method: str, params: Any = msgspec.UNSET) -> bytes:
    return _encoder.encode(_NotificationOut("2.0", method, params))


def encode_result(id: RequestId, result: Any) -> bytes:
    return _encoder.encode(_ResultOut("2.0", id, result))


def encode_error(id: RequestId | None, error: errors.McpError) -> bytes:
    return _encoder.encode(_ErrorOut("2.0", id, error.to_error()))


def decode_value(raw: msgspec.Raw | bytes | None) -> Any:
    """Decode raw JSON into plain Python values (None stays None)."""
    if raw is None:
        return None
    return _any_decoder.decode(raw)
