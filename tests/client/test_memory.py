"""`Client` against a mcpkit `Server` in memory: every typed method in both eras, pagination,
output validation, input rounds (MRTR) and their legacy equivalent, declared capabilities,
and the notification callbacks."""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import msgspec
import pytest

from mcpkit.client import (
    Behaviour,
    Client,
    ClientError,
    ConnectionClosed,
    InvalidToolOutput,
    Limits,
    Notifications,
    Responders,
    ServerError,
    Timeouts,
    TooManyInputRounds,
)
from mcpkit.protocol import errors, types
from mcpkit.protocol.versions import Era
from mcpkit.server.context import Context
from mcpkit.server.server import Server
from mcpkit.server.tools import ToolResult

from .support import LEGACY, MODERN, RecordingMemoryTransport, eventually

pytestmark = pytest.mark.anyio

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}},
               "required": ["name"]}
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
LIMIT_S = 3.0


class Point(msgspec.Struct):
    x: int
    y: int


def make_server(page_size: int | None = None) -> Server:
    server = Server("demo", "1.2.3", title="Demo", instructions="Be brief.")
    server.page_size = page_size

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @server.tool()
    def point(x: int, y: int) -> Point:
        return Point(x, y)

    @server.tool()
    def fail() -> str:
        raise ValueError("it broke")

    @server.tool()
    async def ask_name(ctx: Context) -> str:
        answer = await ctx.elicit("Name?", NAME_SCHEMA, key="who")
        return f"Hello {(answer.get('content') or {}).get('name')} ({answer['action']})"

    @server.tool()
    async def sample_it(ctx: Context) -> str:
        answer = await ctx.sample(["hi"], max_tokens=5, key="s", system_prompt="be nice")
        return f"{answer['model']}: {answer['content']['text']}"

    @server.tool()
    async def roots(ctx: Context) -> str:
        listed = await ctx.list_roots(key="r")
        return ",".join(r["uri"] for r in listed)

    @server.tool()
    async def all_three(ctx: Context) -> str:
        """Asks for everything in one round, then once more in a second round."""
        ctx.state = (ctx.state or 0) + 1
        got = await ctx.ask_many({
            "e": ("elicitation/create", {"mode": "form", "message": "Name?",
                                         "requestedSchema": NAME_SCHEMA}),
            "s": ("sampling/createMessage", {"messages": [
                {"role": "user", "content": {"type": "text", "text": "q"}}], "maxTokens": 3}),
            "r": ("roots/list", {}),
        })
        again = await ctx.elicit("Again?", NAME_SCHEMA, key="e2")
        return (f"{got['e']['content']['name']}/{got['s']['content']['text']}/"
                f"{got['r']['roots'][0]['uri']}/{again['content']['name']}/rounds={ctx.state}")

    @server.tool()
    async def insatiable(ctx: Context) -> str:
        ctx.state = (ctx.state or 0) + 1
        await ctx.elicit("More?", NAME_SCHEMA, key=f"q{ctx.state}")
        return "never"

    @server.tool()
    async def chatty(ctx: Context) -> str:
        for level in ("debug", "info", "warning", "error"):
            await ctx.log(level, f"at {level}", logger="t")
        return "logged"

    @server.tool()
    async def progress(ctx: Context) -> str:
        for step in (1, 2, 3):
            await ctx.report_progress(step, 3, f"step {step}")
        return "done"

    server.add_resource("hello", "mem://hello", mime_type="text/plain")

    @server.resource("mem://greeting/{who}")
    def greeting(who: str) -> str:
        return f"hi {who}"

    @server.resource("mem://asks")
    async def asks(ctx: Context) -> str:
        answer = await ctx.elicit("Which?", NAME_SCHEMA, key="which")
        return f"you chose {answer['content']['name']}"

    @server.prompt()
    def review(code: str) -> str:
        """Review some code."""
        return f"Please review: {code}"

    @server.prompt()
    async def personal(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", NAME_SCHEMA, key="n")
        return f"Write to {answer['content']['name']}"

    @server.completion(prompt="review")
    def complete_code(argument: str, value: str, context: dict[str, str]) -> list[str]:
        return [c for c in ("print", "pass", "import") if c.startswith(value)]

    return server


async def accept_name(params: types.ElicitRequestParams) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "Ann"}}


async def sample(params: types.CreateMessageRequestParams) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "sampled"},
            "model": "m-1"}


ROOTS = ["file:///work", types.Root(uri="file:///tmp", name="tmp")]


@pytest.fixture(params=["modern", "legacy"])
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# --- eras ----------------------------------------------------------------------------------


async def test_auto_detects_modern_for_a_mcpkit_server() -> None:
    async with Client(make_server()) as client:
        assert client.era is Era.MODERN
        assert client.protocol_version == MODERN


