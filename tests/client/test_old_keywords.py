"""The flat `Client` keyword arguments of earlier releases keep working for one release:
each lands in its group (`connect`, `timeouts`, `responders`, `notifications`, `limits`,
`behaviour`) and warns with a DeprecationWarning that names the new form and points at
the caller's line. The new form raises no warning."""

from __future__ import annotations

import warnings
from typing import Any

import anyio
import pytest

from mcpkit import Server
from mcpkit.client import (
    Behaviour,
    Client,
    ConnectOptions,
    InboundLimits,
    Limits,
    ListLimits,
    Notifications,
    Responders,
    Timeouts,
)
from mcpkit.client.options import OLD_KEYWORDS
from mcpkit.protocol import types
from mcpkit.protocol.versions import Era
from mcpkit.server.context import Context

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:9/mcp"  # never connected to


async def sample(params: types.CreateMessageRequestParams) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "sampled"},
            "model": "m-1"}


async def elicit(params: types.ElicitRequestParams) -> dict[str, Any]:
    return {"action": "decline"}


def on_log(params: types.LoggingMessageNotificationParams) -> None:
    pass


def on_list_changed(kind: str) -> None:
    pass


def on_resource_updated(uri: str) -> None:
    pass


def on_notification(method: str, params: dict[str, Any]) -> None:
    pass


RESOLVER = object()
VALUES: dict[str, Any] = {
    "transport": "sse",
    "headers": {"X-Team": "blue"},
    "env": {"DEBUG": "1"},
    "inherit_env": True,
    "cwd": "/tmp",
    "resolver": RESOLVER,
    "connect_timeout": 7.0,
    "probe_timeout": 0.7,
    "timeout": 5.0,
    "max_timeout": 50.0,
    "reset_timeout_on_progress": False,
    "sampling": sample,
    "sampling_tools": True,
    "elicitation": elicit,
    "elicitation_modes": ("form", "url"),
    "roots": ["file:///work"],
    "on_log": on_log,
    "on_list_changed": on_list_changed,
    "on_resource_updated": on_resource_updated,
    "on_notification": on_notification,
    "max_input_rounds": 3,
    "max_task_polls": 4,
    "inbound_limits": InboundLimits(requests=2),
    "list_limits": ListLimits(pages=2),
    "client_info": {"name": "old-style", "version": "0.1"},
    "log_level": "debug",
    "validate_output": False,
    "tasks": True,
}
GROUP_ATTRIBUTES = {"connect": "_connect", "timeouts": "default_timeouts"}
"""Where a Client keeps each group (the others under the parameter's own name)."""


def test_every_old_keyword_is_covered() -> None:
    assert set(VALUES) == set(OLD_KEYWORDS)


@pytest.mark.parametrize("name", sorted(OLD_KEYWORDS))
def test_an_old_keyword_lands_in_its_group_and_warns(name: str) -> None:
    group, field = OLD_KEYWORDS[name]
    with pytest.warns(DeprecationWarning) as record:
        client = Client(URL, **{name: VALUES[name]})
    assert len(record) == 1
    message = str(record[0].message)
    assert message.startswith(f"Client({name}=…) is deprecated")
    assert f"use Client({group}=" in message and f"({field}=…)" in message
    assert record[0].filename == __file__  # the warning points at the caller's line
    settled = getattr(client, GROUP_ATTRIBUTES.get(group, group))
    assert getattr(settled, field) == VALUES[name]


def test_old_version_keyword_still_pins_the_version() -> None:
    with pytest.warns(DeprecationWarning, match=r"Client\(version=…\).*era=") as record:
        client = Client(URL, version="2025-03-26")
    assert record[0].filename == __file__
    assert client._negotiated.pinned_era is Era.LEGACY
    assert client._negotiated.pinned_version == "2025-03-26"


def test_old_version_must_still_agree_with_the_era() -> None:
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="not of the modern"):
        Client(URL, era="modern", version="2025-03-26")


def test_old_keywords_fold_into_a_given_group() -> None:
    given = Timeouts(timeout=1.0, maximum=2.0)
    with pytest.warns(DeprecationWarning):
        client = Client(URL, timeouts=given, max_timeout=9.0)
    assert client.default_timeouts == Timeouts(timeout=1.0, maximum=9.0)
    assert given.maximum == 2.0  # the caller's object is not changed


def test_old_tasks_keyword_declares_the_tasks_extension() -> None:
    with pytest.warns(DeprecationWarning):
        client = Client(URL, tasks=True)
    assert "io.modelcontextprotocol/tasks" in client.responders.extensions


def test_an_unknown_keyword_is_still_a_type_error() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'sampler'"):
        Client(URL, sampler=sample)


def test_the_new_form_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        client = Client(
            URL, era="2025-11-25", bearer_token="t0k",
            connect=ConnectOptions(kind="sse", headers={"X-Team": "blue"}),
            timeouts=Timeouts(timeout=5.0), responders=Responders(sampling=sample),
            notifications=Notifications(on_log=on_log), limits=Limits(input_rounds=3),
            behaviour=Behaviour(validate_output=False))
    assert client._connect.bearer_token == "t0k" and client._connect.kind == "sse"
    assert client._negotiated.pinned_version == "2025-11-25"


def test_bearer_token_is_given_once() -> None:
    with pytest.raises(ValueError, match="two bearer tokens"):
        Client(URL, bearer_token="a", connect=ConnectOptions(bearer_token="b"))


def chatty_sampling_server() -> Server:
    server = Server("old-keywords")

    @server.tool()
    async def ask_and_log(ctx: Context) -> str:
        await ctx.info("asking the model")
        answer = await ctx.sample(["hi"], max_tokens=5, key="s")
        return str(answer["content"]["text"])

    return server


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_old_keywords_still_drive_a_real_connection(era: str) -> None:
    """Old-style handlers answer and hear the server in both eras (a full call)."""
    logged: list[str] = []
    with pytest.warns(DeprecationWarning):
        client = Client(chatty_sampling_server(), era=era, sampling=sample, timeout=10.0,
                        log_level="info",
                        on_log=lambda params: logged.append(str(params.data)))
    with anyio.fail_after(10):
        async with client:
            result = await client.call_tool("ask_and_log")
    assert result.is_error is not True
    assert "sampled" in str(result.content[0])
    assert "asking the model" in logged  # (modern: once per round of the call)
