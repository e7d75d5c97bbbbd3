from __future__ import annotations

import pytest

from mcpkit.protocol.framing import LineFramer


def test_lines_and_blank_lines() -> None:
    framer = LineFramer()
    assert framer.feed(b'{"a":1}\n\n  \n{"b":2}\r\n') == [b'{"a":1}', b'{"b":2}']
    assert framer.feed(b"") == []


@pytest.mark.parametrize("size", [1, 2, 5])
def test_split_lines(size: int) -> None:
    data = b"first line\nsecond\r\nthird\n"
    framer = LineFramer()
    out: list[bytes | None] = []
    for i in range(0, len(data), size):
        out += framer.feed(data[i : i + size])
    assert out == [b"first line", b"second", b"third"]


def test_partial_line_waits_for_newline() -> None:
    framer = LineFramer()
    assert framer.feed(b"abc") == []
    assert framer.feed(b"def") == []
    assert framer.feed(b"\nxyz") == [b"abcdef"]
    assert framer.feed(b"\n") == [b"xyz"]


def test_oversized_line_in_one_chunk() -> None:
    framer = LineFramer(max_line_bytes=8)
    assert framer.feed(b"x" * 9 + b"\nok\n") == [None, b"ok"]
    assert framer.feed(b"12345678\n") == [b"12345678"]


def test_oversized_line_across_chunks_is_skipped() -> None:
    framer = LineFramer(max_line_bytes=8)
    assert framer.feed(b"12345") == []
    assert framer.feed(b"67890") == []  # over the limit: now skipping
    assert framer.feed(b"more bytes without newline") == []
    assert framer.feed(b"tail\nnext\n") == [None, b"next"]
    assert framer.feed(b"a\n") == [b"a"]


def test_oversized_split_at_exact_limit() -> None:
    framer = LineFramer(max_line_bytes=4)
    assert framer.feed(b"abcd") == []
    assert framer.feed(b"e\n") == [None]
    assert framer.feed(b"abcd\n") == [b"abcd"]


def test_the_ends_of_a_dropped_line_are_kept_in_order() -> None:
    """For each line dropped in a feed, `dropped_ends` holds its first and last bytes (where
    the client finds the id of the answer it lost), however the line was split."""
    from mcpkit.protocol.framing import ENDS_KEPT

    framer = LineFramer(max_line_bytes=50)
    big = b'{"id": 1, "result": "' + b"x" * 1000 + b'"}'
    assert framer.feed(big[:30]) == []
    assert framer.feed(big[30:600]) == []
    assert framer.feed(big[600:] + b"\nok\n" + big.replace(b"1", b"2") + b"\n") == [
        None, b"ok", None]
    assert framer.dropped_ends == [(big[:ENDS_KEPT], big[-ENDS_KEPT:]),
                                   (big.replace(b"1", b"2")[:ENDS_KEPT],
                                    big.replace(b"1", b"2")[-ENDS_KEPT:])]
    assert framer.feed(b"fine\n") == [b"fine"]
    assert framer.dropped_ends == []
