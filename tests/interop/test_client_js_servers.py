"""mcpkit's `Client` drives the reference servers built on the official TypeScript SDK:
`@modelcontextprotocol/server-everything` (stdio and Streamable HTTP) and
`@modelcontextprotocol/server-filesystem` (stdio only).

Both predate the modern era: the client must detect the legacy era by itself. They are installed
in tests/js/node_modules by scripts/install_js_peers.sh (CI runs it); without node or the
packages these tests are skipped.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpkit.client import Client, ConnectOptions, RequestTimeout, Responders, ServerError
from mcpkit.client import era as era_cache
from mcpkit.protocol import types
from mcpkit.protocol.versions import Era

from .client_peers import (
    EVERYTHING,
    FILESYSTEM,
    LEGACY_VERSION,
    Answers,
    PageSpy,
    http_peer,
    needs_node_package,
    node_peer,
    text_of,
    until,
)

pytestmark = [pytest.mark.interop, pytest.mark.anyio]
everything = needs_node_package(EVERYTHING)
filesystem = needs_node_package(FILESYSTEM)

LIMIT_S = 15.0
ROOT_URI = "file:///tmp/interop-root"
DOC_PREFIX = "demo://resource/static/document/"
TEXT_TEMPLATE = "demo://resource/dynamic/text/{resourceId}"


@pytest.fixture(autouse=True)
def _fresh_era_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(era_cache, "_CACHE", {})


@pytest.fixture(scope="module")
def everything_http() -> Iterator[str]:
    """server-everything in `streamableHttp` mode (it reads its port from $PORT)."""
    with http_peer(node_peer(EVERYTHING, "streamableHttp"), env={"PORT": "{port}"}) as url:
        yield url


@pytest.fixture(scope="module")
def everything_sse() -> Iterator[str]:
    """server-everything in `sse` mode (HTTP+SSE of 2024-11-05: GET /sse, POST /message)."""
    with http_peer(node_peer(EVERYTHING, "sse"), env={"PORT": "{port}"}, path="/sse") as url:
        yield url


@dataclass
class Where:
    """How to reach server-everything (`Client(**where.options)`) and the transport that
    must end up carrying the connection."""

    options: dict[str, Any]
    kind: str


@pytest.fixture(params=["stdio", "http", "sse", "sse-fallback"])
def everything_target(request: pytest.FixtureRequest) -> Where:
    """"sse-fallback" gives the SSE URL without naming the transport: the Streamable HTTP
    POSTs get 404 there and the client must fall back to HTTP+SSE by itself."""
    if request.param == "stdio":
        return Where({"target": node_peer(EVERYTHING, "stdio")}, "stdio")
    if request.param == "http":
        return Where({"target": request.getfixturevalue("everything_http")}, "http")
    url = request.getfixturevalue("everything_sse")
    kind = "sse" if request.param == "sse" else None
    return Where({"target": url, "connect": ConnectOptions(kind=kind)}, "sse")


def _everything(where: Where, answers: Answers, **options: Any) -> Client:
    return Client(
        **where.options,
        **answers.handlers(roots=[ROOT_URI], elicitation_modes=("form", "url")),
        **options,
    )


# --- server-everything ----------------------------------------------------------------------


@everything
async def test_everything_is_legacy_and_its_tools_work(everything_target: Where) -> None:
    answers = Answers()
    with anyio.fail_after(LIMIT_S):
        async with _everything(everything_target, answers) as client:
            assert client.session.transport.kind == everything_target.kind
            assert client.era is Era.LEGACY
            assert client.protocol_version == LEGACY_VERSION
            assert client.server_info is not None
            assert client.server_info.name == "mcp-servers/everything"
            assert client.server_info.title == "Everything Reference Server"
            assert client.instructions
            assert {"tools", "prompts", "resources", "logging"} <= set(client.server_capabilities)

            tools = {tool.name: tool for tool in await client.list_tools()}
            # The conditional tools are registered because the client declared sampling,
            # elicitation and roots in `initialize`.
            assert {"echo", "get-sum", "trigger-long-running-operation", "get-roots-list",
                    "trigger-sampling-request", "trigger-elicitation-request",
                    "get-structured-content"} <= set(tools)
            assert text_of(await client.call_tool("echo", {"message": "héllo"})) == "Echo: héllo"
            summed = await client.call_tool("get-sum", {"a": 40, "b": 2})
            assert text_of(summed) == "The sum of 40 and 2 is 42."
            # Declares an outputSchema: the client validates structuredContent against it.
            schema = tools["get-structured-content"].output_schema
            assert isinstance(schema, dict) and "temperature" in schema["properties"]
            weather = await client.call_tool("get-structured-content", {"location": "New York"})
            assert isinstance(weather.structured_content, dict)
            assert {"temperature", "conditions", "humidity"} <= set(weather.structured_content)

            image = await client.call_tool("get-tiny-image", {})
            assert [type(c).__name__ for c in image.content] == [
                "TextContent", "ImageContent", "TextContent"]
            png = image.content[1]
            assert isinstance(png, types.ImageContent) and png.mime_type == "image/png"
            assert base64.b64decode(png.data).startswith(b"\x89PNG")
            links = await client.call_tool("get-resource-links", {"count": 3})
            assert [type(c).__name__ for c in links.content] == ["TextContent"] + [
                "ResourceLink"] * 3
            embedded = await client.call_tool(
                "get-resource-reference", {"resourceType": "Blob", "resourceId": 2})
            resource = embedded.content[1]
            assert isinstance(resource, types.EmbeddedResource)
            assert resource.resource.uri == "demo://resource/dynamic/blob/2"
            assert base64.b64decode(resource.resource.blob or "").startswith(b"Resource 2:")


@everything
async def test_everything_progress(everything_target: Where) -> None:
    progress: list[tuple[float, float | None, str | None]] = []
    with anyio.fail_after(LIMIT_S):
        async with Client(**everything_target.options) as client:
            done = await client.call_tool(
                "trigger-long-running-operation", {"duration": 0.3, "steps": 3},
                on_progress=lambda *p: progress.append(p), timeout=0.5)
            assert text_of(done).startswith("Long running operation completed.")
            await until(lambda: len(progress) == 3, "3 progress notifications")
            # Given up on (cancelled, then timed out): the connection stays usable.
            with anyio.move_on_after(0.2):
                await client.call_tool("trigger-long-running-operation",
                                       {"duration": 5, "steps": 5})
            with pytest.raises(RequestTimeout):
                await client.call_tool("trigger-long-running-operation",
                                       {"duration": 5, "steps": 50}, timeout=0.2)
            assert text_of(await client.call_tool("echo", {"message": "still here"})) == (
                "Echo: still here")
    assert progress == [(1.0, 3.0, None), (2.0, 3.0, None), (3.0, 3.0, None)]


@everything
async def test_everything_sampling_elicitation_and_roots(everything_target: Where) -> None:
    answers = Answers(form={"name": "Ada Lovelace", "check": True})
    with anyio.fail_after(LIMIT_S):
        async with _everything(everything_target, answers) as client:
            sampled = await client.call_tool(
                "trigger-sampling-request", {"prompt": "Capital of France?", "maxTokens": 20})
            assert '"text": "Paris"' in text_of(sampled)
            assert len(answers.sampled) == 1
            asked = answers.sampled[0]
            assert asked.max_tokens == 20
            assert asked.system_prompt == "You are a helpful test server."
            assert getattr(asked.messages[0].content, "text", "").endswith("Capital of France?")

            elicited = await client.call_tool("trigger-elicitation-request", {})
            assert "Name: Ada Lovelace" in text_of(elicited)
            form = answers.elicited[0]
            assert isinstance(form.requested_schema, dict)
            assert "name" in form.requested_schema["properties"]

            url = await client.call_tool(
                "trigger-url-elicitation", {"url": "https://example.com/consent",
                                            "elicitationId": "e-1"})
            assert "URL: https://example.com/consent" in text_of(url)
            assert (answers.elicited[1].mode, answers.elicited[1].url) == (
                "url", "https://example.com/consent")
            with pytest.raises(ServerError) as raised:  # URLElicitationRequiredError
                await client.call_tool("trigger-url-elicitation", {
                    "url": "https://example.com/other", "errorPath": True})
            assert raised.value.code == -32042
            assert raised.value.data["elicitations"][0]["mode"] == "url"

            roots = await client.call_tool("get-roots-list", {})
            assert f"URI: {ROOT_URI}" in text_of(roots)


@everything
async def test_everything_resources_prompts_and_completion(everything_target: Where) -> None:
    with anyio.fail_after(LIMIT_S):
        async with Client(**everything_target.options) as client:
            spy = PageSpy(client, "resources/list")
            resources = await client.list_resources()
            assert spy.pages, "resources/list was not called"
            assert not spy.pages[-1].get("nextCursor")
            if any(page.get("nextCursor") for page in spy.pages[:-1]):
                assert len(spy.pages) > 1
            assert len(resources) == sum(len(page["resources"]) for page in spy.pages)
            uris = [r.uri for r in resources]
            assert f"{DOC_PREFIX}features.md" in uris
            assert all(uri.startswith(DOC_PREFIX) for uri in uris)
            doc = await client.read_resource(f"{DOC_PREFIX}features.md")
            assert doc.contents[0].mime_type == "text/markdown"
            assert "# Everything Server - Features" in (doc.contents[0].text or "")

            templates = {t.uri_template for t in await client.list_resource_templates()}
            assert TEXT_TEMPLATE in templates
            text = await client.read_resource("demo://resource/dynamic/text/7")
            assert (text.contents[0].text or "").startswith("Resource 7: This is a plaintext")
            blob = await client.read_resource("demo://resource/dynamic/blob/3")
            assert base64.b64decode(blob.contents[0].blob or "").startswith(b"Resource 3:")

            prompts = {p.name for p in await client.list_prompts()}
            assert {"simple-prompt", "args-prompt", "completable-prompt",
                    "resource-prompt"} <= prompts
            assert text_of(await client.get_prompt("simple-prompt")) != ""
            assert text_of(await client.get_prompt("args-prompt", {"city": "Paris"})) == (
                "What's weather in Paris?")
            with_resource = await client.get_prompt(
                "resource-prompt", {"resourceType": "Text", "resourceId": "5"})
            embedded = with_resource.messages[1].content
            assert isinstance(embedded, types.EmbeddedResource)
            assert embedded.resource.uri == "demo://resource/dynamic/text/5"

            prompt_ref = {"type": "ref/prompt", "name": "completable-prompt"}
            department = await client.complete(prompt_ref, "department", "E")
            assert department.values == ["Engineering"]
            names = await client.complete(prompt_ref, "name", "", context={"department": "Sales"})
            assert names.values == ["David", "Eve", "Frank"]
            resource_ref = {"type": "ref/resource", "uri": TEXT_TEMPLATE}
            assert (await client.complete(resource_ref, "resourceId", "3")).values == ["3"]
            assert (await client.complete(resource_ref, "resourceId", "x")).values == []
            await client.ping()


@everything
async def test_everything_logging_subscriptions_and_list_changed(everything_target: Where) -> None:
    """Over HTTP these notifications are not tied to a request: they arrive on the
    standalone GET stream the client opened after `initialize`."""
    answers = Answers()
    uri = f"{DOC_PREFIX}features.md"
    name = f"blob-{uuid.uuid4().hex[:8]}.gz"
    with anyio.fail_after(LIMIT_S):
        async with _everything(everything_target, answers) as client:
            await client.set_logging_level("debug")
            await client.call_tool("toggle-simulated-logging", {})
            await until(lambda: any(log.data != "" and "message" in str(log.data).lower()
                                    for log in answers.logs), "a simulated log message")
            await client.call_tool("toggle-simulated-logging", {})

            await client.subscribe(uri)
            await client.call_tool("toggle-subscriber-updates", {})
            await until(lambda: uri in answers.updated, f"notifications/resources/updated {uri}")
            await client.call_tool("toggle-subscriber-updates", {})
            await client.unsubscribe(uri)

            answers.changed.clear()
            created = await client.call_tool("gzip-file-as-resource", {
                "name": name, "data": "data:text/plain;base64,aGVsbG8=",
                "outputType": "resourceLink"})
            link = created.content[0]
            assert isinstance(link, types.ResourceLink)
            assert link.uri == f"demo://resource/session/{name}"
            await until(lambda: "resources" in answers.changed, "resources list_changed")
            assert link.uri in {r.uri for r in await client.list_resources()}
            gz = await client.read_resource(link.uri)
            assert gz.contents[0].mime_type == "application/gzip"


@everything
async def test_everything_tasks(everything_target: Where) -> None:
    """The 2025-11-25 tasks API: a task-augmented tools/call, then tasks/get, tasks/list and
    tasks/cancel (the research task takes seconds; it is cancelled, not awaited)."""
    with anyio.fail_after(LIMIT_S):
        async with Client(**everything_target.options) as client:
            tasks = client.server_capabilities.get("tasks")
            assert isinstance(tasks, dict) and "cancel" in tasks
            created = await client.request("tools/call", {
                "name": "simulate-research-query", "arguments": {"topic": "mcp"},
                "task": {"ttl": 60000}})
            task_id = created["task"]["taskId"]
            assert created["task"]["status"] == "working"
            assert (await client.get_task(task_id))["status"] in ("working", "input_required")
            assert task_id in {task["taskId"] for task in await client.list_tasks()}
            assert (await client.cancel_task(task_id))["status"] == "cancelled"
            assert (await client.get_task(task_id))["status"] == "cancelled"


@everything
async def test_stdio_env_adds_to_a_minimal_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """`env` is merged over PATH, HOME, …; the rest of this process's environment (where
    secrets live) is not passed on unless `inherit_env=True`."""
    monkeypatch.setenv("MCPKIT_FAKE_API_TOKEN", "s3cret")
    with anyio.fail_after(LIMIT_S):
        async with Client(
            node_peer(EVERYTHING, "stdio"),
            connect=ConnectOptions(env={"MCPKIT_INTEROP": "yes"}),
        ) as client:
            env = json.loads(text_of(await client.call_tool("get-env", {})))
        async with Client(
            node_peer(EVERYTHING, "stdio"),
            connect=ConnectOptions(inherit_env=True),
        ) as client:
            inherited = json.loads(text_of(await client.call_tool("get-env", {})))
    assert env["MCPKIT_INTEROP"] == "yes"
    assert "PATH" in env and "HOME" in env
    assert "MCPKIT_FAKE_API_TOKEN" not in env
    assert inherited["MCPKIT_FAKE_API_TOKEN"] == "s3cret"


# --- server-filesystem ----------------------------------------------------------------------


def _text(result: types.CallToolResult) -> str:
    assert isinstance(result.structured_content, dict), result
    return str(result.structured_content["content"])


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A fresh directory, symlinks resolved (the server reports resolved paths)."""
    return tmp_path.resolve()


