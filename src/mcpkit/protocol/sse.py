"""Server-Sent Events framing: encoding events and parsing a byte stream into events."""

from __future__ import annotations

from dataclasses import dataclass

from mcpkit.errors import PeerError


class EventTooLarge(PeerError, ValueError):
    """The peer's stream holds an event (or an unfinished line) over `EventParser`'s
    `max_event_bytes`; the transport reports it as its own `MessageTooLarge`."""


def encode_event(
    data: bytes | str,
    *,
    id: str | None = None,
    event: str | None = None,
    retry_ms: int | None = None,
) -> bytes:
    """One SSE event. `data` may hold newlines; each line becomes a `data:` field."""
    payload = data.encode() if isinstance(data, str) else data
    parts: list[bytes] = []
    if id is not None:
        parts.append(b"id: " + id.encode() + b"\n")
    if event is not None:
        parts.append(b"event: " + event.encode() + b"\n")
    if retry_ms is not None:
        parts.append(b"retry: %d\n" % retry_ms)
    for line in payload.split(b"\n") if payload else [b""]:
        parts.append(b"data: " + line + b"\n")
    parts.append(b"\n")
    return b"".join(parts)


KEEPALIVE = b":\n\n"
"""An SSE comment; keeps idle connections open through intermediaries."""


@dataclass(slots=True)
class Event:
    data: str
    event: str = "message"
    id: str | None = None
    retry_ms: int | None = None


class EventParser:
    """Incremental SSE parser: `feed(bytes)` returns the events completed by that chunk.

    Linear in the bytes fed, however they are split into chunks or lines: only the
    unfinished line is kept, and the search for line ends resumes where the last one
    stopped (a line fed in many chunks is not scanned again from its start). Line ends are
    found with `bytes.find`, never byte by byte in Python.
    """

    def __init__(self, max_event_bytes: int = 16 * 1024 * 1024) -> None:
        self._buffer = bytearray()
        """The unfinished line."""
        self._scanned = 0
        """How much of `_buffer` is known to hold no line end."""
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._max = max_event_bytes
        self.last_event_id: str | None = None

    def feed(self, chunk: bytes) -> list[Event]:
        buf = self._buffer
        buf += chunk
        if len(buf) > self._max:
            raise EventTooLarge("SSE event exceeds the size limit")
        events: list[Event] = []
        start = 0  # where the current line begins
        pos = self._scanned
        next_lf = buf.find(b"\n", pos)
        next_cr = buf.find(b"\r", pos)
        while next_lf >= 0 or next_cr >= 0:
            if next_cr < 0 or 0 <= next_lf < next_cr:
                end, after = next_lf, next_lf + 1
            elif next_cr + 1 == len(buf):
                pos = next_cr  # a CR last: wait for the next chunk (it may be CRLF)
                break
            else:
                end = next_cr
                after = next_cr + 2 if buf[next_cr + 1] == 0x0A else next_cr + 1
            event = self._line(bytes(buf[start:end]).decode("utf-8", "replace"))
            if event is not None:
                events.append(event)
            start = pos = after
            # each position is searched once: only a consumed line end is looked for again
            if next_lf >= 0 and next_lf < after:
                next_lf = buf.find(b"\n", after)
            if next_cr >= 0 and next_cr < after:
                next_cr = buf.find(b"\r", after)
        else:
            pos = len(buf)
        del buf[:start]
        self._scanned = pos - start
        return events

    def _line(self, line: str) -> Event | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value
        elif field == "retry" and _is_retry(value):
            self._retry = int(value)
        return None

    def _dispatch(self) -> Event | None:
        if self._id is not None:
            self.last_event_id = self._id
        if not self._data and self._retry is None and self._id is None:
            self._event = ""
            return None
        event = Event("\n".join(self._data), self._event or "message", self._id, self._retry)
        self._data, self._event, self._id, self._retry = [], "", None, None
        return event


MAX_RETRY_DIGITS = 12
"""A `retry` of more digits (over 31 years of milliseconds) is ignored, as is one that is not
ASCII digits: `int()` would refuse 4301 digits, and "²" is a digit to `str.isdigit()`."""


def _is_retry(value: str) -> bool:
    return 0 < len(value) <= MAX_RETRY_DIGITS and value.isascii() and value.isdigit()
