"""The console's static files (one style sheet, one script), served from the package under
versioned names - `/console/static/console.<hash>.css`, the hash of the file's content - so
they can be cached for a year (`immutable`): a new release has new names. No CDN, no build
step; the files are package data (pyproject's wheel includes src/mcpkit/hub/console)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

from starlette.responses import Response

STATIC_PREFIX = "/console/static/"
FILES = {"console.css": "text/css; charset=utf-8",
         "console.js": "text/javascript; charset=utf-8"}
CACHE_FOREVER = "public, max-age=31536000, immutable"


@dataclass(frozen=True, slots=True)
class Asset:
    name: str
    content: bytes
    media_type: str

    @property
    def versioned(self) -> str:
        stem, _, suffix = self.name.rpartition(".")
        digest = hashlib.sha256(self.content).hexdigest()[:12]
        return f"{stem}.{digest}.{suffix}"


def load_assets() -> dict[str, Asset]:
    """name -> asset, read once from the package."""
    folder = resources.files("mcpkit.hub.console") / "static"
    return {name: Asset(name, (folder / name).read_bytes(), media_type)
            for name, media_type in FILES.items()}


class Assets:
    def __init__(self) -> None:
        self._by_name = load_assets()
        self._by_versioned = {asset.versioned: asset for asset in self._by_name.values()}

    def url(self, name: str) -> str:
        """The versioned URL templates link to."""
        return STATIC_PREFIX + self._by_name[name].versioned

    def response(self, versioned: str) -> Response:
        asset = self._by_versioned.get(versioned)
        if asset is None:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response(asset.content, media_type=asset.media_type,
                        headers={"Cache-Control": CACHE_FOREVER,
                                 "X-Content-Type-Options": "nosniff"})
