"""A small test-only server written with the official Python SDK (`mcp` 2.x, `MCPServer`), for
tests/interop/test_client_python_sdk.py: the mcpkit `Client` drives it.

    python tests/interop/sdk_peer_server.py --transport stdio [--legacy-only]
    python tests/interop/sdk_peer_server.py --transport http --port N

The SDK serves both eras on one connection ("dual era": the client's first request decides).
`--legacy-only` (stdio) serves the handshake era alone, like an SDK 1.x server: a modern
probe is refused with "method not found", so a client must fall back to `initialize`.

Sampling, elicitation and roots are asked with the SDK's `Resolve(...)` markers, which use the
negotiated era's mechanism: server→client requests in the legacy era, `input_required`
rounds (MRTR) in the modern one.
"""

from __future__ import annotations

import argparse
import warnings
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import (
    Context,
    Elicit,
    ListRoots,
    MCPServer,
    Resolve,
    Sample,
)
from mcp.server.mcpserver.resources import TextResource
from mcp.types import (
    Completion,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ListResourcesResult,
    ListRootsResult,
    PaginatedRequestParams,
    PromptReference,
    SamplingMessage,
    TextContent,
)
from pydantic import BaseModel, Field

warnings.simplefilter("ignore")  # the SDK flags logging/sampling/roots as deprecated in 2026

MODERN = "2026-07-28"
PAGE_SIZE = 2
mcp = MCPServer("sdk-peer", version="1.2.3", instructions="A test peer built on the mcp SDK.")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@mcp.tool()
async def count_slowly(steps: int, ctx: Context, interval: float = 0.01) -> str:
    """Reports progress `steps` times, `interval` seconds apart, and logs each step."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
        await ctx.info(f"step {i} of {steps}", logger_name="sdk-peer")
        await anyio.sleep(interval)
    return f"counted to {steps}"


def _ask_model(question: str) -> Sample:
    return Sample(
        [SamplingMessage(role="user", content=TextContent(type="text", text=question))],
        max_tokens=50,
    )


@mcp.tool()
def ask_model(question: str,
              answer: Annotated[CreateMessageResult, Resolve(_ask_model)]) -> str:
    """Asks the client's model a question (sampling)."""
    content = answer.content
    text = content.text if isinstance(content, TextContent) else "?"
    return f"model {answer.model} said: {text}"


class Person(BaseModel):
    name: str
    age: int = 0


def _ask_person() -> Elicit[Person]:
    return Elicit("Who are you?", Person)


@mcp.tool()
def ask_user(person: Annotated[Person, Resolve(_ask_person)]) -> str:
    """Asks the user who they are (elicitation)."""
    return f"hello {person.name} ({person.age})"


def _roots() -> ListRoots:
    return ListRoots()


@mcp.tool()
def client_roots(roots: Annotated[ListRootsResult, Resolve(_roots)]) -> str:
    """Lists the client's roots."""
    return ",".join(str(root.uri) for root in roots.roots)


@mcp.tool()
def greet(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    count: Annotated[int, Field(json_schema_extra={"x-mcp-header": "Count"})] = 1,
) -> str:
    """Arguments mirrored into Mcp-Param-* headers (modern HTTP)."""
    return f"hello {region} x{count}"


@mcp.tool()
def request_header(name: str, ctx: Context) -> str:
    """The value of HTTP request header `name` as the server saw it ("-" if absent)."""
    return (ctx.headers or {}).get(name.lower(), "-")


@mcp.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Adds a tool called `name` and tells the client its tool list changed."""
    mcp.add_tool(lambda: name, name=name, description="A tool added at run time.")
    if ctx.protocol_version == MODERN:
        await ctx.notify_tools_changed()  # the subscriptions/listen stream
    else:
        await ctx.session.send_tool_list_changed()
    return f"added {name}"


@mcp.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Tells subscribers that resource `uri` changed (modern: on subscriptions/listen)."""
    await ctx.notify_resource_updated(uri)
    return f"touched {uri}"


@mcp.resource("sdk://greeting", mime_type="text/plain")
def greeting() -> str:
    """A fixed greeting."""
    return "Hello from the SDK"


