"""What `mcpkit mcp` prints: tables, masked secrets, compact tool schemas, tool results, and
the progress line.

Nothing here is colored (so NO_COLOR holds trivially); the progress line is drawn on stderr
only when stderr is a terminal, and tables are cut to the terminal's width only when stdout
is one (or COLUMNS is set), so piped output is complete and stable.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from msgspec import UNSET

from mcpkit.protocol import types

ELLIPSIS = "…"
MIN_CUT_COLUMN = 12
SECRET_WORDS = ("TOKEN", "SECRET", "KEY", "PASSWORD", "PASS", "AUTH", "CREDENTIAL")
AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest"})
MASK = "****"
SHOWN_PREFIX = 4
MASK_MIN_LENGTH = 12
"""Values this long keep their first few characters (`Bear…****`); shorter ones are all
masked."""
_REFERENCE = re.compile(r"\$\{[^}]*\}")
MAX_ENUM_SHOWN = 6


# --- width and tables -----------------------------------------------------------------------


def output_width(stream: TextIO | None = None) -> int | None:
    """The terminal's width when output goes to a terminal (or COLUMNS says one), else None:
    piped output is not cut."""
    out = sys.stdout if stream is None else stream
    if "COLUMNS" in os.environ or _isatty(out):
        return shutil.get_terminal_size().columns
    return None


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def cut(text: str, width: int) -> str:
    """`text` in at most `width` characters, the end replaced by `…` when it is longer."""
    if len(text) <= width:
        return text
    return text[:max(0, width - 1)] + ELLIPSIS


def one_line(text: str) -> str:
    return " ".join(text.split())


def cut_middle(text: str, width: int) -> str:
    """`text` in at most `width` characters, its middle replaced by `…` when it is longer:
    the start and the end (where `?task_id=…` and version numbers differ) both stay."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    tail = (width - 1) // 2
    head = width - 1 - tail
    return text[:head] + ELLIPSIS + text[len(text) - tail:]


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, width: int | None,
          shrink: int | Sequence[int]) -> list[str]:
    """Left-aligned columns two spaces apart. When `width` is given and the table is wider,
    the `shrink` columns (in that order) are cut in the middle to fit, never below
    MIN_CUT_COLUMN characters; a cell whose cut would read the same as another row's cut
    of a different text is shown whole (rows must stay distinguishable, even if the line
    then wraps)."""
    columns = [shrink] if isinstance(shrink, int) else list(shrink)
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(len(headers))]
    excess = sum(widths) + 2 * (len(widths) - 1) - (width or 0)
    for column in columns:
        if width is None or excess <= 0:
            break
        narrower = max(MIN_CUT_COLUMN, widths[column] - excess)
        excess -= widths[column] - narrower
        widths[column] = min(widths[column], narrower)
    shown = [[str(cell) for cell in row] for row in rows]
    for column in columns:
        _cut_column(shown, column, widths[column])
    lines = []
    for row in [list(headers), *shown]:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    return lines


def _cut_column(rows: list[list[str]], column: int, width: int) -> None:
    """Cut one column's cells in place, keeping distinct texts distinct."""
    cuts: dict[str, set[str]] = {}
    for row in rows:
        cuts.setdefault(cut_middle(row[column], width), set()).add(row[column])
    for row in rows:
        short = cut_middle(row[column], width)
        if len(cuts[short]) == 1:
            row[column] = short


# --- secrets --------------------------------------------------------------------------------


def looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def mask(value: str) -> str:
    """A secret value for display. `${VAR}` references are not secrets and are shown as
    written, also after an auth scheme (`Bearer ${TOKEN}`)."""
    if _REFERENCE.search(value):
        rest = _REFERENCE.sub("", value).strip()
        if not rest or rest.lower() in AUTH_SCHEMES:
            return value
    if len(value) >= MASK_MIN_LENGTH:
        return value[:SHOWN_PREFIX] + ELLIPSIS + MASK
    return MASK


def mask_env(name: str, value: str) -> str:
    return mask(value) if looks_secret(name) else value


def mask_url(url: str) -> str:
    """A password in the URL and query parameters with secret-looking names are masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, password = userinfo.partition(":")
        if colon and password and not _REFERENCE.fullmatch(password):
            netloc = f"{user}:{MASK}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(looks_secret(key) for key, _ in pairs):
            query = "&".join(f"{key}={mask(value) if looks_secret(key) else value}"
                             for key, value in pairs)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class Redactor:
    """The values of the variables a started entry used (`${TOKEN}`, the bearer token's
    variable, passed-through variables): anything printed (errors, `--json`, `-v` logs)
    shows `${NAME}` in their place. Shorter values are left: they would blank out ordinary
    words."""

    min_chars = 4

    def __init__(self) -> None:
        self._values: dict[str, str] = {}

    def add(self, value: str, name: str) -> None:
        if len(value) >= self.min_chars:
            self._values[value] = f"${{{name}}}"

    def __call__(self, text: str) -> str:
        for value in sorted(self._values, key=len, reverse=True):
            if value in text:
                text = text.replace(value, self._values[value])
        return text


REDACT = Redactor()
"""The process's one redactor (a CLI command is one process)."""
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")


