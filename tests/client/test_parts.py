"""The Client's parts sit outside it (issue 22): `negotiation` and `sending` never import the
`Client` nor read another object's private attributes, and they settle the era and carry
requests for any holder of the live state (`mcpkit.client.live.LiveState`) - here a bare
one that is not a Client - over a real stdio child and in memory."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup

import mcpkit.client
from mcpkit.client.negotiation import Negotiation
from mcpkit.client.responders import Responders
from mcpkit.client.sending import Sender
from mcpkit.client.session import ClientSession, Timeouts
from mcpkit.client.targets import ConnectOptions, make_transport
from mcpkit.errors import UsageError
from mcpkit.protocol.versions import Era
from mcpkit.testing.echo_server import build_server
from mcpkit.transports.client.base import ClientTransport

CLIENT_PACKAGE = Path(mcpkit.client.__file__).parent
PARTS = sorted(p for p in CLIENT_PACKAGE.glob("*.py") if p.name not in ("client.py", "__init__.py"))


def _imports_of(tree: ast.Module) -> set[str]:
    """Every module a file imports, at any depth (TYPE_CHECKING blocks included)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


@pytest.mark.parametrize("part", PARTS, ids=lambda p: p.name)
def test_a_part_never_imports_the_client(part: Path) -> None:
    assert "mcpkit.client.client" not in _imports_of(ast.parse(part.read_text()))


@pytest.mark.parametrize("part", [*PARTS, CLIENT_PACKAGE / "client.py"], ids=lambda p: p.name)
def test_no_private_attribute_of_another_object_is_read(part: Path) -> None:
    """`x._name` only for x = self or cls: a part is given what it needs, it does not reach
    into the Client (nor the Client into a part)."""
    reached = [
        f"{part.name}:{node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(ast.parse(part.read_text()))
        if isinstance(node, ast.Attribute) and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    ]
    assert reached == []


class BareState:
    """A `LiveState` that is not a Client: one session, time limits, a log level."""

    def __init__(self, group: TaskGroup) -> None:
        self.group = group
        self.default_timeouts = Timeouts(timeout=10.0)
        self.log_level: str | None = None
        self.opened: ClientSession | None = None

    @property
    def session(self) -> ClientSession:
        if self.opened is None:
            raise UsageError("no session yet")
        return self.opened

    def describe(self) -> str:
        return "a bare live state"

    async def open(self, transport: ClientTransport) -> None:
        self.opened = ClientSession(transport, on_request=Responders().answer,
                                    on_notification=_ignore)
        await self.opened.open(self.group)


async def _ignore(method: str, params: dict[str, Any]) -> None:
    return None


ECHO_COMMAND = [sys.executable, "-m", "mcpkit.testing.echo_server", "--transport", "stdio"]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["stdio", "memory"])
@pytest.mark.parametrize("era", [None, Era.MODERN, Era.LEGACY], ids=["auto", "modern", "legacy"])
async def test_the_parts_work_for_a_live_state_that_is_not_a_client(kind: str,
                                                                    era: Era | None) -> None:
    target: object = ECHO_COMMAND if kind == "stdio" else build_server()
    connect = ConnectOptions(kind=kind, inherit_env=True)  # the child finds this mcpkit
    identity = {"name": "bare", "version": "0"}
    async with anyio.create_task_group() as group:
        state = BareState(group)
        negotiation = Negotiation(state, era, None, target=target, connect=connect,
                                  open_transport=state.open, client_info=identity)
        sender = Sender(state, negotiation, responders=Responders(), input_rounds=3,
                        client_info=identity, subscriptions=set(), annotations={})
        negotiation.sender = sender
        try:
            with anyio.fail_after(30):
                await state.open(make_transport(target, kind, connect))
                await negotiation.connect()
                assert negotiation.era is (era or Era.MODERN)  # auto: mcpkit is modern
                assert negotiation.server_info is not None
                assert negotiation.server_info.name == "mcpkit-echo"
                send = sender.modern if negotiation.era is Era.MODERN else sender.legacy
                result = await send("tools/call", {"name": "echo", "arguments": {"text": "hi"}},
                                    None, state.default_timeouts)
                assert result["content"] == [{"type": "text", "text": "hi"}]
        finally:
            if state.opened is not None:
                with anyio.CancelScope(shield=True):
                    await state.opened.transport.close()
            group.cancel_scope.cancel()