@mcp.resource("sdk://items/{item_id}", mime_type="application/json")
def item(item_id: str) -> str:
    """One item, by id."""
    return f'{{"id": "{item_id}"}}'


@mcp.prompt()
def review(code: str, language: str = "python") -> str:
    """Asks for a code review."""
    return f"Review this {language} code: {code}"


def _ask_signature() -> InputRequiredResult:
    form = ElicitRequestFormParams(
        message="Sign as?",
        requested_schema={"type": "object", "properties": {"name": {"type": "string"}},
                          "required": ["name"]},
    )
    return InputRequiredResult(input_requests={"who": ElicitRequest(params=form)},
                               request_state="round-1")


def _signature(ctx: Context) -> str | None:
    answer = (ctx.input_responses or {}).get("who")
    if not isinstance(answer, ElicitResult) or ctx.request_state != "round-1":
        return None
    return str((answer.content or {}).get("name"))


@mcp.prompt()
def signed_review(code: str, ctx: Context) -> str | InputRequiredResult:
    """Modern only: asks who signs the review with a hand-made input_required round."""
    name = _signature(ctx)
    return _ask_signature() if name is None else f"Review of {code}, signed by {name}"


@mcp.resource("sdk://signed/{doc}", mime_type="text/plain")
def signed_doc(doc: str, ctx: Context) -> str | InputRequiredResult:
    """Modern only: a resource read that needs an input_required round first."""
    name = _signature(ctx)
    return _ask_signature() if name is None else f"{doc} signed by {name}"


@mcp.completion()
async def complete(ref: Any, argument: Any, context: Any) -> Completion | None:
    if isinstance(ref, PromptReference) and argument.name == "language":
        values = [v for v in ("python", "perl", "php", "rust") if v.startswith(argument.value)]
        return Completion(values=values, total=len(values), has_more=False)
    return None


for _n in range(1, 5):
    mcp.add_resource(TextResource(uri=f"sdk://page-item/{_n}", name=f"page-item-{_n}",
                                  text=f"item {_n}", mime_type="text/plain"))


async def _paged_resources(ctx: Any, params: PaginatedRequestParams) -> ListResourcesResult:
    """resources/list in pages of PAGE_SIZE (the SDK lists everything at once by default)."""
    everything = await mcp.list_resources()
    start = int(params.cursor or 0)
    end = start + PAGE_SIZE
    return ListResourcesResult(resources=everything[start:end],
                               next_cursor=str(end) if end < len(everything) else None)


mcp._lowlevel_server.add_request_handler("resources/list", PaginatedRequestParams,
                                         _paged_resources)


async def _serve_legacy_only(read: Any, write: Any) -> None:
    """Serve one connection in the handshake era only (what an SDK 1.x server does)."""
    from mcp.server.runner import serve_loop

    server = mcp._lowlevel_server
    async with server.lifespan(server) as state:
        await serve_loop(server, read, write, lifespan_state=state,
                         init_options=server.create_initialization_options())


async def _legacy_only_stdio() -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await _serve_legacy_only(read, write)


def _legacy_only_sse_app(sse_path: str) -> Any:
    """HTTP+SSE (2024-11-05) only, handshake era only: GET `sse_path`, POST /messages/."""
    from mcp.server.sse import SseServerTransport
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    sse = SseServerTransport("/messages/")

    async def handle_sse(request: Request) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as (read, write):
            await _serve_legacy_only(read, write)
        return Response()

    return Starlette(routes=[
        Route(sse_path, endpoint=handle_sse, methods=["GET"]),
        Mount("/messages/", app=sse.handle_post_message),
    ])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=("stdio", "http", "sse"), default="stdio")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--legacy-only", action="store_true")
    parser.add_argument("--sse-path", default="/sse")
    args = parser.parse_args()
    if args.transport == "stdio":
        if args.legacy_only:
            anyio.run(_legacy_only_stdio)
        else:
            mcp.run("stdio")
        return
    import uvicorn

    if args.transport == "http":
        app = mcp.streamable_http_app()
    elif args.legacy_only:
        app = _legacy_only_sse_app(args.sse_path)
    else:
        app = mcp.sse_app(sse_path=args.sse_path)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
