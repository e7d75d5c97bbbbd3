"""An output budget for tool results: text beyond it is cut, keeping its head and its tail.

A tool that prints a megabyte would fill a model's context window; its beginning (what it
did) and its end (how it finished, the error) are what matter most, so the middle goes and
a marker says how much:

    first lines …
    … [12,345 characters cut; the output was 98,765 characters] …
    … last lines

Lengths are counted in characters (what a context window roughly counts), not bytes.
"""

from __future__ import annotations

import msgspec

from mcpkit.errors import InvalidArgument
from mcpkit.protocol import types

MIN_LIMIT = 200
"""The smallest budget accepted: below it the marker would leave no room for the text."""
HEAD_SHARE = 2 / 3
"""The share of the kept text taken from the beginning; the rest comes from the end."""
LINE_SLACK = 0.2
"""How far back (as a share of the kept part) a cut moves to fall on a line boundary."""


def _marker(cut: int, total: int) -> str:
    return f"\n… [{cut:,} characters cut; the output was {total:,} characters] …\n"


def _head(text: str, size: int) -> str:
    """The first `size` characters, ending before the last newline in them if one is near."""
    head = text[:size]
    newline = head.rfind("\n")
    if newline >= 0 and size - newline <= max(1, int(size * LINE_SLACK)):
        return head[:newline]  # the marker starts with its own newline
    return head


def _tail(text: str, size: int) -> str:
    """The last `size` characters, starting after the first newline in them if one is near."""
    tail = text[len(text) - size :] if size else ""
    newline = tail.find("\n")
    if newline >= 0 and newline + 1 <= max(1, int(size * LINE_SLACK)):
        return tail[newline + 1 :]  # the marker ends with its own newline
    return tail


def _check_limit(limit: int) -> None:
    if limit < MIN_LIMIT:
        raise InvalidArgument(
            f"an output limit must be at least {MIN_LIMIT} characters, not {limit}")


def cut_text(text: str, limit: int) -> str:
    """`text` itself when at most `limit` characters, else its head and tail around a marker.

    The result, marker included, is at most `limit` characters: about 2/3 of the kept text
    comes from the beginning and 1/3 from the end, each cut moved to a line boundary when
    one is within a fifth of the kept part. `limit` below `MIN_LIMIT` is an
    `InvalidArgument` (a ValueError).
    """
    _check_limit(limit)
    total = len(text)
    if total <= limit:
        return text
    # The marker's real count (characters cut) is at most `total`, so a marker written with
    # `total` is at least as long as the real one: the kept parts are sized against it.
    keep = limit - len(_marker(total, total))
    head = _head(text, int(keep * HEAD_SHARE))
    tail = _tail(text, keep - int(keep * HEAD_SHARE))
    return head + _marker(total - len(head) - len(tail), total) + tail


def _clip(text: str, size: int) -> str:
    """The first `size` characters ending with `…`, for a share too small for `cut_text`."""
    if len(text) <= size:
        return text
    return text[: size - 1] + "…" if size > 0 else ""


def _shares(lengths: list[int], limit: int) -> list[int]:
    """How many characters each text may keep so that together they take at most `limit`.

    Every text keeps up to `MIN_LIMIT` characters (short ones stay whole); what the budget
    has left is shared in proportion to how far each text goes beyond that. Only when there
    are so many texts that even that floor does not fit is each given its plain proportional
    share.
    """
    total = sum(lengths)
    floors = [min(n, MIN_LIMIT) for n in lengths]
    if sum(floors) > limit:
        return [n * limit // total for n in lengths]
    spare = limit - sum(floors)
    excess = total - sum(floors)
    return [floor + (n - floor) * spare // excess for n, floor in zip(lengths, floors, strict=True)]


def _shorten(text: str, size: int) -> str:
    return cut_text(text, size) if size >= MIN_LIMIT else _clip(text, size)


def _text_of(block: types.ContentBlock) -> str | None:
    """The text a block carries for the budget: text blocks and embedded text resources."""
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.EmbeddedResource) and isinstance(block.resource.text, str):
        return block.resource.text
    return None


def _with_text(block: types.ContentBlock, text: str) -> types.ContentBlock:
    if isinstance(block, types.EmbeddedResource):
        return msgspec.structs.replace(
            block, resource=msgspec.structs.replace(block.resource, text=text)
        )
    assert isinstance(block, types.TextContent)
    return msgspec.structs.replace(block, text=text)


def _json_size(value: object) -> int:
    return len(msgspec.json.encode(value).decode("utf-8"))


def _cut_blocks(content: list[types.ContentBlock], limit: int) -> list[types.ContentBlock]:
    texts = [_text_of(block) for block in content]
    lengths = [len(t) for t in texts if t is not None]
    if sum(lengths) <= limit:
        return content
    shares = iter(_shares(lengths, limit))
    cut: list[types.ContentBlock] = []
    for block, text in zip(content, texts, strict=True):
        cut.append(block if text is None else _with_text(block, _shorten(text, next(shares))))
    return cut


def apply_budget(result: types.CallToolResult, limit: int) -> types.CallToolResult:
    """`result` with its text cut to `limit` characters in all; `result` itself when it fits.

    - The text of text blocks and of embedded text resources counts; when it is over
      `limit`, each text is cut (`cut_text`, head and tail) to a share: texts of up to
      `MIN_LIMIT` characters stay whole and the rest of the budget goes to the longer ones
      in proportion to their length. Images, audio, links and blobs are left untouched and
      not counted (they are not text a model reads as tokens here).
    - `structured_content` is kept when its JSON fits in `limit` on its own. Larger, it is
      dropped rather than cut (cut JSON is no longer the structure its `outputSchema`
      describes), and a text block says so; when the result has no text at all, that block
      also carries the JSON, cut to the budget, so the model still sees the output. This
      note is added after the cut, so it may take the text slightly past `limit`.

    The input is never modified; a changed result is a new `CallToolResult`.
    """
    _check_limit(limit)
    content = _cut_blocks(result.content, limit)
    structured = result.structured_content
    if structured is not msgspec.UNSET and structured is not None:
        size = _json_size(structured)
        if size > limit:
            content = [*content, _structured_note(result, size, limit)]
            structured = msgspec.UNSET
    if content is result.content and structured is result.structured_content:
        return result
    return msgspec.structs.replace(result, content=content, structured_content=structured)


def _structured_note(result: types.CallToolResult, size: int, limit: int) -> types.TextContent:
    note = (
        f"[structured content omitted: its JSON is {size:,} characters, "
        f"over the output budget of {limit:,}]"
    )
    if not any(_text_of(block) for block in result.content):
        json_text = msgspec.json.encode(result.structured_content).decode("utf-8")
        note += "\n" + cut_text(json_text, limit)
    return types.TextContent(text=note)