async def test_connection_facts(era: str) -> None:
    async with Client(make_server(), era=era) as client:  # type: ignore[arg-type]
        assert client.era is Era(era)
        assert client.protocol_version == (MODERN if era == "modern" else LEGACY)
        assert client.server_info is not None
        assert (client.server_info.name, client.server_info.version) == ("demo", "1.2.3")
        assert client.instructions == "Be brief."
        assert {"tools", "resources", "prompts", "completions"} <= set(
            client.server_capabilities)
        info = await client.discover()
        assert info.supported_versions and info.supported_versions[0] == client.protocol_version
        assert info.capabilities.tools is not None
        await client.ping()


async def test_a_client_connects_once() -> None:
    client = Client(make_server())
    with pytest.raises(ClientError, match="not connected"):
        await client.list_tools()
    async with client:
        with pytest.raises(ClientError, match="already connected"):
            await client.connect()
    with pytest.raises(ConnectionClosed, match="the client closed"):
        await client.list_tools()


async def test_connect_and_close_as_calls() -> None:
    client = Client(make_server())
    await client.connect()
    try:
        assert len(await client.list_tools()) > 3
    finally:
        await client.close()
    await client.close()  # idempotent


async def test_connect_under_a_caller_timeout() -> None:
    client = Client(make_server())
    try:
        with anyio.fail_after(5):
            await client.connect()
        assert len(await client.list_tools()) > 3
    finally:
        with anyio.CancelScope(shield=True):
            await client.close()


# --- typed methods -------------------------------------------------------------------------


async def test_tools(era: str) -> None:
    async with Client(make_server(), era=era) as client:  # type: ignore[arg-type]
        tools = {t.name: t for t in await client.list_tools()}
        assert {"add", "point", "fail", "ask_name"} <= set(tools)
        assert tools["add"].description == "Add two numbers."
        assert tools["point"].output_schema is not msgspec.UNSET
        added = await client.call_tool("add", {"a": 2, "b": 3})
        assert added.structured_content == {"result": 5}
        assert added.is_error is not True
        pt = await client.call_tool("point", {"x": 1, "y": 2})
        assert pt.structured_content == {"x": 1, "y": 2}
        failed = await client.call_tool("fail")
        assert failed.is_error is True  # a tool failure is a result, not an exception
        assert "it broke" in failed.content[0].text  # type: ignore[union-attr]
        with pytest.raises(ServerError) as info:
            await client.call_tool("no_such_tool")
        assert info.value.code in (errors.INVALID_PARAMS, errors.METHOD_NOT_FOUND)
        bad = await client.call_tool("add", {"a": "x"})
        assert bad.is_error is True  # invalid arguments are a tool error (2025-11-25 on)


async def test_resources(era: str) -> None:
    async with Client(make_server(), era=era) as client:  # type: ignore[arg-type]
        resources = await client.list_resources()
        assert [r.uri for r in resources] == ["mem://hello", "mem://asks"]
        templates = await client.list_resource_templates()
        assert [t.uri_template for t in templates] == ["mem://greeting/{who}"]
        hello = await client.read_resource("mem://hello")
        assert hello.contents[0].text == "hello"  # type: ignore[union-attr]
        greeting = await client.read_resource("mem://greeting/bob")
        assert greeting.contents[0].text == "hi bob"  # type: ignore[union-attr]
        with pytest.raises(ServerError):
            await client.read_resource("mem://missing")


async def test_prompts_and_completion(era: str) -> None:
    async with Client(make_server(), era=era) as client:  # type: ignore[arg-type]
        prompts = {p.name: p for p in await client.list_prompts()}
        assert set(prompts) == {"review", "personal"}
        assert prompts["review"].arguments[0].name == "code"  # type: ignore[index]
        got = await client.get_prompt("review", {"code": "x = 1"})
        assert got.messages[0].content.text == "Please review: x = 1"  # type: ignore[union-attr]
        completion = await client.complete({"type": "ref/prompt", "name": "review"}, "code", "p")
        assert completion.values == ["print", "pass"]
        with pytest.raises(ServerError):
            await client.get_prompt("missing")


async def test_set_logging_level(era: str) -> None:
    seen: list[types.LoggingMessageNotificationParams] = []
    async with Client(
        make_server(),
        era=era,
        notifications=Notifications(on_log=seen.append),
    ) as client:
        await client.call_tool("chatty")
        await client.set_logging_level("warning")
        await client.call_tool("chatty")
        with pytest.raises(ValueError, match="unknown log level"):
            await client.set_logging_level("loud")
    levels = [m.level for m in seen]
    if era == "legacy":  # the session's default is info
        assert levels == ["info", "warning", "error", "warning", "error"]
    else:  # modern: nothing until the client asks for a level (on every request)
        assert levels == ["warning", "error"]
    assert all(m.logger == "t" for m in seen)


