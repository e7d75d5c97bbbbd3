"""Server-Sent Events framing: encoding events and parsing a byte stream into events."""

from __future__ import annotations

from dataclasses import dataclass


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
    """Incremental SSE parser: `feed(bytes)` returns the events completed by that chunk."""

    def __init__(self, max_event_bytes: int = 16 * 1024 * 1024) -> None:
        self._buffer = b""
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._max = max_event_bytes
        self.last_event_id: str | None = None

    def feed(self, chunk: bytes) -> list[Event]:
        self._buffer += chunk
        if len(self._buffer) > self._max:
            raise ValueError("SSE event exceeds the size limit")
        events: list[Event] = []
        while True:
            line, sep, rest = self._split_line(self._buffer)
            if not sep:
                return events
            self._buffer = rest
            event = self._line(line.decode("utf-8", "replace"))
            if event is not None:
                events.append(event)

    @staticmethod
    def _split_line(buf: bytes) -> tuple[bytes, bytes, bytes]:
        for i, byte in enumerate(buf):
            if byte == 0x0A:
                return buf[:i], b"\n", buf[i + 1 :]
            if byte == 0x0D:
                if i + 1 == len(buf):
                    return b"", b"", buf  # wait: maybe CRLF
                skip = 2 if buf[i + 1] == 0x0A else 1
                return buf[:i], b"\r", buf[i + skip :]
        return b"", b"", buf

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
        elif field == "retry" and value.isdigit():
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
