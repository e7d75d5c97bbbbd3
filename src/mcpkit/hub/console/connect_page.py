"""GET /console/connect: copy-paste snippets pointing MCP clients at this hub's /mcp (the
hub's public URL from its settings), for OAuth and for an API token (client_snippets.py)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from mcpkit.hub.console.client_snippets import TOKEN_VARIABLE, snippets
from mcpkit.hub.console.page_kit import console, hub_context, signed

CONNECT_PAGE = "/console/connect"


async def connect(request: Request) -> Response:
    found = await signed(request)
    if isinstance(found, Response):
        return found
    mcp_url = hub_context(request).settings.mcp_url
    return console().page(request, "connect.html", signed=found, mcp_url=mcp_url,
                          token_variable=TOKEN_VARIABLE, snippets=snippets(mcp_url))


PAGES = [(CONNECT_PAGE, connect, "GET")]
