"""Era detection: the rules of `mcpkit.client.era`, and the probe's outcomes as `Client`
lives them against a scripted server (spec: basic/versioning.mdx, "Backward
Compatibility"; basic/transports/stdio.mdx, "Backward Compatibility")."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from mcpkit.client import (
    Client,
    ConnectOptions,
    IncompatibleServer,
    RequestTimeout,
    ServerError,
    Timeouts,
)
from mcpkit.client import era as eras
from mcpkit.client import negotiation as client_module
from mcpkit.protocol import errors
from mcpkit.protocol.versions import Era
from mcpkit.transports.client.base import HttpStatusError

from .support import (
    LEGACY,
    MODERN,
    ScriptedTransport,
    discover_result,
    error,
    initialize_result,
    legacy_server,
    result,
)

pytestmark = pytest.mark.anyio

FUTURE = "2027-01-01"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"


def modern_server(message: dict[str, Any]) -> Any:
    if "id" not in message:
        return None
    if message["method"] == "server/discover":
        return result(message, discover_result(tools={}))
    if message["method"] == "tools/list":
        return result(message, {"tools": []})
    return error(message, -32601, "Method not found")


# --- the rules -----------------------------------------------------------------------------


@pytest.mark.parametrize("code", sorted(errors.MODERN_ERROR_CODES))
def test_modern_error_of_recognizes_modern_codes(code: int) -> None:
    found = eras.modern_error_of(ServerError(code, "nope", {"supported": [MODERN]}))
    assert found == {"code": code, "message": "nope", "data": {"supported": [MODERN]}}


@pytest.mark.parametrize("code", [-32601, -32602, -32600, -32603, -32000, -32002, 1])
def test_modern_error_of_ignores_other_codes(code: int) -> None:
    assert eras.modern_error_of(ServerError(code, "nope")) is None


def test_modern_error_of_http_bodies() -> None:
    modern = {"jsonrpc": "2.0", "id": 1,
              "error": {"code": -32022, "message": "Unsupported", "data": {"supported": []}}}
    found = eras.modern_error_of(HttpStatusError(400, json.dumps(modern).encode()))
    assert found is not None and found["code"] == -32022
    legacy = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Bad"}}
    assert eras.modern_error_of(HttpStatusError(400, json.dumps(legacy).encode())) is None
    assert eras.modern_error_of(HttpStatusError(400, b"Bad Request")) is None
    assert eras.modern_error_of(HttpStatusError(400, b"")) is None
    assert eras.modern_error_of(HttpStatusError(400, b'{"error": {"code": "-32022"}}')) is None
    assert eras.modern_error_of(HttpStatusError(400, b'{"error": "-32022"}')) is None
    assert eras.modern_error_of(HttpStatusError(400, b"\xff\xfe")) is None


def test_modern_error_of_other_exceptions() -> None:
    assert eras.modern_error_of(RequestTimeout("server/discover", 1.0, hard=False)) is None
    assert eras.modern_error_of(ValueError("-32022")) is None
    assert eras.modern_error_of(errors.ProtocolError(-32022, "local")) is not None


def test_supported_versions_of() -> None:
    assert eras.supported_versions_of({"data": {"supported": [MODERN, LEGACY]}}) == [
        MODERN, LEGACY]
    assert eras.supported_versions_of({"data": {"supported": [MODERN, 3, None]}}) == [MODERN]
    assert eras.supported_versions_of({"data": {"supported": MODERN}}) == []
    assert eras.supported_versions_of({"data": None}) == []
    assert eras.supported_versions_of({}) == []


def test_pick_modern_version() -> None:
    assert eras.pick_modern_version([LEGACY, MODERN]) == MODERN
    assert eras.pick_modern_version([LEGACY, "2024-11-05"]) is None
    assert eras.pick_modern_version([]) is None
    assert eras.pick_modern_version([FUTURE]) is None  # unknown to this client
    assert eras.pick_modern_version([MODERN], preferred=FUTURE) == MODERN
    assert eras.pick_modern_version(iter([MODERN])) == MODERN  # any iterable


def test_pick_modern_version_prefers_newest_or_preferred(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setattr(eras, "MODERN_VERSIONS", (FUTURE, MODERN))
    assert eras.pick_modern_version([MODERN, FUTURE]) == FUTURE
    assert eras.pick_modern_version([MODERN, FUTURE], preferred=MODERN) == MODERN
    assert eras.pick_modern_version([MODERN], preferred=FUTURE) == MODERN


def test_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eras, "MAX_CACHED", 3)
    for i in range(5):
        eras.remember_era(f"k{i}", Era.LEGACY)
    assert eras.cached_era("k0") is None and eras.cached_era("k1") is None
    assert eras.cached_era("k4") is Era.LEGACY
    eras.remember_era("k4", Era.MODERN)  # an update does not evict
    assert eras.cached_era("k2") is Era.LEGACY and eras.cached_era("k4") is Era.MODERN
    eras.forget_era("k4")
    assert eras.cached_era("k4") is None


# --- the probe's outcomes ------------------------------------------------------------------


async def test_discover_result_means_modern() -> None:
    server = ScriptedTransport(modern_server)
    async with Client(server) as client:
        assert client.era is Era.MODERN
        assert client.protocol_version == MODERN
        assert client.server_info is not None and client.server_info.name == "scripted"
        assert "tools" in client.server_capabilities
        assert client.supported_versions == [MODERN]
        await client.list_tools()
    assert server.methods() == ["server/discover", "tools/list"]
    probe = server.sent[0]["params"]["_meta"]
    assert probe[VERSION_KEY] == MODERN
    assert probe["io.modelcontextprotocol/clientInfo"]["name"] == "mcpkit"
    assert probe["io.modelcontextprotocol/clientCapabilities"] == {}
    assert server.closes == 1


async def test_unsupported_version_is_retried_with_a_supported_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # This client pretends to prefer a newer modern version than the server speaks.
    monkeypatch.setattr(client_module, "MODERN_VERSIONS", (FUTURE, MODERN))
    monkeypatch.setattr(eras, "MODERN_VERSIONS", (FUTURE, MODERN))

    def script(message: dict[str, Any]) -> Any:
        if "id" not in message:
            return None
        version = message["params"]["_meta"][VERSION_KEY]
        if version != MODERN:
            return error(message, errors.UNSUPPORTED_PROTOCOL_VERSION, "Unsupported",
                         {"supported": [MODERN, LEGACY], "requested": version})
        return modern_server(message)

    server = ScriptedTransport(script)
    async with Client(server) as client:
        assert client.era is Era.MODERN
        assert client.protocol_version == MODERN
        await client.list_tools()
    assert server.methods() == ["server/discover", "server/discover", "tools/list"]
    versions = [m["params"]["_meta"][VERSION_KEY] for m in server.sent]
    assert versions == [FUTURE, MODERN, MODERN]
    assert server.sent[0]["id"] != server.sent[1]["id"]


async def test_unsupported_version_with_nothing_mutual_does_not_fall_back() -> None:
    def script(message: dict[str, Any]) -> Any:
        if message.get("method") == "server/discover":
            return error(message, errors.UNSUPPORTED_PROTOCOL_VERSION, "Unsupported",
                         {"supported": [FUTURE], "requested": MODERN})
        return legacy_server(message)

    server = ScriptedTransport(script)
    with pytest.raises(IncompatibleServer, match=FUTURE):
        async with Client(server):
            pass
    assert "initialize" not in server.methods()  # spec: do not fall back to initialize


async def test_server_refusing_the_version_it_listed_is_incompatible() -> None:
    def script(message: dict[str, Any]) -> Any:
        return error(message, errors.UNSUPPORTED_PROTOCOL_VERSION, "Unsupported",
                     {"supported": [MODERN], "requested": MODERN})

    server = ScriptedTransport(script)
    with pytest.raises(IncompatibleServer, match="kept refusing"):
        async with Client(server):
            pass
    assert server.methods() == ["server/discover"] * 3


@pytest.mark.parametrize("code", [errors.MISSING_REQUIRED_CLIENT_CAPABILITY,
                                  errors.HEADER_MISMATCH])
async def test_other_modern_errors_mean_modern_but_refused(code: int) -> None:
    server = ScriptedTransport(lambda m: error(m, code, "refused"))
    with pytest.raises(IncompatibleServer, match="refused"):
        async with Client(server):
            pass
    assert "initialize" not in server.methods()


@pytest.mark.parametrize("code", [-32601, -32602, -32600, -32603, -32000, -32002])
async def test_other_errors_mean_legacy(code: int) -> None:
    def script(message: dict[str, Any]) -> Any:
        if message.get("method") == "server/discover":
            return error(message, code, "not before initialize")
        return legacy_server(message)

    server = ScriptedTransport(script)
    async with Client(server) as client:
        assert client.era is Era.LEGACY
        assert client.protocol_version == LEGACY
        assert client.server_info is not None and client.server_info.name == "scripted-legacy"
        await client.ping()
    assert server.methods() == ["server/discover", "initialize", "notifications/initialized",
                                "ping"]
    init = server.requests("initialize")[0]["params"]
    assert init["protocolVersion"] == LEGACY
    assert init["clientInfo"]["name"] == "mcpkit"
    assert "_meta" not in init


async def test_error_with_null_id_means_legacy() -> None:
    """Some legacy servers answer a request they refuse before `initialize` with id null."""

    def script(message: dict[str, Any]) -> Any:
        if message.get("method") == "server/discover":
            return {"jsonrpc": "2.0", "id": None,
                    "error": {"code": -32600, "message": "not initialized"}}
        return legacy_server(message)

    server = ScriptedTransport(script)
    async with Client(server) as client:
        assert client.era is Era.LEGACY


async def test_silence_until_probe_timeout_means_legacy() -> None:
    def script(message: dict[str, Any]) -> Any:
        if message.get("method") == "server/discover":
            return None  # a legacy server that ignores requests before initialize
        return legacy_server(message)

    server = ScriptedTransport(script)
    started = time.monotonic()
    async with Client(
        server,
        connect=ConnectOptions(probe_timeout=0.3),
        timeouts=Timeouts(timeout=5),
    ) as client:
        elapsed = time.monotonic() - started
        assert client.era is Era.LEGACY
    assert 0.3 <= elapsed < 1.5
    probe_id = server.sent[0]["id"]
    assert server.methods()[:3] == ["server/discover", "initialize",
                                    "notifications/initialized"]
    # The probe is given up without a notifications/cancelled a legacy server would see
    # before initialize; the transport is told to stop waiting for it.
    assert "notifications/cancelled" not in server.methods()
    assert probe_id in server.abandoned


async def test_a_late_probe_answer_is_dropped() -> None:
    """The legacy server answers the probe after the client moved on: ignored."""
    transport: ScriptedTransport

    def script(message: dict[str, Any]) -> Any:
        if message.get("method") == "initialize":
            probe = transport.requests("server/discover")[0]
            return [error(probe, -32601, "late"), legacy_server(message)]
        if message.get("method") == "server/discover":
            return None
        return legacy_server(message)

    transport = ScriptedTransport(script)
    async with Client(transport, connect=ConnectOptions(probe_timeout=0.1)) as client:
        assert client.era is Era.LEGACY
        await client.ping()


async def test_pinned_modern_against_a_legacy_server_is_incompatible() -> None:
    server = ScriptedTransport(legacy_server)
    with pytest.raises(IncompatibleServer, match="does not speak the modern protocol"):
        async with Client(server, era="modern"):
            pass
    assert server.methods() == ["server/discover"]


async def test_pinned_modern_against_a_silent_server_times_out() -> None:
    """With the era pinned, server/discover is an ordinary request: its timeout applies,
    not the probe's."""
    server = ScriptedTransport(lambda m: None)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        async with Client(
            server,
            era=MODERN,
            connect=ConnectOptions(probe_timeout=0.05),
            timeouts=Timeouts(timeout=0.3),
        ):
            pass
    assert 0.3 <= time.monotonic() - started < 1.5
    assert server.methods() == ["server/discover"]


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_a_handshake_request_timeout_is_reported_as_such(era: str) -> None:
    server = ScriptedTransport(lambda m: None)
    with pytest.raises(RequestTimeout, match=r"timeout of 0\.3 s"):
        async with Client(
            server,
            era=era,
            timeouts=Timeouts(timeout=0.3),
            connect=ConnectOptions(connect_timeout=30),
        ):
            pass


