"""The console's templates and static files ship in the wheel (package data), so `pip install`
alone serves them: a wheel is built from this checkout with hatchling (the project's build
backend) and its file list checked against the package's console folder."""

from __future__ import annotations

import zipfile
from pathlib import Path

from tests.hub.hub_helpers import ROOT

CONSOLE = ROOT / "src" / "mcpkit" / "hub" / "console"


def test_the_wheel_carries_every_template_and_static_file(tmp_path: Path) -> None:
    from hatchling.builders.wheel import WheelBuilder

    built = list(WheelBuilder(str(ROOT)).build(directory=str(tmp_path), versions=["standard"]))
    assert len(built) == 1
    with zipfile.ZipFile(built[0]) as wheel:
        shipped = set(wheel.namelist())
    wanted = {f"mcpkit/hub/console/{path.relative_to(CONSOLE).as_posix()}"
              for folder in ("templates", "static") for path in (CONSOLE / folder).iterdir()}
    assert {"mcpkit/hub/console/templates/base.html",
            "mcpkit/hub/console/static/console.css",
            "mcpkit/hub/console/static/console.js"} <= wanted
    assert wanted <= shipped, sorted(wanted - shipped)
