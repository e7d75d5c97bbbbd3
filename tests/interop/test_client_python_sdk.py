"""mcpkit's `Client` drives a server written with the official Python SDK (`mcp` 2.x,
tests/interop/sdk_peer_server.py) over stdio, Streamable HTTP and HTTP+SSE.

The SDK serves both eras on one endpoint, so `auto` must pick the modern era there (sampling,
elicitation and roots then travel as `input_required` rounds); with `--legacy-only` (stdio, and
HTTP+SSE mounted at /mcp) it behaves like an SDK 1.x server and the client must detect the
legacy era by itself (on HTTP: fall back from Streamable HTTP to HTTP+SSE).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from mcpkit.client import (
    Behaviour,
    Client,
    ConnectOptions,
    IncompatibleServer,
    RequestTimeout,
    Responders,
    ServerError,
)
from mcpkit.client import era as era_cache
from mcpkit.protocol.errors import MISSING_REQUIRED_CLIENT_CAPABILITY
from mcpkit.protocol.versions import Era

from .client_peers import (
    LEGACY_VERSION,
    MODERN_VERSION,
    Answers,
    HttpPeer,
    PageSpy,
    http_peer,
    python_peer,
    text_of,
    until,
)
from .conftest import free_port

pytestmark = [pytest.mark.interop, pytest.mark.anyio]

LIMIT_S = 15.0
STDIO = python_peer("--transport", "stdio")
STDIO_LEGACY_ONLY = python_peer("--transport", "stdio", "--legacy-only")
ROOT_URI = "file:///tmp/interop-root"


@pytest.fixture(autouse=True)
def _fresh_era_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test detects eras from scratch (the client caches them per server)."""
    monkeypatch.setattr(era_cache, "_CACHE", {})


@pytest.fixture(scope="module")
def sdk_http() -> Iterator[str]:
    """The SDK peer on Streamable HTTP (both eras)."""
    with http_peer(python_peer("--transport", "http", "--port", "{port}")) as url:
        yield url


@pytest.fixture(scope="module")
def sdk_sse() -> Iterator[str]:
    """The SDK peer on HTTP+SSE at /sse (both eras on the SSE connection)."""
    with http_peer(python_peer("--transport", "sse", "--port", "{port}"), path="/sse") as url:
        yield url


@pytest.fixture(scope="module")
def sdk_sse_legacy_only() -> Iterator[str]:
    """An SDK-1.x-like server: HTTP+SSE only, its SSE stream at /mcp, handshake era only."""
    args = python_peer("--transport", "sse", "--legacy-only", "--sse-path", "/mcp",
                       "--port", "{port}")
    with http_peer(args) as url:
        yield url


def _client(target: Any, answers: Answers, **options: Any) -> Client:
    return Client(
        target,
        behaviour=Behaviour(log_level="info"),
        **answers.handlers(roots=[ROOT_URI]),
        **options,
    )


