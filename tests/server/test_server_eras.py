"""Era routing through `server.engine`: legacy sessions, modern `_meta`, version checks."""

from __future__ import annotations

from typing import Any

import pytest

from mcpkit.server.server import Server

pytestmark = pytest.mark.anyio


def make_server() -> Server:
    server = Server("eras", "1.2.3", instructions="be nice")

    @server.tool()
    def hello(name: str) -> str:
        """Say hello."""
        return f"hello {name}"

    return server


async def test_initialize_opens_a_legacy_session(make_rig: Any) -> None:
    rig = make_rig(make_server())
    result = await rig.initialize("2025-06-18", {"roots": {}})
    assert result["protocolVersion"] == "2025-06-18"
    assert result["serverInfo"] == {"name": "eras", "version": "1.2.3"}
    assert result["instructions"] == "be nice"
    assert "tools" in result["capabilities"] and "logging" in result["capabilities"]
    session = rig.connection.legacy
    assert session.protocol_version == "2025-06-18" and session.initialized
    assert session.client_capabilities == {"roots": {}}
    listed = await rig.call("tools/list")
    assert [t["name"] for t in listed["result"]["tools"]] == ["hello"]
    assert "resultType" not in listed["result"]  # legacy results are not decorated


async def test_initialize_with_unknown_version_offers_latest_legacy(make_rig: Any) -> None:
    rig = make_rig(make_server())
    assert (await rig.initialize("1999-01-01"))["protocolVersion"] == "2025-11-25"


async def test_initialize_bad_params(make_rig: Any) -> None:
    rig = make_rig(make_server())
    for params in (
        {},
        {"protocolVersion": 5},
        {"protocolVersion": "2025-11-25", "capabilities": [], "clientInfo": {}},
    ):
        response = await rig.call("initialize", params)
        assert response["error"]["code"] == -32602
    assert rig.connection.legacy is None


async def test_ping_before_initialize(make_rig: Any) -> None:
    rig = make_rig(make_server())
    assert await rig.call("ping", id="p") == {"jsonrpc": "2.0", "id": "p", "result": {}}


async def test_no_session_and_no_meta_is_invalid_params(make_rig: Any) -> None:
    rig = make_rig(make_server())
    response = await rig.call("tools/list", id=9)
    assert response["id"] == 9 and response["error"]["code"] == -32602


async def test_modern_request_needs_no_session(make_rig: Any) -> None:
    rig = make_rig(make_server())
    response = await rig.modern("tools/call", {"name": "hello", "arguments": {"name": "x"}})
    result = response["result"]
    assert result["content"] == [{"type": "text", "text": "hello x"}]
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "eras"
    assert rig.connection.legacy is None


async def test_modern_cacheable_results_carry_hints(make_rig: Any) -> None:
    server = make_server()
    server.cache_ttl_ms = 5000
    rig = make_rig(server)
    result = (await rig.modern("tools/list"))["result"]
    assert result["ttlMs"] == 5000 and result["cacheScope"] == "public"
    called = await rig.modern("tools/call", {"name": "hello", "arguments": {"name": "a"}})
    assert "ttlMs" not in called["result"]


async def test_discover(make_rig: Any) -> None:
    rig = make_rig(make_server())
    result = (await rig.modern("server/discover"))["result"]
    assert result["supportedVersions"] == ["2026-07-28"]
    assert "tools" in result["capabilities"]
    assert result["instructions"] == "be nice"


async def test_discover_is_modern_only(make_rig: Any) -> None:
    rig = make_rig(make_server())
    await rig.initialize()
    assert (await rig.call("server/discover"))["error"]["code"] == -32601


async def test_unsupported_modern_version(make_rig: Any, meta_for: Any) -> None:
    rig = make_rig(make_server())
    response = await rig.call("tools/list", {"_meta": meta_for(version="2099-01-01")}, id=3)
    assert response["id"] == 3
    error = response["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": ["2026-07-28"], "requested": "2099-01-01"}
    # a legacy version in modern `_meta` is not a modern version either
    legacy = await rig.call("tools/list", {"_meta": meta_for(version="2025-11-25")})
    assert legacy["error"]["code"] == -32022


@pytest.mark.parametrize(
    "method",
    ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"],
)
async def test_legacy_only_methods_are_not_found_in_modern_era(make_rig: Any, method: str) -> None:
    rig = make_rig(make_server())
    response = await rig.modern(method, {"level": "info", "uri": "x://y"})
    assert response["error"]["code"] == -32601
    assert response["error"]["data"] == {"method": method}


async def test_modern_only_methods_not_found_in_legacy(make_rig: Any) -> None:
    rig = make_rig(make_server())
    await rig.initialize()
    assert (await rig.call("subscriptions/listen", {}))["error"]["code"] == -32601


async def test_unknown_method_both_eras(make_rig: Any) -> None:
    rig = make_rig(make_server())
    assert (await rig.modern("nope/nothing"))["error"]["code"] == -32601
    await rig.initialize()
    assert (await rig.call("nope/nothing"))["error"]["code"] == -32601


async def test_method_of_an_absent_capability_is_not_found(make_rig: Any) -> None:
    rig = make_rig(make_server())  # no prompts, no resources
    assert (await rig.modern("prompts/list"))["error"]["code"] == -32601
    assert (await rig.modern("resources/read", {"uri": "x://y"}))["error"]["code"] == -32601


@pytest.mark.parametrize(
    "bad_meta",
    [
        {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
        {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": "all",
        },
        {
            "io.modelcontextprotocol/protocolVersion": "",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
        {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/logLevel": "loud",
        },
    ],
)
async def test_incomplete_modern_meta_is_invalid_params(make_rig: Any, bad_meta: dict) -> None:
    rig = make_rig(make_server())
    response = await rig.call("tools/list", {"_meta": bad_meta}, id="m")
    assert response["id"] == "m" and response["error"]["code"] == -32602


async def test_modern_request_inside_a_legacy_session_is_modern(make_rig: Any) -> None:
    rig = make_rig(make_server())
    await rig.initialize()
    result = (await rig.modern("tools/list"))["result"]
    assert result["resultType"] == "complete"


async def test_set_level(make_rig: Any) -> None:
    rig = make_rig(make_server())
    await rig.initialize()
    assert (await rig.call("logging/setLevel", {"level": "error"}))["result"] == {}
    assert rig.connection.legacy.log_level == "error"
    assert (await rig.call("logging/setLevel", {"level": "loud"}))["error"]["code"] == -32602
    assert (await rig.call("logging/setLevel", {}))["error"]["code"] == -32602


async def test_handler_crash_is_internal_error_without_details(make_rig: Any) -> None:
    server = make_server()

    def boom(argument: str, value: str, context: dict) -> list[str]:
        raise RuntimeError("secret detail")

    server.add_prompt(lambda: "p", name="p")
    server.add_completion(boom, prompt="p")
    rig = make_rig(server)
    response = await rig.modern(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": ""}},
    )
    assert response["error"]["code"] == -32603
    assert "secret" not in response["error"]["message"]
