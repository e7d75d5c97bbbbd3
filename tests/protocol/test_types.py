"""Tests of the generated ``mcpkit.protocol.types`` against the MCP schemas and their examples."""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mcpkit.protocol import types as t

#: The spec's schemas: $MCPKIT_SPEC_DIR, else ../shared/spec/schema beside the repository (where
#: CI has them). Not on any package registry, so not fetched at test time; see SPEC_HINT.
SPEC_DIR = Path(os.environ.get("MCPKIT_SPEC_DIR")
                or Path(__file__).parents[2].parent / "shared" / "spec" / "schema")
SPEC_HINT = ("git clone --depth 1 https://github.com/modelcontextprotocol/modelcontextprotocol "
             "../shared/spec  (or set MCPKIT_SPEC_DIR to its schema/ folder)")
VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
LEGACY = VERSIONS[:-1]
LATEST = VERSIONS[-1]
EXAMPLES_DIR = SPEC_DIR / LATEST / "examples"

needs_spec = pytest.mark.skipif(
    not all((SPEC_DIR / v / "schema.json").is_file() for v in VERSIONS),
    reason=f"the MCP spec's schemas are not in {SPEC_DIR}; bring them in: {SPEC_HINT}",
)

#: Definitions intentionally not exported (name -> reason).  Empty: everything is modelled.
NOT_MODELLED: dict[str, str] = {}


