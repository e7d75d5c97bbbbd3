"""A tool's result as "Try a tool" shows it (hub/console/result_view.py and the
_tool_result.html template): each content type, and hostile results - huge text, SVG and
other non-raster images, broken base64, odd shapes - bounded and never markup."""

from __future__ import annotations

import base64
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.hub.console.page_kit import console
from mcpkit.hub.console.result_view import (
    MAX_BLOCKS,
    MAX_IMAGE_BYTES,
    MAX_TEXT_CHARS,
    result_view,
)
from mcpkit.hub.console.tool_calls import Outcome

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()


def rendered(result: dict[str, Any]) -> str:
    outcome = Outcome(result, None, 0.25)
    return console().pages.fragment("_tool_result.html", outcome=outcome,
                                    view=result_view(result))


def test_each_content_type() -> None:
    view = result_view({"content": [
        {"type": "text", "text": "hello"},
        {"type": "image", "mimeType": "image/png", "data": PNG},
        {"type": "audio", "mimeType": "audio/wav", "data": "AAAA"},
        {"type": "resource_link", "uri": "file:///a.txt", "name": "a"},
        {"type": "resource", "resource": {"uri": "note://x", "text": "inside"}},
        {"type": "resource", "resource": {"uri": "note://y", "blob": "AAAA"}},
        {"type": "future", "x": 1},
    ], "structuredContent": {"n": 1}})
    kinds = [(block.kind, block.label) for block in view.blocks]
    assert kinds == [("text", "Text"), ("image", "Image (image/png, 24 bytes)"),
                     ("note", "Audio"), ("note", "Resource link"),
                     ("text", "Resource note://x"), ("note", "Resource"),
                     ("json", "Content"), ("json", "Structured content")]
    assert view.blocks[1].src == f"data:image/png;base64,{PNG}"
    assert not view.is_error and '"n": 1' in view.raw.text


def test_hostile_results_are_bounded_and_never_markup() -> None:
    svg = base64.b64encode(b"<svg onload=alert(1)></svg>").decode()
    big = "A" * (MAX_IMAGE_BYTES * 4 // 3 + 8)
    result = {"isError": True, "content": [
        {"type": "text", "text": "<script>alert(1)</script>" + "x" * MAX_TEXT_CHARS},
        {"type": "image", "mimeType": "image/svg+xml", "data": svg},
        {"type": "image", "mimeType": "image/png", "data": "not base64!"},
        {"type": "image", "mimeType": "image/png", "data": big},
        {"type": "image", "mimeType": "image/png\" onerror=\"x", "data": PNG},
        "a bare string", None, 7,
    ] + [{"type": "text", "text": "more"}] * MAX_BLOCKS}
    view = result_view(result)
    assert view.is_error and view.left_out == 8
    assert view.blocks[0].cut and len(view.blocks[0].text) == MAX_TEXT_CHARS
    assert [block.kind for block in view.blocks[1:5]] == ["note"] * 4
    assert view.raw.cut
    html = rendered(result)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<img" not in html and "onerror=\"" not in html
    assert "The tool reported an error" in html and "8 more content blocks" in html


def test_a_failed_call_says_why() -> None:
    html = console().pages.fragment(
        "_tool_result.html", outcome=Outcome(None, "no answer in <time>", 60.0), view=None)
    assert "The call failed" in html and "no answer in &lt;time&gt;" in html


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=30)


@settings(max_examples=200, deadline=None)
@given(result=st.dictionaries(st.sampled_from(["content", "structuredContent", "isError",
                                               "_meta"]), JSON)
       | st.fixed_dictionaries({"content": st.lists(st.dictionaries(
           st.sampled_from(["type", "text", "data", "mimeType", "uri", "resource"]),
           st.sampled_from(["text", "image", "audio", "resource", "resource_link",
                            "image/png", "image/gif", PNG, "%%%"]) | JSON), max_size=8)}))
def test_any_result_renders(result: dict[str, Any]) -> None:
    view = result_view(result)
    assert len(view.blocks) <= MAX_BLOCKS + 1
    html = rendered(result)
    assert html.count("<img") == sum(block.kind == "image" for block in view.blocks)
    for block in view.blocks:
        if block.kind == "image":
            assert block.src.startswith("data:image/") and '"' not in block.src