async def test_pinned_legacy_does_not_probe() -> None:
    server = ScriptedTransport(legacy_server)
    async with Client(server, era="legacy") as client:
        assert client.era is Era.LEGACY
    assert server.methods() == ["initialize", "notifications/initialized"]


async def test_pinned_legacy_version_is_requested() -> None:
    server = ScriptedTransport(legacy_server)
    async with Client(server, era="2025-03-26") as client:
        assert client.era is Era.LEGACY
        assert client.protocol_version == "2025-03-26"
    assert server.requests("initialize")[0]["params"]["protocolVersion"] == "2025-03-26"


async def test_initialize_answered_with_an_unknown_version_is_incompatible() -> None:
    def script(message: dict[str, Any]) -> Any:
        if message.get("method") == "initialize":
            return result(message, initialize_result("2023-01-01"))
        return legacy_server(message)

    server = ScriptedTransport(script)
    with pytest.raises(IncompatibleServer, match="2023-01-01"):
        async with Client(server, era="legacy"):
            pass
    assert "notifications/initialized" not in server.methods()


async def test_initialize_answered_with_an_older_version_is_adopted() -> None:
    def script(message: dict[str, Any]) -> Any:
        if message.get("method") == "initialize":
            return result(message, initialize_result("2025-03-26"))
        return legacy_server(message)

    server = ScriptedTransport(script)
    async with Client(server, era="legacy") as client:
        assert client.protocol_version == "2025-03-26"
        assert client.supported_versions == ["2025-03-26"]


