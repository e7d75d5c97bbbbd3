"""`/docs`: Swagger UI over the hub's `/openapi.json`, its script, style sheet and icon served
by the hub itself (`/docs/assets/…`) rather than from a CDN, so the page renders on a machine
with no internet access - where a hub often runs.

The assets come from the `fastapi-offline` wheel (a dependency of the `hub` extra): a copy of
Swagger UI 5 (OpenAPI 3.1, which FastAPI writes) kept current with its releases. Only its files
are used, through FastAPI's own `get_swagger_ui_html`, the documented way to self-host them.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

DOCS_URL = "/docs"
ASSETS_URL = "/docs/assets"
ASSET_NAMES = ("swagger-ui-bundle.js", "swagger-ui.css", "favicon.png")


def assets_directory() -> Path:
    """Where the installed `fastapi-offline` keeps Swagger UI's files."""
    return Path(str(files("fastapi_offline") / "static"))


def install_docs(app: FastAPI, openapi_url: str) -> None:
    """Serve Swagger UI at `/docs` (not in the OpenAPI document) and its assets below it."""
    app.mount(ASSETS_URL, StaticFiles(directory=assets_directory()), name="docs-assets")

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = str(request.scope.get("root_path", ""))  # behind a proxy's prefix
        return get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - API docs",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
        )
