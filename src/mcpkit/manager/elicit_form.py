"""An elicitation form as a person fills it: the fields of a `requestedSchema`, bounded, and
the answers typed for them, checked against it.

The server writes the schema, its texts and its message, so all of it is hostile input:
- the spec allows only a flat object of primitive properties (string, number/integer,
  boolean, single- and multi-select enums); anything else is refused (-32602), as is a form
  of more than `FormLimits.max_fields` fields or `max_options` choices;
- every text shown on the terminal goes through `clean`, which drops terminal control
  sequences (ANSI/OSC escapes, C0/C1 controls, bidirectional overrides) and caps its length,
  so a server cannot recolour, retitle or rewrite the user's terminal.
"""

from __future__ import annotations

import datetime
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from mcpkit.errors import InvalidArgument
from mcpkit.protocol import errors

DEFAULT_MAX_FIELDS = 32
"""Fields one form may have (the spec's forms are short; a longer one is refused)."""
DEFAULT_MAX_OPTIONS = 100
"""Choices one enum field may offer."""
DEFAULT_MAX_TEXT = 500
"""Characters of a title, description or choice label shown (longer ones are cut)."""
DEFAULT_MAX_MESSAGE = 2000
"""Characters of the server's message shown."""
DEFAULT_MAX_ANSWER = 4096
"""Characters of one typed answer."""

_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"           # CSI: colours, cursor moves, erase
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window title, hyperlinks, clipboard
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"     # DCS, SOS, PM, APC strings
    r"|\x1b.?"                            # any other escape
    r"|\x9b[0-?]*[ -/]*[@-~]"             # 8-bit CSI
)
_FORMATS = ("date", "date-time", "email", "uri")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_YES = frozenset({"y", "yes", "true", "1", "on"})
_NO = frozenset({"n", "no", "false", "0", "off"})


@dataclass(frozen=True)
class FormLimits:
    """The bounds on a form a server sends (each settable; see the DEFAULT_* above)."""

    max_fields: int = DEFAULT_MAX_FIELDS
    max_options: int = DEFAULT_MAX_OPTIONS
    max_text: int = DEFAULT_MAX_TEXT
    max_message: int = DEFAULT_MAX_MESSAGE
    max_answer: int = DEFAULT_MAX_ANSWER


def clean(text: object, limit: int, *, lines: bool = False) -> str:
    """`text` safe to print on a terminal: escape sequences and control characters removed
    (newlines kept when `lines`), cut to `limit` characters."""
    stripped = _ESCAPES.sub("", str(text))
    kept = []
    for char in stripped:
        if char == "\n" and lines:
            kept.append(char)
        elif char in "\t\n\r":
            kept.append(" ")
        elif unicodedata.category(char) not in ("Cc", "Cf", "Co", "Cs"):
            kept.append(char)
    out = "".join(kept)
    return out if len(out) <= limit else out[: max(0, limit - 1)] + "…"


@dataclass
class Field:
    """One property of the form."""

    name: str
    kind: str  # "string" | "number" | "integer" | "boolean" | "choice" | "choices"
    required: bool
    title: str = ""
    description: str = ""
    default: Any = None
    options: list[tuple[str, str]] = field(default_factory=list)  # (value, label)
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    format: str | None = None

    @property
    def has_default(self) -> bool:
        return self.default is not None

    def summary(self, limit: int) -> str:
        """`name (integer 0-150, required): description`, for an error line."""
        facts = [self.kind if self.kind not in ("choice", "choices")
                 else ("one of " if self.kind == "choice" else "some of ")
                 + "|".join(v for v, _ in self.options[:8])
                 + ("|…" if len(self.options) > 8 else "")]
        if self.minimum is not None or self.maximum is not None:
            facts.append(f"{_num(self.minimum)}..{_num(self.maximum)}")
        if self.format:
            facts.append(self.format)
        if self.required:
            facts.append("required")
        about = self.description or (self.title if self.title != self.name else "")
        return (f"{clean(self.name, limit)} ({', '.join(facts)})"
                + (f": {clean(about, limit)}" if about else ""))


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def parse_form(schema: Any, limits: FormLimits) -> list[Field]:
    """The fields of a form's `requestedSchema`; -32602 for one the spec does not allow or
    past the limits."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise errors.invalid_params("requestedSchema must be an object schema")
    properties = schema.get("properties") or {}
    if not isinstance(properties, dict):
        raise errors.invalid_params("requestedSchema.properties must be an object")
    if len(properties) > limits.max_fields:
        raise errors.invalid_params(
            f"the form has {len(properties)} fields; this client shows at most "
            f"{limits.max_fields}")
    required = schema.get("required") or []
    if not isinstance(required, list):
        raise errors.invalid_params("requestedSchema.required must be a list")
    return [_field(str(name), prop, name in required, limits)
            for name, prop in properties.items()]


def _field(name: str, prop: Any, required: bool, limits: FormLimits) -> Field:
    if not isinstance(prop, dict):
        raise errors.invalid_params(f"form field {name!r} is not a schema")
    out = Field(name, "", required, title=_text(prop.get("title")),
                description=_text(prop.get("description")), default=prop.get("default"))
    kind = prop.get("type")
    options = _options(name, prop, limits)
    if kind == "array":
        out.kind, out.options = "choices", options
        out.min_length, out.max_length = _int(prop.get("minItems")), _int(prop.get("maxItems"))
        if not options:
            raise errors.invalid_params(f"form field {name!r}: an array must list its choices")
    elif options:
        out.kind, out.options = "choice", options
    elif kind in ("string", "number", "integer", "boolean"):
        out.kind = kind
        out.minimum, out.maximum = _float(prop.get("minimum")), _float(prop.get("maximum"))
        out.min_length, out.max_length = _int(prop.get("minLength")), _int(prop.get("maxLength"))
        fmt = prop.get("format")
        out.format = fmt if fmt in _FORMATS else None
    else:
        raise errors.invalid_params(
            f"form field {name!r} has type {kind!r}; a form field is a string, number, "
            "integer, boolean or a choice (spec: primitive types only)")
    if out.default is not None:
        try:
            out.default = check(out, out.default)
        except ValueError:
            out.default = None  # a default that breaks its own schema is not offered
    return out


def _options(name: str, prop: dict[str, Any], limits: FormLimits) -> list[tuple[str, str]]:
    """The choices of an enum field: `enum` (+ legacy `enumNames`), `oneOf` of const/title,
    or an array's `items.enum` / `items.anyOf`."""
    source = prop.get("items") if prop.get("type") == "array" else prop
    if not isinstance(source, dict):
        return []
    raw: list[tuple[Any, Any]] = []
    if isinstance(source.get("enum"), list):
        given = source.get("enumNames")
        names: list[Any] = given if isinstance(given, list) else []
        raw = [(v, names[i] if i < len(names) else v) for i, v in enumerate(source["enum"])]
    else:
        for key in ("oneOf", "anyOf"):
            if isinstance(source.get(key), list):
                raw = [(o.get("const"), o.get("title", o.get("const")))
                       for o in source[key] if isinstance(o, dict)]
                break
    if len(raw) > limits.max_options:
        raise errors.invalid_params(f"form field {name!r} offers {len(raw)} choices; this "
                                    f"client shows at most {limits.max_options}")
    if any(not isinstance(value, str) for value, _ in raw):
        raise errors.invalid_params(f"form field {name!r}: choices must be strings")
    return [(value, _text(label) or value) for value, label in raw]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok else None