async def test_log_level_given_at_construction(era: str) -> None:
    seen: list[str] = []

    async def on_log(message: types.LoggingMessageNotificationParams) -> None:
        seen.append(str(message.data))

    async with Client(
        make_server(),
        era=era,
        behaviour=Behaviour(log_level="debug"),
        notifications=Notifications(on_log=on_log),
    ) as client:
        await client.call_tool("chatty")
    assert seen == ["at debug", "at info", "at warning", "at error"]


async def test_progress_callback(era: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []
    async with Client(make_server(), era=era) as client:  # type: ignore[arg-type]
        result = await client.call_tool(
            "progress", on_progress=lambda p, t, m: seen.append((p, t, m)))
        assert result.content[0].text == "done"  # type: ignore[union-attr]
        await eventually(lambda: len(seen) >= 3)
    assert sorted(seen) == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]


async def test_request_passes_any_method_through(era: str) -> None:
    async with Client(make_server(), era=era) as client:  # type: ignore[arg-type]
        raw = await client.request("tools/list")
        assert isinstance(raw, dict) and "tools" in raw
        with pytest.raises(ServerError) as info:
            await client.request("no/such/method")
        assert info.value.code == errors.METHOD_NOT_FOUND


async def test_tools_with_invalid_header_annotations_are_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Modern era: a tool whose x-mcp-header annotations are invalid must not be called."""
    from .support import ScriptedTransport, discover_result, error, result

    good = {"name": "good", "inputSchema": {"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"}}}}
    bad = {"name": "bad", "inputSchema": {"type": "object", "properties": {
        "where": {"type": "object", "x-mcp-header": "Where"}}}}

    def script(message: dict[str, Any]) -> Any:
        method = message.get("method")
        if method == "server/discover":
            return result(message, discover_result(tools={}))
        if method == "tools/list":
            return result(message, {"tools": [good, bad]})
        if method == "tools/call":
            return result(message, {"content": []})
        return error(message, -32601) if "id" in message else None

    transport = ScriptedTransport(script)
    async with Client(transport) as client:
        assert [t.name for t in await client.list_tools()] == ["good"]
        with pytest.raises(ClientError, match="invalid x-mcp-header"):
            await client.call_tool("bad", {"where": {}})
        await client.call_tool("good", {"region": "eu"})
    assert [c["params"]["name"] for c in transport.requests("tools/call")] == ["good"]
    assert "ignoring tool 'bad'" in caplog.text


# --- pagination ----------------------------------------------------------------------------


async def test_lists_follow_every_page(era: str) -> None:
    server = make_server(page_size=2)
    transport = RecordingMemoryTransport(server)
    async with Client(transport, era=era) as client:  # type: ignore[arg-type]
        tools = await client.list_tools()
        assert [t.name for t in tools] == list(server.tools)
        pages = transport.requests("tools/list")
        assert len(pages) == (len(server.tools) + 1) // 2
        assert "cursor" not in pages[0]["params"]
        assert all(isinstance(p["params"]["cursor"], str) for p in pages[1:])
        assert len(await client.list_resources()) == 2
        assert len(await client.list_prompts()) == 2


async def test_repeated_cursor_is_an_error() -> None:
    from .support import ScriptedTransport, error, initialize_result, result

    def script(message: dict[str, Any]) -> Any:
        method = message.get("method")
        if method == "initialize":
            return result(message, initialize_result(tools={}))
        if method == "tools/list":
            cursor = message["params"].get("cursor")
            return result(message, {"tools": [{"name": f"t-{cursor}",
                                               "inputSchema": {"type": "object"}}],
                                    "nextCursor": "a" if cursor is None else "b"})
        if "id" in message:
            return error(message, -32601)
        return None

    transport = ScriptedTransport(script)
    async with Client(transport, era="legacy") as client:
        with pytest.raises(errors.ProtocolError, match="repeated cursor 'b'"):
            await client.list_tools()
    assert len(transport.requests("tools/list")) == 3  # None, "a", "b" → "b" again


async def test_endless_cursor_chain_stops() -> None:
    from mcpkit.client import ListLimits

    from .support import ScriptedTransport, error, initialize_result, result

    def script(message: dict[str, Any]) -> Any:
        method = message.get("method")
        if method == "initialize":
            return result(message, initialize_result(prompts={}))
        if method == "prompts/list":
            cursor = message["params"].get("cursor") or "0"
            return result(message, {"prompts": [], "nextCursor": str(int(cursor) + 1)})
        return error(message, -32601) if "id" in message else None

    async with Client(
        ScriptedTransport(script),
        era="legacy",
        limits=Limits(lists=ListLimits(pages=5)),
    ) as client:
        with pytest.raises(ClientError, match="more than 5 pages"):
            await client.list_prompts()


# --- structured output ---------------------------------------------------------------------


def lying_server() -> Server:
    """Tools that declare an outputSchema and return something else (the server's own
    output check is switched off, as a buggy or hostile server would have it)."""
    server = Server("liar")
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    def wrong_type() -> ToolResult:
        return ToolResult([{"type": "text", "text": "n=x"}], structured_content={"n": "x"})

    def missing() -> ToolResult:
        return ToolResult([{"type": "text", "text": "nothing structured"}])

    def right() -> ToolResult:
        return ToolResult([{"type": "text", "text": "n=1"}], structured_content={"n": 1})

    def failing() -> ToolResult:
        return ToolResult([{"type": "text", "text": "bad"}], is_error=True)

    for fn in (wrong_type, missing, right, failing):
        server.add_tool(fn, output_schema=schema).output_validator = None
    return server


async def test_structured_output_is_validated(era: str) -> None:
    async with Client(lying_server(), era=era) as client:  # type: ignore[arg-type]
        # The catalog is fetched on the first call to learn the schema.
        assert (await client.call_tool("right")).structured_content == {"n": 1}
        with pytest.raises(InvalidToolOutput, match="wrong_type"):
            await client.call_tool("wrong_type")
        with pytest.raises(InvalidToolOutput, match="no structuredContent"):
            await client.call_tool("missing")
        # An error result is not checked against the schema.
        assert (await client.call_tool("failing")).is_error is True


async def test_output_validation_can_be_switched_off() -> None:
    transport = RecordingMemoryTransport(lying_server())
    async with Client(transport, behaviour=Behaviour(validate_output=False)) as client:
        result = await client.call_tool("wrong_type")
        assert result.structured_content == {"n": "x"}
    assert transport.requests("tools/list") == []  # no catalog needed


async def test_tool_catalog_is_refreshed_after_list_changed() -> None:
    server = lying_server()
    async with Client(server, era="legacy") as client:
        await client.call_tool("right")
        # The tool changes its schema; the server says so; the client re-reads it.
        server.tools["right"].output_schema = {"type": "object", "required": ["m"]}
        await server.notify_list_changed("tools")
        await anyio.sleep(0.05)
        with pytest.raises(InvalidToolOutput):
            await client.call_tool("right")


# --- input: MRTR (modern) and server→client requests (legacy) ------------------------------


def inputs_client(target: Any, era: str = "auto", **overrides: Any) -> Client:
    options: dict[str, Any] = {"elicitation": accept_name, "sampling": sample, "roots": ROOTS}
    options.update(overrides)
    return Client(target, era=era, responders=Responders(**options))


async def test_each_kind_of_input_is_answered(era: str) -> None:
    async with inputs_client(make_server(), era) as client:
        ask = await client.call_tool("ask_name")
        assert ask.content[0].text == "Hello Ann (accept)"  # type: ignore[union-attr]
        sampled = await client.call_tool("sample_it")
        assert sampled.content[0].text == "m-1: sampled"  # type: ignore[union-attr]
        roots = await client.call_tool("roots")
        assert roots.content[0].text == "file:///work,file:///tmp"  # type: ignore[union-attr]
        # prompts/get and resources/read may ask for input too
        prompt = await client.get_prompt("personal")
        assert prompt.messages[0].content.text == "Write to Ann"  # type: ignore[union-attr]
        read = await client.read_resource("mem://asks")
        assert read.contents[0].text == "you chose Ann"  # type: ignore[union-attr]


async def test_handlers_receive_typed_params(era: str) -> None:
    got: list[Any] = []

    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
        got.append(params)
        return types.ElicitResult(action="decline")

    async def sampler(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        got.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text="typed"), model="m-2")

    async def roots() -> list[str]:
        return ["file:///dynamic"]

    async with Client(
        make_server(),
        era=era,
        responders=Responders(elicitation=elicit, sampling=sampler, roots=roots),
    ) as client:
        declined = await client.call_tool("ask_name")
        assert declined.content[0].text == "Hello None (decline)"  # type: ignore[union-attr]
        sampled = await client.call_tool("sample_it")
        assert sampled.content[0].text == "m-2: typed"  # type: ignore[union-attr]
        listed = await client.call_tool("roots")
        assert listed.content[0].text == "file:///dynamic"  # type: ignore[union-attr]
    assert isinstance(got[0], types.ElicitRequestParams)
    assert got[0].message == "Name?" and got[0].requested_schema == NAME_SCHEMA
    assert isinstance(got[1], types.CreateMessageRequestParams)
    assert got[1].max_tokens == 5 and got[1].system_prompt == "be nice"


async def test_input_rounds_on_the_wire() -> None:
    """Each round is a new request (new id) with the original params, this round's
    answers as inputResponses, and the server's requestState echoed exactly."""
    transport = RecordingMemoryTransport(make_server())
    async with inputs_client(transport) as client:
        result = await client.call_tool("all_three", {})
        assert result.content[0].text == (  # type: ignore[union-attr]
            "Ann/sampled/file:///work/Ann/rounds=3")
    calls = transport.requests("tools/call")
    assert len(calls) == 3
    assert len({c["id"] for c in calls}) == 3
    first, second, third = (c["params"] for c in calls)
    assert "inputResponses" not in first and "requestState" not in first
    assert all(p["name"] == "all_three" and p["arguments"] == {} for p in (first, second, third))
    assert set(second["inputResponses"]) == {"e", "s", "r"}
    assert second["inputResponses"]["e"] == {"action": "accept", "content": {"name": "Ann"}}
    assert second["inputResponses"]["s"]["model"] == "m-1"
    assert second["inputResponses"]["r"] == {"roots": [
        {"uri": "file:///work"}, {"uri": "file:///tmp", "name": "tmp"}]}
    assert set(third["inputResponses"]) == {"e2"}  # only this round's answers
    # requestState: exactly what the server returned in the round before
    for asked, retry in itertools.pairwise(calls):
        answer = transport.answer_to(asked)["result"]
        assert answer["resultType"] == "input_required"
        assert retry["params"]["requestState"] == answer["requestState"]
    assert third["requestState"] != second["requestState"]
    final = transport.answer_to(calls[2])["result"]
    assert final.get("resultType", "complete") == "complete"


