"""`view` renders a small file in memory (`render_data`, bulk operations) and a big one
streamed (`render_lines`): both must give the same text, next offset and skipped count for
any bytes — CRLF and stray CRs, invalid or cut UTF-8, long and very long lines, missing final
newline, offsets past the end, pages over the byte cap."""

from __future__ import annotations

import io
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.coding import reading

PIECES = [
    b"a", b"line of text", b"\n", b"\n", b"\n", b"\r", b"\r\n", b"\t", b"",
    "é€😀".encode(), b"\xe2\x82", b"\xff", b"\xc3", b"\xf0\x9f\x98",  # cut / invalid UTF-8
    b"x" * 1999, b"x" * 2001, b"y" * 9000, "€".encode() * 700, "😀".encode() * 2001,
    b"\r" * 9000, b"z" * 8000 + b"\r" * 20,
]


@settings(max_examples=400, deadline=None)
@given(
    data=st.lists(st.sampled_from(PIECES), max_size=40).map(b"".join),
    offset=st.integers(1, 30),
    limit=st.integers(1, 30),
    cap=st.sampled_from([150, 3000, reading.MAX_VIEW_BYTES]),
)
def test_in_memory_rendering_matches_streaming(data: bytes, offset: int, limit: int,
                                               cap: int) -> None:
    with mock.patch.object(reading, "MAX_VIEW_BYTES", cap):
        streamed = reading.render_lines(io.BytesIO(data), offset, limit)
        in_memory = reading.render_data(data, offset, limit)
    assert in_memory == streamed


def test_rendering_examples() -> None:
    data = b"one\r\ntwo\nthree"
    assert reading.render_data(data, 1, 10) == ("     1\tone\n     2\ttwo\n     3\tthree", None, 0)
    assert reading.render_data(data, 2, 1) == ("     2\ttwo", 3, 1)
    assert reading.render_data(data, 5, 1) == ("", None, 2)
    assert reading.render_data(b"a\n", 2, 1) == ("", None, 1)
    text, next_offset, _ = reading.render_data(b"x" * 3000 + b"\n", 1, 5)
    assert text == "     1\t" + "x" * 2000 + " … [line cut: 3001 bytes]" and next_offset is None


def test_byte_cap_boundary() -> None:
    data = b"ab\n" * 14 + b"abc\n"  # 14 lines of 10 bytes shown, then one of 11: 151 bytes
    for cap, expected_next in ((150, 15), (151, None)):
        with mock.patch.object(reading, "MAX_VIEW_BYTES", cap):
            rendered = reading.render_data(data, 1, 20)
            assert rendered == reading.render_lines(io.BytesIO(data), 1, 20)
        assert rendered[1] == expected_next
