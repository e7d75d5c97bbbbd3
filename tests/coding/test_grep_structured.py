"""`grep` puts its answer in `structuredContent`, not only in the text: a client that shows
only structured content (fastmcp's does) must still see the matches.

The client here is the official Python SDK's `ClientSession` over stdio to a real
`mcpkit serve`, and the checks read nothing but `structuredContent`: from it alone the
matching lines, their context and the per-file counts are rebuilt and compared with the
files on disk. The text, checked separately, stays the readable `path:line:text` form.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

pytestmark = pytest.mark.anyio

FILES = {
    "a.py": "import os\nneedle = 1\nx = 2\n",
    "src/b.py": "def needle():\n    pass\n\n\nneedle()\n",
    "notes.txt": "nothing here\n",
}


@pytest.fixture(params=["ripgrep", "python"])
async def session(tmp_path: Path, request: pytest.FixtureRequest
                  ) -> AsyncIterator[ClientSession]:
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    env = dict(os.environ)
    env.pop("MCPKIT_GREP_ENGINE", None)
    if request.param == "python":
        env["MCPKIT_GREP_ENGINE"] = "python"
    params = StdioServerParameters(
        command=sys.executable, env=env,
        args=["-m", "mcpkit", "serve", "--transport", "stdio", "--workspace", str(tmp_path)])
    with anyio.fail_after(30):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            yield s


async def structured(session: ClientSession, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool("grep", arguments)
    assert not result.is_error
    assert result.structured_content is not None
    return result.structured_content


def expected_matches(pattern: str) -> list[tuple[str, int, str]]:
    found = []
    for rel in sorted(FILES):
        for number, line in enumerate(FILES[rel].splitlines(), 1):
            if pattern in line:
                found.append((rel, number, line))
    return found


async def test_content_mode_carries_the_matches(session: ClientSession) -> None:
    data = await structured(session, pattern="needle", output_mode="content")
    matches = [(d["path"], d["line"], d["text"]) for d in data["lines"] if d["match"]]
    assert matches == expected_matches("needle")
    assert data["total_matches"] == 3 and data["truncated"] is False


async def test_content_mode_carries_the_context(session: ClientSession) -> None:
    data = await structured(session, pattern="needle", output_mode="content", context=1,
                            path="src")
    lines = [(d["path"], d["line"], d["text"], d["match"]) for d in data["lines"]]
    assert lines == [
        ("src/b.py", 1, "def needle():", True), ("src/b.py", 2, "    pass", False),
        ("src/b.py", 4, "", False), ("src/b.py", 5, "needle()", True)]


async def test_count_mode_carries_the_counts(session: ClientSession) -> None:
    data = await structured(session, pattern="needle", output_mode="count")
    assert data["counts"] == [{"path": "a.py", "count": 1}, {"path": "src/b.py", "count": 2}]


async def test_the_text_stays_readable(session: ClientSession) -> None:
    result = await session.call_tool("grep", {"pattern": "needle", "output_mode": "content",
                                              "limit": 2})
    text = "".join(getattr(c, "text", "") for c in result.content)
    assert text.splitlines() == ["a.py:2:needle = 1", "src/b.py:1:def needle():",
                                 "(1 more matching lines not shown; narrow the search or "
                                 "raise limit)"]
    assert [d["text"] for d in (result.structured_content or {})["lines"]] == [
        "needle = 1", "def needle():"]
