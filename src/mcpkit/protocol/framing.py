"""Newline-delimited framing (stdio and any byte stream): one JSON-RPC message per line."""

from __future__ import annotations

DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024


class LineFramer:
    """Splits a byte stream into lines.

    A line over `max_line_bytes` is dropped: its bytes are discarded up to the next newline
    and `feed` yields `None` in its place, so the reader can answer it with an error while
    one oversized message neither holds unbounded memory nor loses the messages after it.
    Blank lines are skipped.
    """

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self._max = max_line_bytes
        self._parts: list[bytes] = []
        self._size = 0
        self._skipping = False

    def feed(self, chunk: bytes) -> list[bytes | None]:
        lines: list[bytes | None] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            piece = chunk[start:end]
            if self._skipping:
                self._skipping = False
                lines.append(None)
            elif self._size + len(piece) > self._max:
                lines.append(None)
            else:
                line = b"".join((*self._parts, piece)) if self._parts else piece
                if line.strip():
                    lines.append(line.rstrip(b"\r"))
            self._parts, self._size = [], 0
            start = end + 1
        rest = chunk[start:]
        if rest and not self._skipping:
            if self._size + len(rest) > self._max:
                self._parts, self._size, self._skipping = [], 0, True
            else:
                self._parts.append(rest)
                self._size += len(rest)
        return lines