async def test_request_state_is_echoed_byte_for_byte() -> None:
    """Against a scripted server: whatever requestState it sends comes back unchanged,
    and a round without one sends none."""
    from .support import ScriptedTransport, discover_result, error, result

    odd_state = "  ü/+=\n\u2028 state with spaces  "

    def script(message: dict[str, Any]) -> Any:
        method = message.get("method")
        if method == "server/discover":
            return result(message, discover_result(tools={}))
        if method == "tools/list":
            return result(message, {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]})
        if method == "tools/call":
            params = message["params"]
            ask = {"q": {"method": "elicitation/create", "params": {
                "mode": "form", "message": "?", "requestedSchema": NAME_SCHEMA}}}
            if "inputResponses" not in params:
                return result(message, {"resultType": "input_required", "inputRequests": ask,
                                        "requestState": odd_state})
            if params.get("requestState") == odd_state:  # round 2: no state this time
                return result(message, {"resultType": "input_required", "inputRequests": ask})
            return result(message, {"content": [{"type": "text", "text": "ok"}]})
        return error(message, -32601) if "id" in message else None

    transport = ScriptedTransport(script)
    async with Client(transport, responders=Responders(elicitation=accept_name)) as client:
        assert (await client.call_tool("t")).content[0].text == "ok"  # type: ignore[union-attr]
    calls = transport.requests("tools/call")
    assert len(calls) == 3
    assert calls[1]["params"]["requestState"] == odd_state
    assert "requestState" not in calls[2]["params"]
    assert calls[2]["params"]["inputResponses"] == {
        "q": {"action": "accept", "content": {"name": "Ann"}}}