# --- answers ---------------------------------------------------------------------------------


def parse_answer(fld: Field, text: str, limits: FormLimits) -> Any:
    """The value of `text` typed for `fld` (`InvalidArgument`, a ValueError, with what is wrong)."""
    if len(text) > limits.max_answer:
        raise InvalidArgument(f"at most {limits.max_answer} characters")
    text = text.strip()
    if fld.kind == "boolean":
        if text.lower() in _YES:
            return True
        if text.lower() in _NO:
            return False
        raise InvalidArgument("answer yes or no")
    if fld.kind in ("number", "integer"):
        try:
            number: Any = int(text) if fld.kind == "integer" else float(text)
        except ValueError:
            wanted = "a whole number" if fld.kind == "integer" else "a number"
            raise InvalidArgument(f"enter {wanted}") from None
        return check(fld, number)
    if fld.kind == "choice":
        return check(fld, _choose(fld, text))
    if fld.kind == "choices":
        picked = [_choose(fld, part.strip()) for part in text.split(",") if part.strip()]
        return check(fld, picked)
    return check(fld, text)


def _choose(fld: Field, text: str) -> str:
    """A choice by its value, its label or its number in the list."""
    for value, label in fld.options:
        if text in (value, label):
            return value
    if text.isdigit() and 1 <= int(text) <= len(fld.options):
        return fld.options[int(text) - 1][0]
    raise InvalidArgument("choose one of: " + ", ".join(v for v, _ in fld.options[:20]))


def check(fld: Field, value: Any) -> Any:
    """`value` if it is a valid answer for `fld` (`InvalidArgument`, a ValueError, with
    what is wrong)."""
    if fld.kind == "boolean":
        if not isinstance(value, bool):
            raise InvalidArgument("expected true or false")
        return value
    if fld.kind in ("number", "integer"):
        if isinstance(value, bool) or not isinstance(value, int | float) or (
                fld.kind == "integer" and not float(value).is_integer()):
            wanted = "a whole number" if fld.kind == "integer" else "a number"
            raise InvalidArgument(f"expected {wanted}")
        if fld.minimum is not None and value < fld.minimum:
            raise InvalidArgument(f"at least {fld.minimum:g}")
        if fld.maximum is not None and value > fld.maximum:
            raise InvalidArgument(f"at most {fld.maximum:g}")
        return int(value) if fld.kind == "integer" else value
    values = {v for v, _ in fld.options}
    if fld.kind == "choice":
        if value not in values:
            raise InvalidArgument("choose one of: " + ", ".join(v for v, _ in fld.options[:20]))
        return value
    if fld.kind == "choices":
        if not isinstance(value, list) or any(v not in values for v in value):
            raise InvalidArgument("choose among: " + ", ".join(v for v, _ in fld.options[:20]))
        _check_length(fld, len(value), "choices")
        return value
    if not isinstance(value, str):
        raise InvalidArgument("expected text")
    _check_length(fld, len(value), "characters")
    _check_format(fld.format, value)
    return value


def _check_length(fld: Field, size: int, unit: str) -> None:
    if fld.min_length is not None and size < fld.min_length:
        raise InvalidArgument(f"at least {fld.min_length} {unit}")
    if fld.max_length is not None and size > fld.max_length:
        raise InvalidArgument(f"at most {fld.max_length} {unit}")


def _check_format(fmt: str | None, value: str) -> None:
    if fmt == "email" and not _EMAIL.match(value):
        raise InvalidArgument("expected an email address")
    if fmt == "uri" and not urlsplit(value).scheme:
        raise InvalidArgument("expected a URI (with a scheme, e.g. https://…)")
    try:
        if fmt == "date":
            datetime.date.fromisoformat(value)
        elif fmt == "date-time":
            datetime.datetime.fromisoformat(value)
    except ValueError:
        raise InvalidArgument(f"expected an ISO 8601 {fmt}, e.g. "
                              + ("2026-01-31" if fmt == "date" else "2026-01-31T12:00:00Z")
                              ) from None