def test_bad_pins_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown protocol version"):
        Client(ScriptedTransport(legacy_server), era="1999-01-01")
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="not of the modern"):
        Client(ScriptedTransport(legacy_server), era="modern", version=LEGACY)  # the old form


async def test_legacy_era_is_cached_per_server() -> None:
    server = ScriptedTransport(legacy_server)
    async with Client(server) as client:
        assert client.era is Era.LEGACY
    assert server.methods() == ["server/discover", "initialize", "notifications/initialized"]
    server.sent.clear()
    async with Client(server) as client:  # the same server: no probe this time
        assert client.era is Era.LEGACY
    assert server.methods() == ["initialize", "notifications/initialized"]
    other = ScriptedTransport(legacy_server)  # another server is probed
    async with Client(other):
        pass
    assert other.methods()[0] == "server/discover"


async def test_modern_era_is_cached_per_server() -> None:
    server = ScriptedTransport(modern_server)
    async with Client(server):
        pass
    server.sent.clear()
    async with Client(server) as client:
        assert client.era is Era.MODERN
    assert server.methods() == ["server/discover"]  # the setup request; never initialize


async def test_cached_modern_era_that_no_longer_holds_is_reprobed() -> None:
    behaviour = {"modern": True}

    def script(message: dict[str, Any]) -> Any:
        return modern_server(message) if behaviour["modern"] else legacy_server(message)

    server = ScriptedTransport(script)
    async with Client(server):
        pass
    behaviour["modern"] = False  # the same command now runs an older server
    async with Client(server) as client:
        assert client.era is Era.LEGACY


async def test_a_pinned_era_is_not_cached() -> None:
    def dual_era(message: dict[str, Any]) -> Any:
        if message.get("method") == "server/discover":
            return modern_server(message)
        return legacy_server(message)

    server = ScriptedTransport(dual_era)
    async with Client(server, era="legacy") as client:
        assert client.era is Era.LEGACY
    async with Client(server) as client:  # auto: detects the server's own era
        assert client.era is Era.MODERN