async def test_input_rounds_are_bounded() -> None:
    transport = RecordingMemoryTransport(make_server())
    asked = 0

    async def elicit(params: types.ElicitRequestParams) -> dict[str, Any]:
        nonlocal asked
        asked += 1
        return {"action": "accept", "content": {"name": "x"}}

    async with Client(
        transport,
        responders=Responders(elicitation=elicit),
        limits=Limits(input_rounds=3),
    ) as client:
        with pytest.raises(TooManyInputRounds, match="3 rounds"):
            await client.call_tool("insatiable")
    assert len(transport.requests("tools/call")) == 4  # the call and 3 retries
    assert asked == 3


async def test_input_asked_on_a_method_that_cannot_ask_is_refused() -> None:
    from .support import ScriptedTransport, discover_result, error, result

    def script(message: dict[str, Any]) -> Any:
        method = message.get("method")
        if method == "server/discover":
            return result(message, discover_result(prompts={}))
        if method == "prompts/list":
            return result(message, {"resultType": "input_required", "inputRequests": {}})
        return error(message, -32601) if "id" in message else None

    async with Client(ScriptedTransport(script)) as client:
        with pytest.raises(errors.ProtocolError, match="does not allow it"):
            await client.list_prompts()


async def test_missing_handler_is_reported(era: str) -> None:
    async with Client(make_server(), era=era) as client:  # type: ignore[arg-type]
        # Without elicitation the client does not declare it: the server refuses (-32021)
        # instead of asking; never a hang.
        with anyio.fail_after(LIMIT_S), pytest.raises(ServerError) as info:
            await client.call_tool("ask_name")
        assert info.value.code == errors.MISSING_REQUIRED_CLIENT_CAPABILITY


