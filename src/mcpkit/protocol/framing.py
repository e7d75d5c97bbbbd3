"""Newline-delimited framing (stdio and any byte stream): one JSON-RPC message per line."""

from __future__ import annotations

DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024
ENDS_KEPT = 256
"""Bytes kept of each end of a dropped line (`LineFramer.dropped_ends`)."""


class LineFramer:
    """Splits a byte stream into lines.

    A line over `max_line_bytes` is dropped: its bytes are discarded up to the next newline
    and `feed` yields `None` in its place, so the reader can answer it with an error while
    one oversized message neither holds unbounded memory nor loses the messages after it.
    Blank lines are skipped. For each line dropped by the last `feed`, `dropped_ends` holds
    its first and last `ENDS_KEPT` bytes, in order (where a reader finds the id of the
    message it lost).
    """

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self._max = max_line_bytes
        self._parts: list[bytes] = []
        self._size = 0
        self._skipping = False
        self._head = b""
        self._tail = b""
        self.dropped_ends: list[tuple[bytes, bytes]] = []

    def feed(self, chunk: bytes) -> list[bytes | None]:
        lines: list[bytes | None] = []
        if self.dropped_ends:
            self.dropped_ends = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            piece = chunk[start:end]
            if self._skipping:
                self._skipping = False
                lines.append(None)
                self.dropped_ends.append((self._head, (self._tail + piece)[-ENDS_KEPT:]))
            elif self._size + len(piece) > self._max:
                lines.append(None)
                self.dropped_ends.append((_head(self._parts, piece),
                                          ((self._parts[-1] if self._parts else b"")
                                           + piece)[-ENDS_KEPT:]))
            else:
                line = b"".join((*self._parts, piece)) if self._parts else piece
                if line.strip():
                    lines.append(line.rstrip(b"\r"))
            self._parts, self._size = [], 0
            start = end + 1
        rest = chunk[start:]
        if rest and self._skipping:
            self._tail = (self._tail + rest)[-ENDS_KEPT:]
        elif rest:
            if self._size + len(rest) > self._max:
                self._head = _head(self._parts, rest)
                self._tail = rest[-ENDS_KEPT:]
                self._parts, self._size, self._skipping = [], 0, True
            else:
                self._parts.append(rest)
                self._size += len(rest)
        return lines


def _head(parts: list[bytes], piece: bytes) -> bytes:
    """The first `ENDS_KEPT` bytes of `parts` followed by `piece` (without joining them all)."""
    head = b""
    for part in (*parts, piece):
        head += part[: ENDS_KEPT - len(head)]
        if len(head) >= ENDS_KEPT:
            break
    return head
