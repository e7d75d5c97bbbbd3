"""The hub's REST API (FastAPI): `create_app(settings)` is the ASGI app `mcpkit hub serve`
runs. Needs the `hub` extra; nothing here is imported by `mcpkit` itself.

    app.py        create_app: lifespan (store, key, components), routers, mounts (/mcp)
    context.py    HubContext (settings, store, box, DNS and upstream-client seams)
    settings      mcpkit.hub.settings.HubSettings (CLI + MCPKIT_HUB_* environment)
    auth.py       bearer token → user (401 / 403)
    schemas.py    request and response bodies (pydantic → OpenAPI)
    errors.py     the one error shape and its handlers; OpenAPI error responses
    limits.py     body size (413) and content type (415), before any route reads
    ssrf.py       the URL host check at registration
    views.py      records → bodies, secrets masked
    paging.py     pages of in-memory lists (tools, tokens)
    routes/       upstreams.py, admin.py, me.py, health.py
"""

from mcpkit.hub.api.app import Component, create_app
from mcpkit.hub.api.context import HubContext

__all__ = ["Component", "HubContext", "create_app"]
