"""Pages from the console's Jinja2 templates (package data, templates/), autoescaped: a value
from the API or the user is text on the page, never markup."""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.responses import HTMLResponse

from mcpkit.hub.console.assets import Assets

PAGE_HEADERS = {
    "Cache-Control": "no-store",
    # own files only: no inline script, no third-party origin; no framing (clickjacking)
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'self' "
                               "http: https:",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
"""form-action allows other origins: "Connect" posts to the console, which redirects to the
upstream's authorization server."""


class Pages:
    def __init__(self, assets: Assets) -> None:
        self.env = Environment(loader=PackageLoader("mcpkit.hub.console", "templates"),
                               autoescape=select_autoescape(["html"]), trim_blocks=True,
                               lstrip_blocks=True)
        self.env.globals["static"] = assets.url

    def fragment(self, template: str, **values: Any) -> str:
        """A part of a page (no response around it), escaped as a page is."""
        return self.env.get_template(template).render(**values)

    def render(self, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        html = self.env.get_template(template).render(**values)
        return HTMLResponse(html, status_code=status, headers=PAGE_HEADERS)