async def _exercise(client: Client, answers: Answers) -> None:
    """Everything the peer offers, through the typed API; the same in both eras."""
    assert client.server_info is not None and client.server_info.name == "sdk-peer"
    assert client.server_info.version == "1.2.3"
    assert client.instructions == "A test peer built on the mcp SDK."
    tools = {tool.name: tool for tool in await client.list_tools()}
    assert {"add", "count_slowly", "ask_model", "ask_user", "client_roots"} <= set(tools)
    assert tools["add"].input_schema["required"] == ["a", "b"]

    added = await client.call_tool("add", {"a": 2, "b": 3})
    assert text_of(added) == "5"
    assert added.structured_content == {"result": 5}

    progress: list[tuple[float, float | None, str | None]] = []
    counted = await client.call_tool(
        "count_slowly", {"steps": 3}, on_progress=lambda *p: progress.append(p))
    assert text_of(counted) == "counted to 3"
    await until(lambda: len(progress) == 3 and len(answers.logs) >= 3, "progress and logs")
    assert progress == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]
    assert [(log.level, log.logger, log.data) for log in answers.logs[:3]] == [
        ("info", "sdk-peer", f"step {i} of 3") for i in (1, 2, 3)]

    sampled = await client.call_tool("ask_model", {"question": "Capital of France?"})
    assert text_of(sampled) == "model interop-model said: Paris"
    assert len(answers.sampled) == 1
    assert answers.sampled[0].max_tokens == 50
    assert getattr(answers.sampled[0].messages[0].content, "text", None) == "Capital of France?"

    elicited = await client.call_tool("ask_user", {})
    assert text_of(elicited) == "hello Ada (36)"
    assert [e.message for e in answers.elicited] == ["Who are you?"]
    schema = answers.elicited[0].requested_schema
    assert isinstance(schema, dict) and schema["required"] == ["name"]

    assert text_of(await client.call_tool("client_roots", {})) == ROOT_URI

    spy = PageSpy(client, "resources/list")
    resources = await client.list_resources()
    assert [r.uri for r in resources] == ["sdk://greeting"] + [
        f"sdk://page-item/{n}" for n in range(1, 5)]
    assert len(spy.pages) == 3, "the peer lists 2 resources a page: every page must be followed"
    assert [bool(page.get("nextCursor")) for page in spy.pages] == [True, True, False]
    templates = await client.list_resource_templates()
    assert {t.uri_template for t in templates} == {"sdk://items/{item_id}", "sdk://signed/{doc}"}
    greeting = await client.read_resource("sdk://greeting")
    assert [(c.uri, c.text, c.mime_type) for c in greeting.contents] == [
        ("sdk://greeting", "Hello from the SDK", "text/plain")]
    item = await client.read_resource("sdk://items/7")
    assert item.contents[0].text == '{"id": "7"}'

    prompts = {prompt.name: prompt for prompt in await client.list_prompts()}
    assert [(a.name, a.required) for a in prompts["review"].arguments or []] == [
        ("code", True), ("language", False)]
    prompt = await client.get_prompt("review", {"code": "x = 1"})
    assert text_of(prompt) == "Review this python code: x = 1"
    assert prompt.messages[0].role == "user"
    completion = await client.complete({"type": "ref/prompt", "name": "review"}, "language", "p")
    assert completion.values == ["python", "perl", "php"]
    assert completion.total == 3
    await client.ping()


async def _run(target: Any, *, era: str, version: str, **options: Any) -> str:
    """Connect, check the era settled on, exercise everything; the transport kind used."""
    answers = Answers()
    with anyio.fail_after(LIMIT_S):
        async with _client(target, answers, era=era, **options) as client:
            assert client.era is (Era.MODERN if version == MODERN_VERSION else Era.LEGACY)
            assert client.protocol_version == version
            await _exercise(client, answers)
            return client.session.transport.kind


# --- era detection, over every transport the SDK offers -----------------------------------


async def test_stdio_legacy_only_server_is_detected_as_legacy() -> None:
    await _run(STDIO_LEGACY_ONLY, era="auto", version=LEGACY_VERSION)


async def test_stdio_dual_era_server_is_spoken_to_in_the_modern_era() -> None:
    await _run(STDIO, era="auto", version=MODERN_VERSION)


async def test_stdio_pinned_legacy() -> None:
    await _run(STDIO, era="legacy", version=LEGACY_VERSION)


async def test_stdio_pinned_modern_on_a_legacy_only_server_is_refused() -> None:
    with anyio.fail_after(LIMIT_S), pytest.raises(IncompatibleServer, match="modern"):
        async with Client(STDIO_LEGACY_ONLY, era="modern"):
            pass


async def test_streamable_http_auto_is_modern(sdk_http: str) -> None:
    assert await _run(sdk_http, era="auto", version=MODERN_VERSION) == "http"


async def test_streamable_http_pinned_legacy(sdk_http: str) -> None:
    await _run(sdk_http, era="legacy", version=LEGACY_VERSION)


async def test_http_falls_back_to_sse_for_a_legacy_only_server(sdk_sse_legacy_only: str) -> None:
    """The probe and `initialize` POSTs get 405: the client must try HTTP+SSE on the same
    URL (spec 2025-03-26, backwards compatibility) and speak the legacy era there."""
    assert await _run(sdk_sse_legacy_only, era="auto", version=LEGACY_VERSION) == "sse"


@pytest.mark.parametrize("era", ["auto", "legacy"])
async def test_sse_transport(sdk_sse: str, era: str) -> None:
    version = MODERN_VERSION if era == "auto" else LEGACY_VERSION
    assert await _run(sdk_sse, era=era, version=version,
                      connect=ConnectOptions(kind="sse")) == "sse"