@filesystem
async def test_filesystem_tools_in_an_allowed_directory(root: Path) -> None:
    with anyio.fail_after(LIMIT_S):
        async with Client(node_peer(FILESYSTEM, str(root))) as client:
            assert client.era is Era.LEGACY
            assert client.protocol_version == LEGACY_VERSION
            assert client.server_info is not None
            assert client.server_info.name == "secure-filesystem-server"
            tools = {tool.name for tool in await client.list_tools()}
            assert {"read_text_file", "write_file", "edit_file", "list_directory",
                    "create_directory", "list_allowed_directories"} <= tools

            note = root / "notes" / "hello.txt"
            await client.call_tool("create_directory", {"path": str(note.parent)})
            wrote = await client.call_tool(
                "write_file", {"path": str(note), "content": "hello\nwörld\n"})
            assert _text(wrote) == f"Successfully wrote to {note}"
            assert note.read_text("utf-8") == "hello\nwörld\n"
            assert _text(await client.call_tool("read_text_file", {"path": str(note)})) == (
                "hello\nwörld\n")
            edited = await client.call_tool("edit_file", {
                "path": str(note), "edits": [{"oldText": "hello", "newText": "bonjour"}]})
            assert "+bonjour" in _text(edited)
            assert note.read_text("utf-8") == "bonjour\nwörld\n"
            (root / "other.bin").write_bytes(b"\0")
            listing = _text(await client.call_tool("list_directory", {"path": str(root)}))
            assert sorted(listing.splitlines()) == ["[DIR] notes", "[FILE] other.bin"]

            outside = await client.call_tool("read_text_file", {"path": "/etc/hostname"})
            assert outside.is_error is True
            assert "outside allowed directories" in text_of_error(outside)