async def test_a_failing_handler_fails_the_call_in_legacy() -> None:
    async def broken(params: types.ElicitRequestParams) -> dict[str, Any]:
        raise RuntimeError("the UI crashed")

    async with Client(
        make_server(),
        era="legacy",
        responders=Responders(elicitation=broken),
    ) as client:
        with anyio.fail_after(LIMIT_S), pytest.raises(ServerError) as info:
            await client.call_tool("ask_name")  # the server got -32603 for its request
        assert info.value.code == errors.INTERNAL_ERROR
        assert "elicitation/create" in info.value.message
        assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {
            "result": 3}


@pytest.mark.parametrize("failure", [RuntimeError("the UI crashed"),
                                     errors.invalid_params("refused by the user")])
async def test_a_failing_handler_fails_the_call_in_modern(failure: Exception) -> None:
    async def broken(params: types.ElicitRequestParams) -> dict[str, Any]:
        raise failure

    async with Client(
        make_server(),
        era="modern",
        responders=Responders(elicitation=broken),
    ) as client:
        with anyio.fail_after(LIMIT_S), pytest.raises((RuntimeError, ClientError)):
            await client.call_tool("ask_name")


async def test_legacy_input_is_server_to_client_requests() -> None:
    transport = RecordingMemoryTransport(make_server())
    async with inputs_client(transport, "legacy") as client:
        await client.call_tool("all_three")
    calls = transport.requests("tools/call")
    assert len(calls) == 1  # one request; the server asked through its own requests
    answers = [m for m in transport.sent if "id" in m and "method" not in m]
    assert len(answers) == 4  # e, s, r and e2, each answered by id
    assert all(isinstance(a["id"], str) and a["id"].startswith("s-") for a in answers)
    assert all("result" in a for a in answers)


# --- capabilities follow the handlers ------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "modern", "legacy"),
    [
        ({}, {}, {}),
        ({"responders": Responders(elicitation=accept_name)}, {"elicitation": {"form": {}}},
         {"elicitation": {"form": {}}}),
        ({"responders": Responders(elicitation=accept_name, elicitation_modes=("form", "url"))},
         {"elicitation": {"form": {}, "url": {}}}, {"elicitation": {"form": {}, "url": {}}}),
        ({"responders": Responders(sampling=sample)}, {"sampling": {}}, {"sampling": {}}),
        ({"responders": Responders(sampling=sample, sampling_tools=True)},
         {"sampling": {"tools": {}}}, {"sampling": {"tools": {}}}),
        ({"responders": Responders(roots=ROOTS)}, {"roots": {"listChanged": True}},
         {"roots": {"listChanged": True}}),
        ({"behaviour": Behaviour(tasks=True)},
         {"extensions": {"io.modelcontextprotocol/tasks": {}}}, {}),
    ],
)
async def test_declared_capabilities(options: dict[str, Any], modern: dict[str, Any],
                                     legacy: dict[str, Any]) -> None:
    transport = RecordingMemoryTransport(make_server())
    async with Client(transport, era="modern", **options) as client:
        await client.list_tools()
    for request in transport.requests("server/discover") + transport.requests("tools/list"):
        assert request["params"]["_meta"][CAPS_KEY] == modern
    transport = RecordingMemoryTransport(make_server())
    async with Client(transport, era="legacy", **options):
        pass
    assert transport.requests("initialize")[0]["params"]["capabilities"] == legacy


@pytest.mark.parametrize("version", ["2025-03-26", "2024-11-05"])
async def test_old_versions_declare_no_elicitation(version: str) -> None:
    transport = RecordingMemoryTransport(make_server())
    async with Client(
        transport,
        era=version,
        responders=Responders(elicitation=accept_name, sampling=sample, sampling_tools=True),
    ):
        pass
    assert transport.requests("initialize")[0]["params"]["capabilities"] == {"sampling": {}}


async def test_server_requests_the_client_cannot_answer(era: str) -> None:
    from mcpkit.client.responders import Responders

    responders = Responders()
    with pytest.raises(errors.McpError) as info:
        await responders.answer("sampling/createMessage", {})
    assert info.value.code == errors.METHOD_NOT_FOUND
    with pytest.raises(errors.McpError):
        await responders.answer("roots/list", {})
    with pytest.raises(errors.McpError):
        await responders.answer("elicitation/create", {"message": "x"})
    with pytest.raises(errors.McpError) as info:
        await responders.answer("something/else", {})
    assert info.value.code == errors.METHOD_NOT_FOUND
    assert await responders.answer("ping", {}) == {}
    url_only = Responders(elicitation=accept_name, elicitation_modes=("form",))
    with pytest.raises(errors.McpError) as info:
        await url_only.answer("elicitation/create", {"mode": "url", "message": "go",
                                                     "url": "https://x", "elicitationId": "1"})
    assert info.value.code == errors.INVALID_PARAMS
    no_tools = Responders(sampling=sample)
    with pytest.raises(errors.McpError) as info:
        await no_tools.answer("sampling/createMessage", {
            "messages": [], "maxTokens": 1, "tools": [{"name": "t", "inputSchema": {}}]})
    assert info.value.code == errors.INVALID_PARAMS