@pytest.mark.parametrize("peer", ["stdio", "http"])
async def test_modern_input_rounds_on_prompts_and_resources(request: pytest.FixtureRequest,
                                                            peer: str) -> None:
    """prompts/get and resources/read may answer `input_required` too: the client answers
    the SDK's round and retries with `inputResponses` and the echoed `requestState`."""
    answers = Answers(form={"name": "Ada"})
    with anyio.fail_after(LIMIT_S):
        async with _client(_target(request, peer), answers, era="modern") as client:
            prompt = await client.get_prompt("signed_review", {"code": "x = 1"})
            assert text_of(prompt) == "Review of x = 1, signed by Ada"
            doc = await client.read_resource("sdk://signed/readme")
            assert [c.text for c in doc.contents] == ["readme signed by Ada"]
    assert [e.message for e in answers.elicited] == ["Sign as?", "Sign as?"]


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
@pytest.mark.parametrize("peer", ["stdio", "http"])
async def test_pinned_legacy_versions(request: pytest.FixtureRequest, peer: str,
                                      version: str) -> None:
    """Each handshake version is negotiated as asked; elicitation (2025-06-18 on) is only
    declared where it exists, and the SDK refuses the tool that needs it elsewhere."""
    answers = Answers()
    with anyio.fail_after(LIMIT_S):
        async with _client(_target(request, peer), answers, era=version) as client:
            assert client.era is Era.LEGACY
            assert client.protocol_version == version
            assert text_of(await client.call_tool("add", {"a": 1, "b": 2})) == "3"
            sampled = await client.call_tool("ask_model", {"question": "q"})
            assert text_of(sampled) == "model interop-model said: Paris"
            assert text_of(await client.call_tool("client_roots", {})) == ROOT_URI
            if version >= "2025-06-18":
                assert text_of(await client.call_tool("ask_user", {})) == "hello Ada (36)"
            else:
                with pytest.raises(ServerError) as refused:
                    await client.call_tool("ask_user", {})
                assert refused.value.code == MISSING_REQUIRED_CLIENT_CAPABILITY
                assert answers.elicited == []


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_declined_elicitation_and_missing_sampling(era: str) -> None:
    """A declined form aborts the SDK tool (an error result); without a sampling handler the
    client does not declare sampling and the SDK refuses the tool that needs it."""

    async def decline(params: Any) -> dict[str, Any]:
        return {"action": "decline"}

    with anyio.fail_after(LIMIT_S):
        async with Client(STDIO, era=era, responders=Responders(elicitation=decline)) as client:
            declined = await client.call_tool("ask_user", {})
            assert declined.is_error is True
            assert "elicitation was decline" in getattr(declined.content[0], "text", "")
            with pytest.raises(ServerError) as refused:
                await client.call_tool("ask_model", {"question": "q"})
            assert refused.value.code == MISSING_REQUIRED_CLIENT_CAPABILITY
            assert refused.value.data == {"requiredCapabilities": {"sampling": {}}}


# --- notifications -----------------------------------------------------------------------


def _target(request: pytest.FixtureRequest, peer: str) -> Any:
    return STDIO if peer == "stdio" else request.getfixturevalue("sdk_http")


@pytest.mark.parametrize("peer", ["stdio", "http"])
async def test_modern_listen_and_subscribe(request: pytest.FixtureRequest, peer: str) -> None:
    answers = Answers()
    name = f"tool_{uuid.uuid4().hex[:8]}"
    with anyio.fail_after(LIMIT_S):
        async with _client(_target(request, peer), answers, era="modern") as client:
            await client.listen()
            await client.subscribe("sdk://greeting")
            await client.call_tool("touch", {"uri": "sdk://greeting"})
            await until(lambda: answers.updated == ["sdk://greeting"], "resource updated")
            await client.call_tool("add_tool", {"name": name})
            await until(lambda: "tools" in answers.changed, "tools list_changed")
            assert name in {tool.name for tool in await client.list_tools()}
            assert text_of(await client.call_tool(name, {})) == name


