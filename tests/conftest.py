"""Shared fixtures: the anyio backend and an in-memory rig that drives `server.engine`."""

from __future__ import annotations

import itertools
import json
from typing import Any

import anyio
import pytest

from mcpkit.protocol import jsonrpc
from mcpkit.server.connection import Connection

MODERN_VERSION = "2026-07-28"
LEGACY_VERSION = "2025-11-25"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class MemoryChannel:
    """A `Channel` that keeps every message sent on it, decoded."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def send(self, message: bytes) -> None:
        self.messages.append(json.loads(message))

    def notifications(self, method: str | None = None) -> list[dict[str, Any]]:
        return [
            m
            for m in self.messages
            if "id" not in m and "method" in m and (method is None or m["method"] == method)
        ]

    async def wait_for(self, predicate: Any, limit_s: float = 5.0) -> dict[str, Any]:
        with anyio.fail_after(limit_s):
            while True:
                for message in self.messages:
                    if predicate(message):
                        return message
                await anyio.sleep(0.005)


def modern_meta(
    version: str = MODERN_VERSION, capabilities: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "0"},
    }
    meta.update(extra)
    return meta


class Rig:
    """One client connection to a server, driven straight through its engine."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.engine = server.engine
        self.channel = MemoryChannel()
        self.connection = Connection(self.channel)
        self._ids = itertools.count(1)

    async def call(
        self, method: str, params: dict[str, Any] | None = None, *, id: Any = None
    ) -> dict[str, Any] | None:
        request_id = next(self._ids) if id is None else id
        raw = (
            jsonrpc.encode_request(request_id, method, params)
            if params is not None
            else jsonrpc.encode_request(request_id, method)
        )
        request = jsonrpc.decode_message(raw)
        assert isinstance(request, jsonrpc.Request)
        body = await self.engine.handle_request(request, self.connection, self.channel)
        return None if body is None else json.loads(body)

    async def modern(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        capabilities: dict[str, Any] | None = None,
        id: Any = None,
        **meta_extra: Any,
    ) -> dict[str, Any] | None:
        params = dict(params or {})
        params["_meta"] = {
            **modern_meta(capabilities=capabilities),
            **meta_extra,
            **params.get("_meta", {}),
        }
        return await self.call(method, params, id=id)

    async def initialize(
        self, version: str = LEGACY_VERSION, capabilities: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        response = await self.call(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": capabilities or {},
                "clientInfo": {"name": "tests", "version": "0"},
            },
        )
        assert response is not None and "result" in response, response
        await self.notify("notifications/initialized")
        return response["result"]

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        raw = (
            jsonrpc.encode_notification(method, params)
            if params is not None
            else jsonrpc.encode_notification(method)
        )
        note = jsonrpc.decode_message(raw)
        assert isinstance(note, jsonrpc.Notification)
        await self.engine.handle_notification(note, self.connection)


@pytest.fixture
def make_rig() -> Any:
    """`make_rig(server)` → a `Rig` (a fresh connection with an in-memory channel)."""
    return Rig


@pytest.fixture
def meta_for() -> Any:
    """`meta_for(version=..., capabilities=..., **extra)` → a modern request `_meta`."""
    return modern_meta