# --- notifications -------------------------------------------------------------------------


class Seen:
    def __init__(self) -> None:
        self.logs: list[str] = []
        self.changed: list[str] = []
        self.updated: list[str] = []
        self.all: list[str] = []

    def options(self) -> dict[str, Any]:
        async def on_updated(uri: str) -> None:
            self.updated.append(uri)

        return {"notifications": Notifications(
            on_log=lambda m: self.logs.append(str(m.data)),
            on_list_changed=self.changed.append,
            on_resource_updated=on_updated,
            on_notification=lambda method, params: self.all.append(method),
        )}

    async def until(self, check: Any) -> None:
        await eventually(check)


async def test_legacy_notifications_reach_the_callbacks() -> None:
    server = make_server()
    seen = Seen()
    async with Client(
        server,
        era="legacy",
        behaviour=Behaviour(log_level="info"),
        **seen.options(),
    ) as client:
        await client.ping()  # the server has handled notifications/initialized by now
        await client.listen()  # nothing to do in a session; must not fail
        await client.call_tool("chatty")
        await server.notify_list_changed("tools")
        await server.notify_list_changed("prompts")
        await server.notify_list_changed("resources")
        await server.notify_resource_updated("mem://hello")  # not subscribed: not sent
        await client.subscribe("mem://hello")
        await server.notify_resource_updated("mem://hello")
        await seen.until(lambda: seen.updated)
        await client.unsubscribe("mem://hello")
        await server.notify_resource_updated("mem://hello")
        await anyio.sleep(0.05)
    assert seen.logs == ["at info", "at warning", "at error"]
    assert seen.changed == ["tools", "prompts", "resources"]
    assert seen.updated == ["mem://hello"]
    assert seen.all.count("notifications/message") == 3
    assert "notifications/tools/list_changed" in seen.all
    assert seen.all.count("notifications/resources/updated") == 1


async def test_modern_listen_delivers_list_changes_and_updates() -> None:
    server = make_server()
    seen = Seen()
    async with Client(server, era="modern", **seen.options()) as client:
        await server.notify_list_changed("tools")  # nobody listens yet
        await anyio.sleep(0.02)
        assert seen.changed == []
        await client.listen(prompts=False)
        assert "notifications/subscriptions/acknowledged" in seen.all
        await server.notify_list_changed("tools")
        await server.notify_list_changed("prompts")  # filtered out
        await server.notify_list_changed("resources")
        await seen.until(lambda: len(seen.changed) == 2)
        await client.subscribe("mem://hello")  # restarts the stream with the URI
        await server.notify_resource_updated("mem://hello")
        await server.notify_resource_updated("mem://other")
        await seen.until(lambda: seen.updated)
        await client.unsubscribe("mem://hello")
        await server.notify_resource_updated("mem://hello")
        await anyio.sleep(0.05)
        assert len(server.notifier.listeners) == 1
    assert seen.changed == ["tools", "resources"]
    assert seen.updated == ["mem://hello"]
    await anyio.sleep(0.02)
    assert not server.notifier.listeners  # closing the client ended the stream