def text_of_error(result: types.CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


@filesystem
async def test_filesystem_started_in_a_working_directory(root: Path) -> None:
    """`cwd=`: the server resolves its relative directory argument against it."""
    (root / "here.txt").write_text("found")
    with anyio.fail_after(LIMIT_S):
        async with Client(
            node_peer(FILESYSTEM, "."),
            connect=ConnectOptions(cwd=str(root)),
        ) as client:
            read = await client.call_tool("read_text_file", {"path": str(root / "here.txt")})
            assert _text(read) == "found"
            allowed = _text(await client.call_tool("list_allowed_directories", {}))
            assert allowed == f"Allowed directories:\n{root}"


@filesystem
async def test_filesystem_takes_its_directories_from_the_client_roots(root: Path) -> None:
    """Started without directories, the server asks the client for roots after `initialize`
    and again after `notifications/roots/list_changed`."""
    first, second = root / "first", root / "second"
    first.mkdir()
    second.mkdir()
    roots: list[str] = [first.as_uri()]
    asked = 0

    async def current_roots() -> list[dict[str, Any]]:
        nonlocal asked
        asked += 1
        return [{"uri": uri, "name": "workspace"} for uri in roots]

    async def allowed(client: Client) -> str:
        return _text(await client.call_tool("list_allowed_directories", {}))

    with anyio.fail_after(LIMIT_S):
        async with Client(
            node_peer(FILESYSTEM),
            responders=Responders(roots=current_roots),
        ) as client:
            await until(lambda: asked >= 1, "the server's roots/list")
            for _ in range(100):
                if str(first) in await allowed(client):
                    break
                await anyio.sleep(0.02)
            assert await allowed(client) == f"Allowed directories:\n{first}"
            (first / "a.txt").write_text("in first")
            read = await client.call_tool("read_text_file", {"path": str(first / "a.txt")})
            assert _text(read) == "in first"

            roots[:] = [second.as_uri()]
            await client.notify_roots_changed()
            await until(lambda: asked >= 2, "a second roots/list")
            for _ in range(100):
                if str(second) in await allowed(client):
                    break
                await anyio.sleep(0.02)
            assert await allowed(client) == f"Allowed directories:\n{second}"
            refused = await client.call_tool("read_text_file", {"path": str(first / "a.txt")})
            assert refused.is_error is True