@pytest.mark.parametrize("peer", ["stdio", "http"])
async def test_legacy_list_changed(request: pytest.FixtureRequest, peer: str) -> None:
    answers = Answers()
    name = f"tool_{uuid.uuid4().hex[:8]}"
    with anyio.fail_after(LIMIT_S):
        async with _client(_target(request, peer), answers, era="legacy") as client:
            await client.listen()  # nothing to open in the legacy era: the session carries them
            await client.call_tool("add_tool", {"name": name})
            await until(lambda: answers.changed == ["tools"], "tools list_changed")
            assert name in {tool.name for tool in await client.list_tools()}


# --- timeouts, cancellation, concurrency, headers ------------------------------------------


@pytest.mark.parametrize("era", ["modern", "legacy"])
@pytest.mark.parametrize("peer", ["stdio", "http"])
async def test_timeouts_and_cancellation(request: pytest.FixtureRequest, peer: str,
                                         era: str) -> None:
    """Progress restarts the idle timeout; the maximum time is hard; a request given up on
    (timeout or cancellation) leaves the connection usable."""
    slow = {"steps": 6, "interval": 0.1}
    with anyio.fail_after(LIMIT_S):
        async with Client(_target(request, peer), era=era) as client:
            progress: list[Any] = []
            done = await client.call_tool("count_slowly", slow, timeout=0.3,
                                          on_progress=lambda *p: progress.append(p))
            assert text_of(done) == "counted to 6"
            assert len(progress) == 6
            with pytest.raises(RequestTimeout, match="maximum time"):
                await client.call_tool("count_slowly", slow, timeout=0.3, max_timeout=0.25,
                                       on_progress=lambda *p: None)
            with pytest.raises(RequestTimeout, match=r"timeout of 0\.2 s"):
                await client.call_tool("count_slowly", slow, timeout=0.2)  # no progress token
            with anyio.move_on_after(0.1):
                await client.call_tool("count_slowly", slow)
            assert text_of(await client.call_tool("add", {"a": 1, "b": 1})) == "2"
            await anyio.sleep(0.7)  # the abandoned calls would have finished by now
            assert text_of(await client.call_tool("add", {"a": 2, "b": 2})) == "4"


@pytest.mark.parametrize(("peer", "era"), [
    ("stdio", "legacy"), ("stdio", "modern"), ("http", "modern"),
    ("http", "legacy"),
])
async def test_giving_up_on_a_call_cancels_its_sampling(request: pytest.FixtureRequest,
                                                        peer: str, era: str) -> None:
    """The client gives up on a call whose tool waits for sampling: the handler answering it
    must be cancelled too. Legacy: the SDK cancels the tool and sends notifications/cancelled
    for its sampling/createMessage. Modern: the handler runs inside the call's input round."""
    started, cancelled = anyio.Event(), anyio.Event()

    async def slow_sampling(params: Any) -> dict[str, Any]:
        started.set()
        try:
            await anyio.sleep(10)
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        return {"role": "assistant", "model": "m", "content": {"type": "text", "text": "late"}}

    with anyio.fail_after(LIMIT_S):
        async with Client(
            _target(request, peer),
            era=era,
            responders=Responders(sampling=slow_sampling),
        ) as client:
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "ask_model", {"question": "q"})
                await started.wait()
                tg.cancel_scope.cancel()
            with anyio.fail_after(2.0):
                await cancelled.wait()
            assert text_of(await client.call_tool("add", {"a": 1, "b": 1})) == "2"


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_concurrent_sampling_over_http(sdk_http: str, era: str) -> None:
    async def sampling(params: Any) -> dict[str, Any]:
        await anyio.sleep(0.02)
        question = params.messages[0].content.text
        return {"role": "assistant", "model": "m", "content": {"type": "text", "text": question}}

    results: dict[int, str] = {}
    with anyio.fail_after(LIMIT_S):
        async with Client(sdk_http, era=era, responders=Responders(sampling=sampling)) as client:

            async def one(i: int) -> None:
                results[i] = text_of(await client.call_tool("ask_model", {"question": f"q{i}"}))

            async with anyio.create_task_group() as tg:
                for i in range(20):
                    tg.start_soon(one, i)
    assert results == {i: f"model m said: q{i}" for i in range(20)}


