from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.protocol.sse import KEEPALIVE, Event, EventParser, encode_event


def test_encode_event_fields() -> None:
    assert encode_event("hi") == b"data: hi\n\n"
    assert encode_event(b"") == b"data: \n\n"
    assert encode_event("a\nb", id="7", event="message", retry_ms=500) == (
        b"id: 7\nevent: message\nretry: 500\ndata: a\ndata: b\n\n"
    )


def test_round_trip_through_parser() -> None:
    parser = EventParser()
    events = parser.feed(encode_event('{"x":1}\nline2', id="e1", retry_ms=10))
    assert events == [Event('{"x":1}\nline2', "message", "e1", 10)]
    assert parser.last_event_id == "e1"


def test_crlf_cr_and_lf_line_endings() -> None:
    for sep in (b"\r\n", b"\r", b"\n"):
        parser = EventParser()
        chunk = b"event: ping" + sep + b"data: x" + sep + sep
        # a lone CR at a chunk end needs the next byte to know whether it was CRLF
        events = parser.feed(chunk) + parser.feed(b"data: y" + sep + sep) + parser.feed(b"\n")
        assert [(e.event, e.data) for e in events] == [("ping", "x"), ("message", "y")]


def test_comments_and_keepalive_are_ignored() -> None:
    parser = EventParser()
    assert parser.feed(KEEPALIVE) == []
    assert parser.feed(b": comment\ndata: a\n: another\n\n") == [Event("a")]


def test_retry_and_id_only_events() -> None:
    parser = EventParser()
    assert parser.feed(b"retry: 1500\n\n") == [Event("", "message", None, 1500)]
    assert parser.feed(b"retry: soon\ndata: d\n\n") == [Event("d")]
    # only ASCII digits: "²" and "٣" are digits to str.isdigit(), not to the SSE grammar
    assert parser.feed("retry: ²\nretry: ٣\ndata: e\n\n".encode()) == [Event("e")]
    assert parser.feed(b"retry: " + b"9" * 5000 + b"\ndata: f\n\n") == [Event("f")]
    assert parser.feed(b"retry: 999999999999\n\n") == [Event("", "message", None, 999999999999)]
    events = parser.feed(b"id: 42\n\n")
    assert events == [Event("", "message", "42", None)] and parser.last_event_id == "42"
    # an id with NUL is ignored
    assert parser.feed(b"id: a\0b\ndata: z\n\n") == [Event("z")]
    assert parser.last_event_id == "42"


def test_multi_line_data_and_field_without_space() -> None:
    parser = EventParser()
    assert parser.feed(b"data:one\ndata:  two\ndata\n\n") == [Event("one\n two\n")]


def test_unknown_fields_and_empty_dispatch() -> None:
    parser = EventParser()
    assert parser.feed(b"foo: bar\n\n\n") == []
    assert parser.feed(b"event: only\n\ndata: later\n\n") == [Event("later")]


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_split_chunks(size: int) -> None:
    stream = (
        encode_event("first", id="1") + b": c\r\n" + encode_event("sec\nond", event="x")
    ).replace(b"\n", b"\r\n")
    parser = EventParser()
    events = []
    for i in range(0, len(stream), size):
        events += parser.feed(stream[i : i + size])
    assert [(e.data, e.event, e.id) for e in events] == [
        ("first", "message", "1"),
        ("sec\nond", "x", None),
    ]


def test_invalid_utf8_is_replaced() -> None:
    assert EventParser().feed(b"data: \xff\n\n") == [Event("\ufffd")]


def test_size_limit() -> None:
    parser = EventParser(max_event_bytes=16)
    with pytest.raises(ValueError):
        parser.feed(b"data: " + b"x" * 32)


def _reference_lines(stream: bytes) -> list[bytes]:
    """The stream's complete lines by the SSE rules (CRLF, CR or LF ends a line; a CR last
    may still become CRLF, so it ends nothing yet), computed the plain way."""
    lines, start, i = [], 0, 0
    while i < len(stream):
        byte = stream[i]
        if byte == 0x0A or (byte == 0x0D and i + 1 < len(stream)):
            lines.append(stream[start:i])
            i += 2 if byte == 0x0D and stream[i + 1] == 0x0A else 1
            start = i
        else:
            i += 1
    return lines


def _reference_events(stream: bytes) -> list[Event]:
    parser = EventParser()
    events = []
    for line in _reference_lines(stream):
        event = parser._line(line.decode("utf-8", "replace"))
        if event is not None:
            events.append(event)
    return events


_PIECES = st.sampled_from([b"data: a", b"data:{\"x\": 1}", b"id: 7", b"event: e", b"retry: 5",
                           b": comment", b"", b"\r", b"\n", b"\r\n", b"data: \xff", b"da",
                           b"ta: z"])


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(_PIECES, max_size=40), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_any_chunking_gives_the_events_of_the_plain_reading(
    pieces: list[bytes], cuts: list[int],
) -> None:
    """However the stream is cut into chunks (a CR or CRLF split across two, a line across
    many), the parser finds the events a plain line-by-line reading finds."""
    stream = b"".join(pieces)
    bounds = sorted({0, len(stream), *(c for c in cuts if c < len(stream))})
    parser = EventParser()
    events: list[Event] = []
    for start, end in itertools.pairwise(bounds):
        events += parser.feed(stream[start:end])
    assert events == _reference_events(stream)


def test_a_long_line_in_many_chunks_is_read_whole() -> None:
    """A 3 MiB line fed 1 KiB at a time (the search for its end resumes where it stopped)."""
    parser = EventParser()
    body = b"data: " + b"z" * (3 * 1024 * 1024) + b"\r\n\r\n"
    events: list[Event] = []
    for start in range(0, len(body), 1024):
        events += parser.feed(body[start:start + 1024])
    assert [len(e.data) for e in events] == [3 * 1024 * 1024]
