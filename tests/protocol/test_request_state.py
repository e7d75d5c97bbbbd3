from __future__ import annotations

import base64
import json

import pytest

from mcpkit.protocol import errors
from mcpkit.protocol.request_state import MAX_STATE_BYTES, RequestStateCodec, params_digest

PARAMS = {"name": "tool", "arguments": {"a": 1}}


def refused(codec: RequestStateCodec, token: object, **kw: object) -> errors.McpError:
    method = kw.pop("method", "tools/call")
    params = kw.pop("params", PARAMS)
    with pytest.raises(errors.ProtocolError) as info:
        codec.open(token, method, params, **kw)  # type: ignore[arg-type]
    assert info.value.code == errors.INVALID_PARAMS
    return info.value


def test_round_trip_with_state_and_answers() -> None:
    codec = RequestStateCodec(b"k" * 32)
    token = codec.seal(
        "tools/call", PARAMS, state={"n": 2}, answers={"q": {"action": "accept"}}, principal="alice"
    )
    assert isinstance(token, str) and token.count(".") == 1 and "=" not in token
    opened = codec.open(token, "tools/call", PARAMS, principal="alice")
    assert opened.state == {"n": 2}
    assert opened.answers == {"q": {"action": "accept"}}


def test_mrtr_fields_and_meta_do_not_change_the_digest() -> None:
    codec = RequestStateCodec()
    token = codec.seal("tools/call", PARAMS)
    retry = {**PARAMS, "_meta": {"x": 1}, "inputResponses": {"q": {}}, "requestState": token}
    assert codec.open(token, "tools/call", retry).state is None
    assert params_digest(retry) == params_digest(PARAMS)
    # key order does not matter
    assert params_digest({"b": 1, "a": 2}) == params_digest({"a": 2, "b": 1})


def test_tampered_tag_and_payload() -> None:
    codec = RequestStateCodec(b"k" * 32)
    token = codec.seal("tools/call", PARAMS, state="s")
    body, tag = token.split(".")
    flipped = tag[:-2] + ("A" if tag[-2] != "A" else "B") + tag[-1]
    assert "integrity" in refused(codec, f"{body}.{flipped}").message
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    payload["s"] = "evil"
    forged = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")
    assert "integrity" in refused(codec, f"{forged}.{tag}").message
    # another key does not verify it
    refused(RequestStateCodec(b"x" * 32), token)


@pytest.mark.parametrize(
    "token", [None, 5, "", "no-dot", "a.b.c!", "!!!.???", "x" * (MAX_STATE_BYTES + 1)]
)
def test_malformed_tokens(token: object) -> None:
    refused(RequestStateCodec(), token)


def test_wrong_method_or_params() -> None:
    codec = RequestStateCodec()
    token = codec.seal("tools/call", PARAMS)
    assert "different request" in refused(codec, token, method="prompts/get").message
    other = {"name": "tool", "arguments": {"a": 2}}
    assert "different request" in refused(codec, token, params=other).message


def test_other_principal() -> None:
    codec = RequestStateCodec()
    token = codec.seal("tools/call", PARAMS, principal="alice")
    assert "principal" in refused(codec, token, principal="mallory").message
    assert "principal" in refused(codec, token).message


def test_expiry() -> None:
    codec = RequestStateCodec(ttl_s=10)
    token = codec.seal("tools/call", PARAMS, now=1000.0)
    assert codec.open(token, "tools/call", PARAMS, now=1009.0).state is None
    assert "expired" in refused(codec, token, now=1011.0).message


def test_valid_tag_over_garbage_payload_is_refused() -> None:
    import hashlib
    import hmac

    key = b"k" * 32
    body = b'{"not":"a payload"}'
    tag = hmac.new(key, body, hashlib.sha256).digest()
    enc = base64.urlsafe_b64encode
    token = f"{enc(body).decode().rstrip('=')}.{enc(tag).decode().rstrip('=')}"
    assert "malformed" in refused(RequestStateCodec(key), token).message
