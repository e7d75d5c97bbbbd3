"""Headless Chromium for tests: Debian's `chromium` driven by Playwright with its executable
path set (browser downloads are not reachable here)."""

from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking"]
"""Flags for a headless run as any user, in a container, with nothing fetched in the background."""


def chromium_path() -> str:
    """Debian's chromium; skipped with the reason when it is absent - except in CI, where
    .ci/run installs it and its absence is a failure."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    problem = None if found else "chromium is not installed (bash scripts/install_browser.sh)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        problem = "playwright is not installed (pip install -e '.[dev]')"
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{problem}; .ci/run installs it")
        pytest.skip(problem)
    assert found is not None
    return found
