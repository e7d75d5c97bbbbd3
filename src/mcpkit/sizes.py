"""Sizes for people and of base64 payloads, without decoding them (a result's image, a
resource's blob): what the CLI, the coding tools and the hub's console each show.

    decoded_size("aGVsbG8=")   -> 5
    for_people(1536)           -> "1.5 KiB"
"""

from __future__ import annotations


def decoded_size(base64_text: str) -> int:
    """The decoded size of base64 text, without decoding it."""
    return len(base64_text.rstrip("=")) * 3 // 4


def for_people(size: int) -> str:
    """A byte count as people read it: bytes, KiB or MiB."""
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"