@cache
def schema(version: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((SPEC_DIR / version / "schema.json").read_text("utf-8"))
    return doc


def defs(version: str) -> dict[str, Any]:
    doc = schema(version)
    result: dict[str, Any] = doc.get("$defs") or doc["definitions"]
    return result


def defs_key(version: str) -> str:
    return "$defs" if "$defs" in schema(version) else "definitions"


@cache
def validator_for(version: str, pointer: str) -> Any:
    """A Draft 2020-12 validator for ``pointer`` (a definition name or a JSON pointer)."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    uri = f"urn:mcp-schema:{version}"
    contents = {k: v for k, v in schema(version).items() if k != "$schema"}
    registry: Registry[Any] = Registry().with_resource(
        uri, Resource.from_contents(contents, default_specification=DRAFT202012)
    )
    ref = pointer if pointer.startswith("/") else f"/{defs_key(version)}/{pointer}"
    return Draft202012Validator({"$ref": f"{uri}#{ref}"}, registry=registry)


def assert_valid(version: str, pointer: str, instance: Any) -> None:
    errors = [e.message for e in validator_for(version, pointer).iter_errors(instance)]
    assert not errors, f"{version} {pointer}: {errors}"


def to_json(obj: Any) -> Any:
    return json.loads(msgspec.json.encode(obj))


def union_refs(version: str, name: str) -> list[str]:
    """Definition names a union definition (or a plain $ref / single message) stands for."""
    d = defs(version).get(name)
    if d is None:
        return []
    if "anyOf" in d:
        return [m["$ref"].rsplit("/", 1)[-1] for m in d["anyOf"]]
    if "$ref" in d:
        return [d["$ref"].rsplit("/", 1)[-1]]
    return [name]  # 2026-07-28 ClientNotification is the cancelled notification itself


def method_of(version: str, name: str) -> str:
    method: str = defs(version)[name]["properties"]["method"]["const"]
    return method


# ------------------------------------------------------------------------------ 1. coverage


@needs_spec
@pytest.mark.parametrize("version", VERSIONS)
def test_every_definition_is_exported(version: str) -> None:
    missing = [
        name
        for name in defs(version)
        if name not in NOT_MODELLED and (name not in t.__all__ or not hasattr(t, name))
    ]
    assert not missing


@needs_spec
def test_definition_versions_table_matches_schemas() -> None:
    expected: dict[str, set[str]] = {}
    for v in VERSIONS:
        for name in defs(v):
            expected.setdefault(name, set()).add(v)
    assert {k: set(v) for k, v in t.DEFINITION_VERSIONS.items()} == expected


def test_all_is_complete_and_public() -> None:
    assert len(t.__all__) == len(set(t.__all__))
    for name in t.__all__:
        assert not name.startswith("_")
        assert hasattr(t, name), name
    assert "McpModel" in t.__all__


def struct_classes() -> list[type[msgspec.Struct]]:
    return [
        obj
        for name in t.__all__
        if isinstance(obj := getattr(t, name), type) and issubclass(obj, msgspec.Struct)
    ]


def test_struct_conventions() -> None:
    classes = struct_classes()
    assert len(classes) > 150
    for cls in classes:
        assert issubclass(cls, t.McpModel), cls
        assert not cls.__struct_config__.forbid_unknown_fields, cls
        if cls.__struct_fields__:
            with pytest.raises(TypeError):  # keyword-only
                cls("positional")
        if "meta" in cls.__struct_fields__:
            idx = cls.__struct_fields__.index("meta")
            assert cls.__struct_encode_fields__[idx] == "_meta", cls
        assert cls.__doc__ and cls.__doc__.strip(), cls


def test_every_struct_and_decodable_alias_builds_a_decoder() -> None:
    for cls in struct_classes():
        msgspec.json.Decoder(cls)  # raises TypeError on an invalid union
    aliases = [n for n in t.__all__ if n not in {c.__name__ for c in struct_classes()}]
    for name in aliases:
        obj = getattr(t, name)
        if name.isupper() or name == "McpModel":
            continue  # tables
        if name in t.UNDECODABLE_UNIONS:
            with pytest.raises(TypeError):
                msgspec.json.Decoder(obj)
        else:
            msgspec.json.Decoder(obj)


def test_meta_keeps_its_wire_name_and_unset_is_omitted() -> None:
    block = t.TextContent(text="hi", meta={"k": 1})
    assert to_json(block) == {"type": "text", "text": "hi", "_meta": {"k": 1}}
    assert to_json(t.TextContent(text="hi")) == {"type": "text", "text": "hi"}
    decoded = msgspec.json.decode(b'{"type":"text","text":"x","_meta":{"a":2}}', type=t.TextContent)
    assert decoded.meta == {"a": 2}
    meta = msgspec.convert(
        {
            "io.modelcontextprotocol/protocolVersion": LATEST,
            "io.modelcontextprotocol/clientCapabilities": {},
            "progressToken": 7,
        },
        t.RequestMetaObject,
    )
    assert meta.protocol_version == LATEST and meta.progress_token == 7
    assert to_json(meta)["io.modelcontextprotocol/protocolVersion"] == LATEST


def test_unknown_fields_are_ignored() -> None:
    tool = msgspec.convert(
        {"name": "x", "inputSchema": {"type": "object"}, "future": 1}, t.Tool, strict=False
    )
    assert tool.name == "x"


def test_consts_are_always_written() -> None:
    assert to_json(t.JSONRPCRequest(id=1, method="ping")) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "ping",
    }
    assert to_json(t.InternalError(message="boom")) == {"code": -32603, "message": "boom"}
    assert to_json(t.StringSchema(title="Name")) == {"type": "string", "title": "Name"}
    url = t.ElicitRequestURLParams(message="m", url="https://x")
    assert to_json(url) == {"mode": "url", "message": "m", "url": "https://x"}
    # jsonrpc is optional on the method-specific structs (absent in older schemas and in
    # 2026-07-28 input requests): written only when set; the method is the tag.
    assert to_json(t.PingRequest(id=1)) == {"method": "ping", "id": 1}
    assert to_json(t.PingRequest(id=1, jsonrpc="2.0"))["jsonrpc"] == "2.0"
    assert t.PingRequest.__struct_config__.tag == "ping"


# ------------------------------------------------------------------------------ 2. examples


def example_files() -> list[Any]:
    if not EXAMPLES_DIR.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(
            reason=f"the MCP spec's examples are not in {EXAMPLES_DIR}; "
                   f"bring them in: {SPEC_HINT}"))]
    return [
        pytest.param(path, id=f"{path.parent.name}/{path.stem}")
        for path in sorted(EXAMPLES_DIR.glob("*/*.json"))
    ]


@pytest.mark.parametrize("path", example_files())
def test_example_round_trips_and_validates(path: Path) -> None:
    raw = path.read_bytes()
    cls = getattr(t, path.parent.name)
    decoded = msgspec.json.decode(raw, type=cls)
    if isinstance(cls, type) and issubclass(cls, msgspec.Struct):
        assert type(decoded) is cls
    again = msgspec.json.encode(decoded)
    assert json.loads(again) == json.loads(raw)
    assert msgspec.convert(json.loads(raw), cls) == decoded
    assert_valid(LATEST, path.parent.name, json.loads(again))


@needs_spec
def test_input_responses_convert_by_the_method_of_their_request() -> None:
    requests = msgspec.json.decode(
        next((EXAMPLES_DIR / "InputRequests").glob("*.json")).read_bytes(), type=t.InputRequests
    )
    responses = msgspec.json.decode(
        next((EXAMPLES_DIR / "InputResponses").glob("*.json")).read_bytes(), type=t.InputResponses
    )
    assert set(requests) == set(responses)
    for key, request in requests.items():
        method = type(request).__struct_config__.tag
        assert method in t.INPUT_REQUESTS
        result_type = t.REQUEST_RESULTS[method]
        converted = msgspec.convert(responses[key], result_type)
        assert isinstance(converted, result_type)
        assert to_json(converted) == responses[key]


# ------------------------------------------------------------------------------ 3. validation


def implementation() -> t.Implementation:
    return t.Implementation(name="mcpkit-test", version="1.0.0")


@needs_spec
def test_validator_really_validates() -> None:
    with pytest.raises(AssertionError):
        assert_valid(LATEST, "Tool", {"name": "no-input-schema"})
    with pytest.raises(AssertionError):
        assert_valid("2024-11-05", "/definitions/InitializeRequest/properties/params", {})


@needs_spec
def test_initialize_2024_11_05() -> None:
    params = t.InitializeRequestParams(
        protocol_version="2024-11-05",
        capabilities=t.ClientCapabilities(
            roots=t.ClientCapabilitiesRoots(list_changed=True),
            sampling=t.ClientCapabilitiesSampling(),
        ),
        client_info=implementation(),
    )
    encoded = to_json(params)
    assert encoded["clientInfo"] == {"name": "mcpkit-test", "version": "1.0.0"}
    assert encoded["capabilities"]["sampling"] == {}
    assert_valid("2024-11-05", "/definitions/InitializeRequest/properties/params", encoded)
    assert_valid("2024-11-05", "InitializeRequest", to_json(t.InitializeRequest(params=params)))
    result = t.InitializeResult(
        protocol_version="2024-11-05",
        capabilities=t.ServerCapabilities(
            logging={},
            tools=t.ServerCapabilitiesTools(list_changed=True),
            resources=t.ServerCapabilitiesResources(subscribe=True, list_changed=False),
            prompts=t.ServerCapabilitiesPrompts(),
        ),
        server_info=implementation(),
        instructions="Be nice.",
    )
    encoded = to_json(result)
    assert encoded["capabilities"]["prompts"] == {}
    assert_valid("2024-11-05", "InitializeResult", encoded)
    assert msgspec.convert(encoded, t.InitializeResult) == result


@needs_spec
def test_initialize_2025_11_25() -> None:
    params = t.InitializeRequestParams(
        protocol_version="2025-11-25",
        capabilities=t.ClientCapabilities(
            elicitation=t.ClientCapabilitiesElicitation(form={}, url={}),
            sampling=t.ClientCapabilitiesSampling(tools={}),
            tasks=t.ClientCapabilitiesTasks(
                list_={},
                requests=t.ClientCapabilitiesTasksRequests(
                    sampling=t.ClientCapabilitiesTasksRequestsSampling(create_message={})
                ),
            ),
        ),
        client_info=t.Implementation(
            name="c",
            version="2",
            title="Client",
            icons=[t.Icon(src="https://x/i.png", mime_type="image/png", sizes=["48x48"])],
            website_url="https://example.com",
        ),
        meta={"progressToken": "p1"},
    )
    encoded = to_json(params)
    assert encoded["capabilities"]["tasks"]["list"] == {}
    assert encoded["clientInfo"]["websiteUrl"] == "https://example.com"
    assert_valid("2025-11-25", "InitializeRequestParams", encoded)
    message = to_json(t.InitializeRequest(id="init-1", jsonrpc="2.0", params=params))
    assert message["jsonrpc"] == "2.0"
    assert_valid("2025-11-25", "InitializeRequest", message)
    assert isinstance(msgspec.convert(message, t.ClientRequest), t.InitializeRequest)
    result = t.InitializeResult(
        protocol_version="2025-11-25",
        capabilities=t.ServerCapabilities(
            completions={},
            tasks=t.ServerCapabilitiesTasks(
                cancel={},
                requests=t.ServerCapabilitiesTasksRequests(
                    tools=t.ServerCapabilitiesTasksRequestsTools(call={})
                ),
            ),
        ),
        server_info=implementation(),
    )
    assert_valid("2025-11-25", "InitializeResult", to_json(result))


@needs_spec
def test_call_tool_result_with_structured_content_2025_06_18() -> None:
    result = t.CallToolResult(
        content=[
            t.TextContent(text='{"temperature": 22.5}'),
            t.ResourceLink(uri="file:///a.txt", name="a.txt", title="A"),
        ],
        structured_content={"temperature": 22.5},
        is_error=False,
    )
    encoded = to_json(result)
    assert encoded["structuredContent"] == {"temperature": 22.5}
    assert_valid("2025-06-18", "CallToolResult", encoded)
    back = msgspec.convert(encoded, t.CallToolResult)
    assert back == result
    assert [type(b) for b in back.content] == [t.TextContent, t.ResourceLink]


@needs_spec
def test_legacy_shapes_validate() -> None:
    # 2024-11-05: tool, resources (text + blob), prompt with embedded resource, JSON-RPC error.
    tool = t.Tool(
        name="add",
        description="Add numbers",
        input_schema={"type": "object", "properties": {"a": {"type": "number"}}},
    )
    assert_valid("2024-11-05", "Tool", to_json(tool))
    contents = t.ReadResourceResult(
        contents=[
            t.TextResourceContents(uri="file:///a", text="hello", mime_type="text/plain"),
            t.BlobResourceContents(uri="file:///b", blob="aGk="),
        ]
    )
    encoded = to_json(contents)
    assert_valid("2024-11-05", "ReadResourceResult", encoded)
    decoded = msgspec.convert(encoded, t.ReadResourceResult)
    assert [c.text for c in decoded.contents] == ["hello", msgspec.UNSET]
    assert [c.blob for c in decoded.contents] == [msgspec.UNSET, "aGk="]
    prompt = t.GetPromptResult(
        messages=[
            t.PromptMessage(
                role="user",
                content=t.EmbeddedResource(
                    resource=t.TextResourceContents(uri="file:///a", text="x"),
                    annotations=t.Annotations(audience=["user"], priority=0.5),
                ),
            )
        ]
    )
    assert_valid("2024-11-05", "GetPromptResult", to_json(prompt))
    error = t.JSONRPCError(id=3, error=t.Error(code=-32601, message="Method not found"))
    assert_valid("2024-11-05", "JSONRPCError", to_json(error))
    ping = to_json(t.PingRequest(id=4, jsonrpc="2.0"))
    assert_valid("2024-11-05", "PingRequest", ping)
    assert_valid("2025-11-25", "PingRequest", ping)
    assert_valid("2025-03-26", "JSONRPCRequest", ping)
    progress = t.ProgressNotification(
        jsonrpc="2.0",
        params=t.ProgressNotificationParams(progress_token="tok", progress=1, total=2, message="m"),
    )
    assert_valid("2025-03-26", "ProgressNotification", to_json(progress))
    assert_valid("2025-11-25", "ProgressNotification", to_json(progress))


@needs_spec
def test_elicitation_and_sampling_legacy_shapes_validate() -> None:
    form = t.ElicitRequestFormParams(
        message="Name?",
        requested_schema={
            "type": "object",
            "properties": {"name": msgspec.to_builtins(t.StringSchema(title="Name"))},
            "required": ["name"],
        },
    )
    request = to_json(t.ElicitRequest(params=form))
    assert "mode" not in request["params"]
    assert_valid("2025-06-18", "ElicitRequest", request)
    assert_valid("2025-11-25", "ElicitRequestFormParams", request["params"])
    with_mode = to_json(t.ElicitRequest(id=1, jsonrpc="2.0", params=form))
    with_mode["params"]["mode"] = "form"
    assert_valid("2025-11-25", "ElicitRequest", with_mode)
    assert_valid(LATEST, "ElicitRequest", request)
    url = t.ElicitRequestURLParams(
        message="Sign in", url="https://example.com/auth", elicitation_id="e-1"
    )
    assert_valid("2025-11-25", "ElicitRequestURLParams", to_json(url))
    assert_valid(
        "2025-11-25", "ElicitResult", to_json(t.ElicitResult(action="accept", content={"n": ["a"]}))
    )
    sampling = t.CreateMessageRequestParams(
        max_tokens=100,
        messages=[
            t.SamplingMessage(role="user", content=t.TextContent(text="What is 2+2?")),
            t.SamplingMessage(
                role="assistant",
                content=[t.ToolUseContent(id="u1", name="calc", input={"expr": "2+2"})],
            ),
            t.SamplingMessage(
                role="user",
                content=[t.ToolResultContent(tool_use_id="u1", content=[t.TextContent(text="4")])],
            ),
        ],
        tools=[t.Tool(name="calc", input_schema={"type": "object"})],
        tool_choice=t.ToolChoice(mode="auto"),
        task=t.TaskMetadata(ttl=1000),
    )
    assert_valid("2025-11-25", "CreateMessageRequestParams", to_json(sampling))
    old = t.CreateMessageResult(
        role="assistant", model="m", content=t.ImageContent(data="aGk=", mime_type="image/png")
    )
    assert_valid("2024-11-05", "CreateMessageResult", to_json(old))


@needs_spec
def test_tasks_2025_11_25_validate() -> None:
    task = {
        "taskId": "t1",
        "status": "working",
        "createdAt": "2025-11-25T10:00:00Z",
        "lastUpdatedAt": "2025-11-25T10:00:01Z",
        "ttl": None,
    }
    result = msgspec.convert(task, t.GetTaskResult)
    assert result.ttl is None
    assert_valid("2025-11-25", "GetTaskResult", to_json(result))
    created = t.CreateTaskResult(task=msgspec.convert(task, t.Task))
    assert_valid("2025-11-25", "CreateTaskResult", to_json(created))
    status = t.TaskStatusNotification(params=msgspec.convert(task, t.TaskStatusNotificationParams))
    assert_valid("2025-11-25", "TaskStatusNotification", to_json(status))
    get = t.GetTaskRequest(id=1, params=t.GetTaskRequestParams(task_id="t1"))
    assert_valid("2025-11-25", "GetTaskRequest", to_json(get))


HAND_WRITTEN_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "urn:example:order",
    "type": "object",
    "$defs": {"item": {"$anchor": "item", "type": "object", "required": ["sku"]}},
    "properties": {
        "items": {"type": "array", "items": {"$ref": "#item"}},
        "express": {"type": "boolean", "x-mcp-header": "X-Express"},
        "country": {"enum": ["US", "CA"]},
    },
    "if": {"properties": {"country": {"const": "US"}}},
    "then": {"required": ["zip"]},
    "else": {"required": ["postalCode"]},
    "additionalProperties": False,
    "oneOf": [{"required": ["items"]}, {"required": ["sku"]}],
}


def test_json_schema_fields_are_kept_verbatim() -> None:
    tool = {
        "name": "order",
        "inputSchema": HAND_WRITTEN_SCHEMA,
        "outputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array"},
    }
    decoded = msgspec.convert(tool, t.Tool)
    assert decoded.input_schema == HAND_WRITTEN_SCHEMA
    assert to_json(decoded) == tool
    elicit = {"message": "m", "requestedSchema": {"type": "object", "properties": {}, "x": 1}}
    assert (
        to_json(msgspec.convert(elicit, t.ElicitRequestFormParams))["requestedSchema"]
        == (elicit["requestedSchema"])
    )


# ------------------------------------------------------------------------------ 4. tagged unions


def test_mixed_content_blocks_decode_to_the_right_classes() -> None:
    blocks = [
        {"type": "text", "text": "t"},
        {"type": "image", "data": "aGk=", "mimeType": "image/png"},
        {"type": "audio", "data": "aGk=", "mimeType": "audio/wav"},
        {"type": "resource_link", "uri": "file:///x", "name": "x"},
        {"type": "resource", "resource": {"uri": "file:///y", "blob": "aGk="}},
    ]
    decoded = msgspec.json.decode(json.dumps(blocks), type=list[t.ContentBlock])
    assert [type(b) for b in decoded] == [
        t.TextContent,
        t.ImageContent,
        t.AudioContent,
        t.ResourceLink,
        t.EmbeddedResource,
    ]
    assert to_json(decoded) == blocks
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert([{"type": "video", "data": "x"}], list[t.ContentBlock])
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert([{"text": "no type"}], list[t.ContentBlock])
    with pytest.raises(msgspec.ValidationError):  # tool_use is sampling-only
        msgspec.convert({"type": "tool_use", "id": "1", "name": "n", "input": {}}, t.ContentBlock)


def test_sampling_content_single_or_list() -> None:
    single = msgspec.convert(
        {"role": "assistant", "content": {"type": "tool_use", "id": "1", "name": "n", "input": {}}},
        t.SamplingMessage,
    )
    assert isinstance(single.content, t.ToolUseContent)
    many = msgspec.convert(
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "toolUseId": "1",
                    "content": [{"type": "text", "text": "r"}],
                },
                {"type": "text", "text": "and"},
            ],
        },
        t.SamplingMessage,
    )
    assert isinstance(many.content, list)
    assert [type(c) for c in many.content] == [t.ToolResultContent, t.TextContent]


def test_other_tagged_unions() -> None:
    ref = msgspec.convert(
        {
            "ref": {"type": "ref/resource", "uri": "file:///{p}"},
            "argument": {"name": "p", "value": "a"},
        },
        t.CompleteRequestParams,
    )
    assert isinstance(ref.ref, t.ResourceTemplateReference)
    assert t.ResourceReference is t.ResourceTemplateReference


def test_elicitation_params_either_struct() -> None:
    schema = {"type": "object", "properties": {}}
    url = msgspec.convert(
        {"mode": "url", "message": "m", "url": "https://x"}, t.ElicitRequestParams
    )
    assert url.mode == "url" and url.url == "https://x"
    form = msgspec.convert(
        {"mode": "form", "message": "m", "requestedSchema": schema}, t.ElicitRequestParams
    )
    assert form.mode == "form" and form.requested_schema == schema
    # Without ``mode`` (2025-06-18, and allowed for forms later): still decodes, means "form".
    legacy = {"message": "m", "requestedSchema": schema}
    decoded = msgspec.convert(legacy, t.ElicitRequestParams)
    assert decoded.mode is msgspec.UNSET and to_json(decoded) == legacy
    strict_form = msgspec.convert(legacy, t.ElicitRequestFormParams)
    assert isinstance(strict_form, t.ElicitRequestParams)
    strict_url = msgspec.convert(to_json(url), t.ElicitRequestURLParams)
    assert strict_url.mode == "url"
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"message": "m"}, t.ElicitRequestURLParams)  # url + mode required
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"mode": "carrier-pigeon", "message": "m"}, t.ElicitRequestParams)
    request = t.ElicitRequest(params=t.ElicitRequestURLParams(message="m", url="https://x"))
    assert to_json(request)["params"]["mode"] == "url"


def test_whole_messages_decode_through_the_method_tag() -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"x": 1}, "_meta": {"progressToken": 1}},
    }
    decoded = msgspec.convert(call, t.ClientRequest)
    assert isinstance(decoded, t.CallToolRequest)
    assert decoded.params.arguments == {"x": 1}
    assert to_json(decoded) == call
    note = msgspec.convert(
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, t.ServerNotification
    )
    assert isinstance(note, t.ToolListChangedNotification)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"jsonrpc": "2.0", "id": 1, "method": "nope"}, t.ClientRequest)
    inputs = msgspec.convert(
        {
            "a": {"method": "roots/list"},
            "b": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}},
        },
        t.InputRequests,
    )
    assert isinstance(inputs["a"], t.ListRootsRequest)
    assert isinstance(inputs["b"], t.CreateMessageRequest)


# ------------------------------------------------------------------------------ 5. method tables


@needs_spec
@pytest.mark.parametrize(
    ("table", "union"),
    [
        ("CLIENT_REQUESTS", "ClientRequest"),
        ("SERVER_REQUESTS", "ServerRequest"),
        ("CLIENT_NOTIFICATIONS", "ClientNotification"),
        ("SERVER_NOTIFICATIONS", "ServerNotification"),
        ("INPUT_REQUESTS", "InputRequest"),
    ],
)
def test_direction_tables_match_the_schemas(table: str, union: str) -> None:
    expected: dict[str, set[str]] = {}
    for v in VERSIONS:
        for member in union_refs(v, union):
            expected.setdefault(method_of(v, member), set()).add(v)
    assert {k: set(vs) for k, vs in getattr(t, table).items()} == expected


def test_method_table_spot_checks() -> None:
    assert t.VERSIONS == VERSIONS
    assert t.CLIENT_REQUESTS["tools/call"] == frozenset(VERSIONS)
    assert t.CLIENT_REQUESTS["server/discover"] == {LATEST}
    assert t.CLIENT_REQUESTS["subscriptions/listen"] == {LATEST}
    assert t.CLIENT_REQUESTS["initialize"] == frozenset(LEGACY)
    assert t.CLIENT_REQUESTS["ping"] == frozenset(LEGACY)
    assert t.CLIENT_REQUESTS["logging/setLevel"] == frozenset(LEGACY)
    assert t.SERVER_REQUESTS["sampling/createMessage"] == frozenset(LEGACY)
    assert t.SERVER_REQUESTS["roots/list"] == frozenset(LEGACY)
    assert t.SERVER_REQUESTS["elicitation/create"] == {"2025-06-18", "2025-11-25"}
    assert t.CLIENT_REQUESTS["tasks/get"] == {"2025-11-25"}
    assert not any(LATEST in vs for vs in t.SERVER_REQUESTS.values())
    assert t.INPUT_REQUESTS.keys() == {"sampling/createMessage", "roots/list", "elicitation/create"}
    assert t.CLIENT_NOTIFICATIONS["notifications/initialized"] == frozenset(LEGACY)
    assert t.SERVER_NOTIFICATIONS["notifications/subscriptions/acknowledged"] == {LATEST}
    assert t.REQUEST_PARAMS["tools/call"] is t.CallToolRequestParams
    assert t.REQUEST_RESULTS["tools/call"] is t.CallToolResult
    assert t.REQUEST_RESULTS["server/discover"] is t.DiscoverResult
    assert t.REQUEST_RESULTS["ping"] is t.EmptyResult is t.Result
    assert t.REQUEST_PARAMS["elicitation/create"] is t.ElicitRequestParams
    assert isinstance(t.ElicitRequestParams, type)
    assert t.NOTIFICATION_PARAMS["notifications/progress"] is t.ProgressNotificationParams
    assert t.REQUEST_TYPES["initialize"] is t.InitializeRequest


@needs_spec
def test_type_tables_cover_every_method_and_agree_with_the_schemas() -> None:
    requests = set(t.CLIENT_REQUESTS) | set(t.SERVER_REQUESTS) | set(t.INPUT_REQUESTS)
    notifications = set(t.CLIENT_NOTIFICATIONS) | set(t.SERVER_NOTIFICATIONS)
    assert set(t.REQUEST_PARAMS) == set(t.REQUEST_RESULTS) == set(t.REQUEST_TYPES) == requests
    assert set(t.NOTIFICATION_PARAMS) == set(t.NOTIFICATION_TYPES) == notifications
    for v in VERSIONS:
        for union in ("ClientRequest", "ServerRequest", "InputRequest"):
            for member in union_refs(v, union):
                method = method_of(v, member)
                assert t.REQUEST_TYPES[method].__name__ == member
                params = defs(v)[member]["properties"].get("params", {})
                if "$ref" in params:  # named params definition in this version
                    assert _name(t.REQUEST_PARAMS[method]) == params["$ref"].rsplit("/", 1)[-1]
        for union in ("ClientNotification", "ServerNotification"):
            for member in union_refs(v, union):
                method = method_of(v, member)
                params = defs(v)[member]["properties"].get("params", {})
                if "$ref" in params:
                    assert t.NOTIFICATION_PARAMS[method].__name__ == params["$ref"].rsplit("/")[-1]
    # 2026-07-28 spells out method -> result in its ...ResultResponse definitions.
    for name, d in defs(LATEST).items():
        if name.endswith("ResultResponse") and not name.startswith("JSONRPC"):
            method = method_of(LATEST, name.removesuffix("ResultResponse") + "Request")
            result = d["properties"]["result"]
            refs = [m["$ref"] for m in result.get("anyOf", [result])]
            assert t.REQUEST_RESULTS[method].__name__ in {r.rsplit("/", 1)[-1] for r in refs}
    # every result type is a member of the result union of the answering side, in some version
    for method, result in t.REQUEST_RESULTS.items():
        if result is t.EmptyResult:
            continue
        union = "ServerResult" if method in t.CLIENT_REQUESTS else "ClientResult"
        members = {m for v in VERSIONS for m in union_refs(v, union)}
        assert _name(result) in members, method


def _name(tp: Any) -> str:
    """Class name, or the alias name for the few table entries that are aliases."""
    for name in t.__all__:
        if getattr(t, name) is tp:
            return name
    raise AssertionError(tp)


# ------------------------------------------------------------------------------ printing


def test_no_struct_prints_unset() -> None:
    """What a user prints (a server's info, a tool, a result) never shows the UNSET marker of
    an absent field: every struct omits its defaults from its repr."""
    assert all(cls.__struct_config__.repr_omit_defaults for cls in struct_classes())
    info = t.Implementation(name="demo", version="1.0.0")
    assert repr(info) == "Implementation(name='demo', version='1.0.0')"
    result = msgspec.convert({"content": [{"type": "text", "text": "3"}]}, t.CallToolResult)
    assert "UNSET" not in repr(result)
    assert "UNSET" not in str([msgspec.convert({"name": "add", "inputSchema": {
        "type": "object"}}, t.Tool)])