@pytest.mark.parametrize("era", ["modern", "legacy"])
@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_custom_headers_and_bearer_token_reach_the_server(
    request: pytest.FixtureRequest, transport: str, era: str
) -> None:
    url = request.getfixturevalue("sdk_http" if transport == "http" else "sdk_sse")
    headers = {"X-Interop": "yes", "User-Agent": "interop-agent/1"}
    with anyio.fail_after(LIMIT_S):
        async with Client(
            url,
            era=era,
            bearer_token="s3cret",
            connect=ConnectOptions(kind=transport, headers=headers),
        ) as client:

            async def seen(name: str) -> str:
                return text_of(await client.call_tool("request_header", {"name": name}))

            assert await seen("x-interop") == "yes"
            assert await seen("authorization") == "Bearer s3cret"
            assert await seen("user-agent") == "interop-agent/1"
            if transport == "http":
                assert await seen("mcp-protocol-version") == client.protocol_version
                if era == "legacy":
                    assert await seen("mcp-session-id") != "-"
                else:
                    assert await seen("mcp-session-id") == "-"
                    assert await seen("mcp-method") == "tools/call"
                    assert await seen("mcp-name") == "request_header"


async def test_modern_http_headers_mirror_arguments_and_names(sdk_http: str) -> None:
    """The SDK checks `Mcp-Name`/`Mcp-Param-*` against the body (HTTP 400 on a mismatch):
    non-ASCII and edge-whitespace values must travel base64-wrapped the way it decodes."""
    with anyio.fail_after(LIMIT_S):
        async with Client(sdk_http, era="modern") as client:
            tools = {tool.name: tool for tool in await client.list_tools()}
            assert tools["greet"].input_schema["properties"]["region"]["x-mcp-header"] == "Region"
            for region in ("Köln", "  spaced ", "plain", "=?base64?eA==?=", "tab\there"):
                result = await client.call_tool("greet", {"region": region, "count": 3})
                assert text_of(result) == f"hello {region} x3"
            big = await client.call_tool("greet", {"region": "x", "count": 2**60})
            assert text_of(big) == f"hello x x{2**60}"
            for item_id in ("café", "a b", "ü ß"):
                read = await client.read_resource(f"sdk://items/{item_id}")
                assert read.contents[0].text == f'{{"id": "{item_id}"}}'


async def test_legacy_http_session_is_renewed_after_a_server_restart() -> None:
    """A restarted server forgets the session (HTTP 404): the client initializes a new one,
    retries the call, and reopens the standalone stream (list_changed arrives on it)."""
    peer = HttpPeer(python_peer("--transport", "http", "--port", "{port}"))
    answers = Answers()
    name = f"tool_{uuid.uuid4().hex[:8]}"
    await anyio.to_thread.run_sync(peer.start)
    try:
        with anyio.fail_after(LIMIT_S):
            async with _client(peer.url, answers, era="legacy") as client:
                assert text_of(await client.call_tool("add", {"a": 1, "b": 2})) == "3"
                await anyio.to_thread.run_sync(peer.stop)
                await anyio.to_thread.run_sync(peer.start)
                assert text_of(await client.call_tool("add", {"a": 1, "b": 3})) == "4"
                assert client.era is Era.LEGACY
                await client.call_tool("add_tool", {"name": name})
                await until(lambda: answers.changed == ["tools"], "tools list_changed")
    finally:
        await anyio.to_thread.run_sync(peer.stop)


# --- the era cache -------------------------------------------------------------------------


async def test_pinning_an_era_does_not_decide_it_for_auto_clients() -> None:
    """A pinned era says nothing about the server: it must not enter the era cache
    (regression: it did, and auto clients then spoke legacy to this modern server)."""
    with anyio.fail_after(LIMIT_S):
        async with Client(STDIO, era="legacy") as client:
            assert client.era is Era.LEGACY
        async with Client(STDIO) as client:
            assert client.era is Era.MODERN


async def test_a_cached_era_is_only_a_hint() -> None:
    """The server at a URL is replaced by a legacy-only one: the cached MODERN era must not
    act as a pin (regression: IncompatibleServer instead of falling back to legacy)."""
    port = free_port()
    with anyio.fail_after(LIMIT_S):
        with http_peer(python_peer("--transport", "http", "--port", "{port}"), port=port) as url:
            async with Client(url) as client:
                assert client.era is Era.MODERN
        legacy = python_peer("--transport", "sse", "--legacy-only", "--sse-path", "/mcp",
                             "--port", "{port}")
        with http_peer(legacy, port=port) as url:
            async with Client(url) as client:
                assert client.era is Era.LEGACY