async def test_callback_failures_do_not_break_the_client(caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    server = make_server()

    def broken(kind: str) -> None:
        raise RuntimeError("callback bug")

    async with Client(
        server,
        era="legacy",
        notifications=Notifications(on_list_changed=broken),
    ) as client:
        await client.ping()
        await server.notify_list_changed("tools")
        await anyio.sleep(0.05)
        assert (await client.call_tool("add", {"a": 1, "b": 1})).structured_content == {
            "result": 2}
    assert "callback bug" in caplog.text


async def test_roots_changed_is_notified_in_legacy_only() -> None:
    for era in ("legacy", "modern"):
        transport = RecordingMemoryTransport(make_server())
        async with Client(
            transport,
            era=era,
            responders=Responders(roots=ROOTS),
        ) as client:
            await client.notify_roots_changed()
        sent = [m.get("method") for m in transport.sent]
        assert ("notifications/roots/list_changed" in sent) is (era == "legacy")


# --- timeouts and cancellation -------------------------------------------------------------


def slow_server() -> tuple[Server, list[str]]:
    server = Server("slow")
    events: list[str] = []

    @server.tool()
    async def slow() -> str:
        events.append("started")
        try:
            await anyio.sleep(30)
        except BaseException:
            events.append("cancelled")
            raise
        return "never"

    return server, events


async def test_timeout_cancels_the_request_on_the_server(era: str) -> None:
    from mcpkit.client import RequestTimeout

    server, events = slow_server()
    transport = RecordingMemoryTransport(server)
    async with Client(
        transport,
        era=era,
        timeouts=Timeouts(timeout=0.2),
    ) as client:
        with pytest.raises(RequestTimeout, match=r"timeout of 0\.2 s") as info:
            await client.call_tool("slow")
        assert info.value.method == "tools/call"
        await eventually(lambda: "cancelled" in events)
        call = transport.requests("tools/call")[0]
        cancels = [m for m in transport.sent if m.get("method") == "notifications/cancelled"]
        assert [c["params"]["requestId"] for c in cancels] == [call["id"]]
        assert "timeout" in cancels[0]["params"]["reason"]
        # a per-call timeout overrides the client's
        with pytest.raises(RequestTimeout, match=r"timeout of 0\.05 s"):
            await client.call_tool("slow", timeout=0.05)


async def test_caller_cancellation_cancels_the_request_on_the_server(era: str) -> None:
    server, events = slow_server()
    transport = RecordingMemoryTransport(server)
    async with Client(transport, era=era) as client:  # type: ignore[arg-type]
        with anyio.move_on_after(0.1):
            await client.call_tool("slow")
        await eventually(lambda: "cancelled" in events)
        cancels = [m for m in transport.sent if m.get("method") == "notifications/cancelled"]
        assert len(cancels) == 1
        assert cancels[0]["params"]["reason"] == "cancelled by the client"
        await client.ping()  # the connection is fine


# --- tasks (modern extension) --------------------------------------------------------------


def tasks_server() -> Server:
    from mcpkit.server import tasks

    server = Server("tasks")
    server.extensions[tasks.EXTENSION] = {}
    server.tasks.poll_interval_ms = 50

    async def slow(seconds: float) -> str:
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    async def broken() -> str:
        raise RuntimeError("boom")

    async def protocol_broken() -> str:
        raise errors.internal_error("deliberate")

    async def confirm(ctx: Context) -> str:
        answers = await ctx.ask_many({
            "a": ("elicitation/create", {"message": "A?", "requestedSchema": NAME_SCHEMA}),
            "b": ("elicitation/create", {"message": "B?", "requestedSchema": NAME_SCHEMA}),
        })
        return "+".join(str((v.get("content") or {}).get("name")) for v in answers.values())

    server.add_tool(slow, task_support="optional")
    server.add_tool(broken, task_support="required")
    server.add_tool(protocol_broken, task_support="required")
    server.add_tool(confirm, task_support="optional")
    return server


async def test_call_tool_follows_a_task_to_its_end() -> None:
    transport = RecordingMemoryTransport(tasks_server())
    async with Client(
        transport,
        behaviour=Behaviour(tasks=True),
        responders=Responders(elicitation=accept_name),
    ) as client:
        done = await client.call_tool("slow", {"seconds": 0.1})
        assert done.content[0].text == "slept 0.1"  # type: ignore[union-attr]
        confirmed = await client.call_tool("confirm")
        assert confirmed.content[0].text == "Ann+Ann"  # type: ignore[union-attr]
        failed = await client.call_tool("broken")
        assert failed.is_error is True
        with pytest.raises(ServerError) as info:
            await client.call_tool("protocol_broken")
        assert info.value.code == errors.INTERNAL_ERROR
    methods = [m.get("method") for m in transport.sent]
    assert "tasks/get" in methods and "tasks/update" in methods
    update = transport.requests("tasks/update")[0]["params"]
    assert set(update["inputResponses"]) == {"a", "b"}


async def test_a_task_given_up_is_cancelled_on_the_server() -> None:
    server = tasks_server()
    transport = RecordingMemoryTransport(server)
    async with Client(
        transport,
        behaviour=Behaviour(tasks=True),
        timeouts=Timeouts(maximum=0.3),
    ) as client:
        with pytest.raises(TimeoutError):
            await client.call_tool("slow", {"seconds": 30})
        cancels = transport.requests("tasks/cancel")
        assert len(cancels) == 1
        task_id = cancels[0]["params"]["taskId"]
        status = await client.get_task(task_id)
        assert status["status"] == "cancelled"


async def test_without_the_tasks_extension_tools_run_inline() -> None:
    transport = RecordingMemoryTransport(tasks_server())
    async with Client(transport) as client:
        done = await client.call_tool("slow", {"seconds": 0})
        assert done.content[0].text == "slept 0.0"  # type: ignore[union-attr]
    assert transport.requests("tasks/get") == []
