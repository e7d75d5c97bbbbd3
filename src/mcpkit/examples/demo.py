"""The example server of the README's "Writing a server": what `mcpkit example` runs.

The code below, from `from typing import Annotated` to `server.run_stdio()`, is the README's
snippet verbatim (tests/test_readme.py checks it), so what a newcomer reads is what
`mcpkit example` serves: tools `add` and `greet`, the resources `docs://index` and
`docs://{topic}`, and the prompt `review`.
"""

from typing import Annotated

from mcpkit import Context, Server

server = Server("demo", "1.0.0", instructions="Adds numbers and greets people.")


@server.tool()
async def add(a: int, b: int) -> int:
    """Add two numbers."""          # the docstring is the description
    return a + b                    # structured output: outputSchema from the return type


@server.tool(annotations={"readOnlyHint": True})
async def greet(name: Annotated[str, "Who to greet"], ctx: Context) -> str:
    """Greet someone, asking the user how."""
    await ctx.report_progress(50, 100)
    answer = await ctx.elicit("Formal or casual?", {
        "type": "object", "properties": {"style": {"type": "string"}}, "required": ["style"],
    })
    return f"Hello, {name} ({answer.get('content', {}).get('style', 'casual')})"


@server.resource("docs://index")
def index() -> str:
    return "Topics: install, serve, client"


@server.resource("docs://{topic}")
def docs(topic: str) -> str:
    return f"Documentation about {topic}"


@server.prompt()
def review(code: str) -> str:
    return f"Please review:\n{code}"


if __name__ == "__main__":
    server.run_stdio()             # or: server.run_http(port=8000); or mount server.asgi_app()
