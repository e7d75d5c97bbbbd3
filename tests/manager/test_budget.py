"""The output budget: head and tail kept around a marker, texts cut in proportion."""

from __future__ import annotations

import copy

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpkit.manager.budget import MIN_LIMIT, apply_budget, cut_text
from mcpkit.protocol import types


def lines(count: int, width: int = 30) -> str:
    return "\n".join(f"line {i:05d} ".ljust(width, "x") for i in range(count))


def text_result(*texts: str, **fields: object) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=t) for t in texts], **fields)


def texts_of(result: types.CallToolResult) -> list[str]:
    return [b.text for b in result.content if isinstance(b, types.TextContent)]


# --- cut_text ------------------------------------------------------------------------------


def test_short_text_is_returned_as_is() -> None:
    assert cut_text("hello", 200) == "hello"
    text = "x" * 500
    assert cut_text(text, 500) is text


def test_limit_below_minimum_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 200"):
        cut_text("x", MIN_LIMIT - 1)


def test_cut_keeps_head_and_tail_with_a_marker() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(98_765))
    cut = cut_text(text, 1000)
    assert len(cut) <= 1000
    head, marker_and_tail = cut.split("\n… [", 1)
    marker, tail = marker_and_tail.split("] …\n", 1)
    assert text.startswith(head) and text.endswith(tail)
    cut_count = 98_765 - len(head) - len(tail)
    assert marker == f"{cut_count:,} characters cut; the output was 98,765 characters"
    # roughly two thirds head, one third tail
    assert 1.5 < len(head) / len(tail) < 2.5


def test_cut_falls_on_line_boundaries() -> None:
    text = lines(2000)
    cut = cut_text(text, 2000)
    assert len(cut) <= 2000
    head, rest = cut.split("\n… [", 1)
    tail = rest.split("] …\n", 1)[1]
    assert head.endswith("x") and text.startswith(head + "\n")
    assert tail.startswith("line ") and text.endswith("\n" + tail)
    assert head.count("\n") > 10 and tail.count("\n") > 5


def test_cut_of_one_long_line_cuts_mid_line() -> None:
    text = "a" * 10_000 + "\n" + "b" * 10_000
    cut = cut_text(text, 600)
    assert len(cut) <= 600
    assert cut.startswith("aaaa") and cut.endswith("bbbb")


@given(st.text(min_size=0, max_size=3000), st.integers(MIN_LIMIT, 2500))
def test_cut_never_exceeds_the_limit(text: str, limit: int) -> None:
    cut = cut_text(text, limit)
    assert len(cut) <= limit
    if len(text) <= limit:
        assert cut == text
    else:
        assert "characters cut" in cut


# --- apply_budget ---------------------------------------------------------------------------


def test_result_within_budget_is_unchanged() -> None:
    result = text_result("short", structured_content={"a": 1})
    assert apply_budget(result, 1000) is result


def test_one_long_text_is_cut() -> None:
    result = text_result(lines(1000))
    cut = apply_budget(result, 2000)
    assert cut is not result
    [text] = texts_of(cut)
    assert len(text) <= 2000 and "characters cut" in text


def test_texts_are_cut_in_proportion_and_short_ones_kept() -> None:
    short = "exit code: 1"
    big, bigger = "b" * 10_000, "c" * 30_000
    cut = apply_budget(text_result(short, big, bigger), 4000)
    s, b, c = texts_of(cut)
    assert s == short
    assert len(s) + len(b) + len(c) <= 4000
    assert 2.0 < len(c) / len(b) < 4.0  # about 3:1, like the originals


def test_many_blocks_still_fit() -> None:
    result = text_result(*["y" * 300 for _ in range(100)])
    cut = apply_budget(result, 1000)
    assert sum(len(t) for t in texts_of(cut)) <= 1000


def test_non_text_blocks_untouched_and_embedded_text_cut() -> None:
    image = types.ImageContent(data="A" * 50_000, mime_type="image/png")
    link = types.ResourceLink(name="log", uri="file:///log")
    embedded = types.EmbeddedResource(resource=types.TextResourceContents(
        uri="file:///big", text="r" * 20_000, mime_type="text/plain"))
    blob = types.EmbeddedResource(
        resource=types.BlobResourceContents(uri="file:///bin", blob="Q" * 9000))
    text = types.TextContent(text="t" * 20_000)
    result = types.CallToolResult(content=[image, text, link, embedded, blob])
    cut = apply_budget(result, 3000)
    new_image, new_text, new_link, new_embedded, new_blob = cut.content
    assert new_image is image and new_link is link and new_blob is blob
    assert isinstance(new_text, types.TextContent)
    assert isinstance(new_embedded, types.EmbeddedResource)
    assert isinstance(new_embedded.resource.text, str)
    assert len(new_text.text) + len(new_embedded.resource.text) <= 3000
    assert new_embedded.resource.uri == "file:///big"
    assert new_embedded.resource.mime_type == "text/plain"


def test_input_is_never_modified() -> None:
    result = text_result("z" * 5000, "w" * 5000, structured_content={"k": "v" * 5000})
    before = msgspec.json.encode(result)
    snapshot = copy.deepcopy(result)
    apply_budget(result, 500)
    assert msgspec.json.encode(result) == before
    assert result == snapshot


def test_large_structured_content_is_dropped_with_a_note() -> None:
    result = text_result("summary: 3 items", structured_content={"items": ["v" * 1000] * 3})
    cut = apply_budget(result, 1000)
    assert cut.structured_content is msgspec.UNSET
    assert texts_of(cut)[0] == "summary: 3 items"
    assert "structured content omitted" in texts_of(cut)[1]
    assert cut.is_error is msgspec.UNSET


def test_small_structured_content_kept_while_text_is_cut() -> None:
    result = text_result("q" * 5000, structured_content={"ok": True}, is_error=True)
    cut = apply_budget(result, 1000)
    assert cut.structured_content == {"ok": True}
    assert cut.is_error is True
    assert len(texts_of(cut)[0]) <= 1000


def test_structured_only_result_keeps_a_cut_json_rendering() -> None:
    result = types.CallToolResult(content=[], structured_content={"rows": list(range(5000))})
    cut = apply_budget(result, 1000)
    assert cut.structured_content is msgspec.UNSET
    [note] = texts_of(cut)
    assert note.startswith("[structured content omitted")
    assert '{"rows":[0,1,2' in note and "characters cut" in note


def test_apply_budget_refuses_a_tiny_limit() -> None:
    with pytest.raises(ValueError):
        apply_budget(text_result("x"), 10)


@given(st.lists(st.text(max_size=2000), max_size=8), st.integers(MIN_LIMIT, 3000))
def test_total_text_fits(texts: list[str], limit: int) -> None:
    cut = apply_budget(text_result(*texts), limit)
    total = sum(len(t) for t in texts)
    if total <= limit:
        assert texts_of(cut) == texts
    else:
        assert sum(len(t) for t in texts_of(cut)) <= limit