def redact(text: str | None) -> str | None:
    """`text` with the registered variables' values replaced (None stays None)."""
    return None if text is None else REDACT(text)


def redact_variables_of(written: object, environ: Mapping[str, str]) -> None:
    """Register every variable `written` (an entry as written) refers to."""
    if isinstance(written, str):
        for name in _VARIABLE.findall(written):
            if environ.get(name):
                REDACT.add(environ[name], name)
    elif isinstance(written, list):
        for item in written:
            redact_variables_of(item, environ)
    elif isinstance(written, dict):
        for key, item in written.items():
            if key in ("bearer_token_env_var",) and isinstance(item, str):
                redact_variables_of(f"${{{item}}}", environ)
            elif key == "env_vars" and isinstance(item, list):
                redact_variables_of([f"${{{n}}}" for n in item if isinstance(n, str)], environ)
            else:
                redact_variables_of(item, environ)


class RedactingFilter(logging.Filter):
    """For the log handler of `-v`: each record's text through `REDACT`."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = REDACT(record.getMessage())
        record.args = None
        return True


# --- tools ----------------------------------------------------------------------------------


def schema_type(schema: object) -> str:
    """A JSON Schema in a few characters: `string`, `integer | null`, `array of string`,
    `"a" | "b"`."""
    if not isinstance(schema, dict):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        shown = [json.dumps(v) for v in schema["enum"][:MAX_ENUM_SHOWN]]
        more = [ELLIPSIS] if len(schema["enum"]) > MAX_ENUM_SHOWN else []
        return " | ".join(shown + more)
    if "const" in schema:
        return json.dumps(schema["const"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if kind == "array":
        items = schema.get("items")
        return f"array of {schema_type(items)}" if isinstance(items, dict) and items else "array"
    if isinstance(kind, str):
        return kind
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return " | ".join(schema_type(option) for option in options)
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return ref.rsplit("/", 1)[-1]
    return "any"


def parameter_lines(schema: dict[str, Any]) -> list[str]:
    """`name: type (required) = default — description`, one line per top-level property."""
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        return ["(no parameters)"]
    required = schema.get("required")
    required_names = set(required) if isinstance(required, list) else set()
    lines = []
    for name, prop in properties.items():
        line = f"{name}: {schema_type(prop)}"
        if name in required_names:
            line += " (required)"
        if isinstance(prop, dict):
            if "default" in prop:
                line += f" = {json.dumps(prop['default'])}"
            description = prop.get("description")
            if isinstance(description, str) and description.strip():
                line += f" — {first_line(description)}"
        lines.append(line)
    return lines


def first_line(text: str) -> str:
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def tool_flags(tool: types.Tool) -> list[str]:
    annotations = tool.annotations
    if annotations is UNSET:
        return []
    flags = []
    if annotations.read_only_hint is True:
        flags.append("read-only")
    if annotations.destructive_hint is True and annotations.read_only_hint is not True:
        flags.append("destructive")
    return flags


# --- results --------------------------------------------------------------------------------


def content_text(block: object) -> str:
    """One content block as text: text as is, media and links as a placeholder line."""
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return f"[{kind}: {block.mime_type}, {_decoded_size(block.data)} bytes]"
    if isinstance(block, types.ResourceLink):
        title = f" ({block.name})" if block.name and block.name != block.uri else ""
        return f"[resource link: {block.uri}{title}]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource.text, str):
            return resource.text
        mime = f", {resource.mime_type}" if isinstance(resource.mime_type, str) else ""
        size = _decoded_size(resource.blob) if isinstance(resource.blob, str) else 0
        return f"[resource: {resource.uri}{mime}, {size} bytes]"
    import msgspec

    return json.dumps(msgspec.to_builtins(block), ensure_ascii=False)


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def result_text(result: types.CallToolResult) -> str:
    """What `mcpkit call` prints: the content blocks one after the other, or the structured
    content pretty-printed when there is no text."""
    parts = [content_text(block) for block in result.content]
    has_text = any(isinstance(b, types.TextContent) and b.text for b in result.content)
    if not has_text and result.structured_content is not UNSET:
        parts = [json.dumps(result.structured_content, indent=2, ensure_ascii=False),
                 *(p for p, b in zip(parts, result.content, strict=True)
                   if not isinstance(b, types.TextContent))]
    return "\n".join(parts)


# --- progress -------------------------------------------------------------------------------


class StatusLine:
    """One line of progress on stderr, redrawn in place; nothing at all unless stderr is a
    terminal, so logs and pipes never see it."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.enabled = _isatty(self.stream)
        self._shown: str | None = None

    def show(self, text: str) -> None:
        if not self.enabled or text == self._shown:
            return
        width = shutil.get_terminal_size().columns
        self.stream.write("\r\x1b[K" + cut(text, max(1, width - 1)))
        self.stream.flush()
        self._shown = text

    def clear(self) -> None:
        if self._shown is not None:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = None
