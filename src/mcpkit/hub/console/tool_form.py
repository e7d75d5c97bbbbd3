"""The "Try a tool" form: a tool's input schema → form fields, and the posted form → the call's
`arguments`, with an error per field. Pure: no IO.

    fields = form_fields(schema)                        # a fresh form (defaults pre-filled)
    arguments, errors = arguments_from(schema, posted)  # on submit; call the tool if no errors
    fields = form_fields(schema, posted, errors)        # the form again, each error at its field
    has_form(schema)    # False: show only the JSON textarea (RAW_FIELD)
    form_note(schema)   # a sentence for the page when some arguments are not fields, or None
    raw_value(posted)   # the JSON textarea's text to show again

The page renders them with the macro in templates/_tool_fields.html:
`tool_fields(fields, raw_value(posted), errors.get(RAW_FIELD), form_note(schema))`.

How a property (after `["X", "null"]` or `anyOf/oneOf: [X, {"type": "null"}]` is read as X,
nullable) becomes a control, and how its posted text becomes an argument:

- `enum` (or `const`) of scalars → `select`, each option the value's text (a string as itself,
  anything else as JSON); an empty option when the field may be left empty. An enum of more
  than `max_choices` options, of options longer than `max_choice_chars`, of options whose texts
  collide (`1` and `"1"`) or that include `""` is shown as its type's control instead (the
  schema check still holds the value to the enum);
- `boolean` → a `checkbox` when required ("on" or absent); when optional or nullable a
  `select` of true / false with an empty option, so an untouched optional boolean stays out of
  the arguments (a checkbox cannot say "not given");
- `integer` / `number` → parsed strictly: ASCII digits, an optional sign, a fraction and an
  exponent; no NaN or Infinity, nothing out of a float's range; an integer is exact (`1e3` is
  1000, `1.5` is refused) and a number written without a fraction or exponent is an int;
- `string` → `text`, or a `textarea` when the text is likely long or multi-line: a
  `contentMediaType` or `contentEncoding`, a `maxLength` over LONG_TEXT_CHARS, or a default or
  posted value with a line break. Its text is taken as typed, with the browser's CRLF line
  breaks read as "\\n";
- anything else (object, array, null, several types, anyOf/oneOf/allOf, $ref, no type) →
  `json`, a textarea parsed as JSON (within the byte and nesting bounds).

An empty field is left out of the arguments, or is the error "required" when the property is
in the schema's `required` list, or is `null` when it is required but nullable. When `posted`
has a non-empty RAW_FIELD, the arguments are that JSON object and the fields are ignored.

Once every field reads, the arguments are checked against the schema (mcpkit.validation, RE2
patterns and a step budget); a problem goes next to the field of its path's first element, and
any other (at the root, under an argument that is not a field, or anything in the raw JSON
mode) to RAW_FIELD's key, as "where: what". A schema that does not compile, or is bigger or
deeper than the check's bounds, is not checked: the upstream checks the call anyway.

The schema is the upstream's and the post the user's: both are hostile input. Nothing here
raises on any shape or size of either; every walk and every text is bounded by `FormLimits`
(defaults below): at most `max_fields` fields (the rest through the raw JSON; `form_note`
says so), labels and descriptions cut, values over `max_value_bytes` refused, JSON values
parsed by msgspec (strict JSON) and refused when nested deeper than `max_json_depth`.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal, TypeAlias

import msgspec

from mcpkit.hub.catalog_limits import nested_deeper_than
from mcpkit.schema_patterns import PatternPolicy
from mcpkit.validation import SchemaValidator

Kind: TypeAlias = Literal["text", "textarea", "number", "integer", "checkbox", "select", "json"]

RAW_FIELD = "arguments_json"
"""The textarea holding the whole arguments object as JSON; also the key of every error that
belongs to no field."""
INPUT_PREFIX = "arg."
"""A field's control is named INPUT_PREFIX + the argument's name: never csrf_token or RAW_FIELD."""

MAX_FIELDS = 64
"""Properties shown as fields; the others are reachable through the raw JSON."""
MAX_CHOICES = 200
"""Options of one select; a longer enum is typed instead."""
MAX_CHOICE_CHARS = 200
"""Characters of one option's text; an enum with a longer one is typed instead."""
MAX_NAME_CHARS = 128
"""Characters of a property name shown as a field; a longer one is reachable by raw JSON."""
MAX_LABEL_CHARS = 200
"""Characters of a label (the property's title or name), cut with "…"."""
MAX_DESCRIPTION_CHARS = 1000
"""Characters of a description, cut with "…"."""
MAX_ERROR_CHARS = 1000
"""Characters of an error shown at a field, cut with "…"."""
MAX_VALUE_BYTES = 1024 * 1024
"""UTF-8 bytes of one posted value (a field's or the raw JSON); a longer one is refused."""
MAX_JSON_DEPTH = 64
"""Arrays and objects nested in one JSON value (as the hub's catalog bound, MAX_ITEM_DEPTH)."""
MAX_NUMBER_CHARS = 400
"""Characters of a number field's text (Python refuses integers of over 4300 digits)."""
MAX_CHECKED_SCHEMA_VALUES = 10_000
"""JSON values in a schema the arguments are checked against; a bigger one is not checked.
jsonschema checks the schema itself first, at about 0.1 ms per value: 10,000 values (some
2,500 plain properties) cost about a second."""
MAX_CHECKED_SCHEMA_DEPTH = 64
"""Nesting of a schema the arguments are checked against; a deeper one is not checked."""
LONG_TEXT_CHARS = 256
"""A string whose `maxLength` is over this gets a textarea."""


@dataclass(frozen=True, slots=True)
class FormLimits:
    """The bounds of one form (the module's constants by default)."""

    max_fields: int = MAX_FIELDS
    max_choices: int = MAX_CHOICES
    max_choice_chars: int = MAX_CHOICE_CHARS
    max_name_chars: int = MAX_NAME_CHARS
    max_label_chars: int = MAX_LABEL_CHARS
    max_description_chars: int = MAX_DESCRIPTION_CHARS
    max_error_chars: int = MAX_ERROR_CHARS
    max_value_bytes: int = MAX_VALUE_BYTES
    max_json_depth: int = MAX_JSON_DEPTH
    max_number_chars: int = MAX_NUMBER_CHARS
    max_checked_schema_values: int = MAX_CHECKED_SCHEMA_VALUES
    max_checked_schema_depth: int = MAX_CHECKED_SCHEMA_DEPTH


DEFAULT_LIMITS = FormLimits()


@dataclass(frozen=True, slots=True)
class FormField:
    name: str
    """The argument (property) name."""
    input_name: str
    """The HTML control's name: INPUT_PREFIX + name."""
    label: str
    """The property's `title`, else its name (at most max_label_chars)."""
    kind: Kind
    required: bool
    """Marked required: left empty, it is the error "required"."""
    description: str | None
    choices: tuple[str, ...]
    """kind == "select": each option's value as the user sees it (no empty option: the
    template adds one when not `required`)."""
    value: str
    """What the control shows: the posted value, else the schema's default, else "" (a
    checkbox: "on" or "")."""
    error: str | None
    control_id: str
    """The control's HTML id (`arg-<n>`: a property name may hold anything)."""


# --- how each property is shown and read -------------------------------------------------------

OnEmpty: TypeAlias = Literal["omit", "error", "null"]


@dataclass(frozen=True, slots=True)
class _Control:
    name: str
    kind: Kind
    on_empty: OnEmpty
    label: str
    description: str | None
    default: str
    choices: tuple[str, ...] = ()
    choice_values: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class _Plan:
    form: bool
    """Whether the schema can be shown as fields."""
    controls: list[_Control] = field(default_factory=list)
    total: int = 0
    """Properties the schema lists (fields or not)."""


_TYPE_KINDS: dict[str, Kind] = {"string": "text", "integer": "integer", "number": "number",
                                "boolean": "checkbox"}
_SCALARS = (str, int, float, bool, type(None))
_OPEN_KEYWORDS = ("anyOf", "oneOf", "allOf", "$ref", "$dynamicRef", "if", "patternProperties",
                  "additionalProperties", "unevaluatedProperties", "dependentSchemas")
"""Root keywords through which a schema without `properties` may still take arguments."""


def _plan(schema: object, limits: FormLimits) -> _Plan:
    """The controls of `schema`'s first properties (at most max_fields looked at)."""
    if not isinstance(schema, Mapping) or not _object_typed(schema.get("type", "object")):
        return _Plan(form=False)
    properties = schema.get("properties")
    if properties is None:
        return _Plan(form=not any(schema.get(key) not in (None, False)
                                  for key in _OPEN_KEYWORDS))
    if not isinstance(properties, Mapping):
        return _Plan(form=False)
    required = _required_names(schema.get("required"))
    controls = []
    for index, (name, prop) in enumerate(properties.items()):
        if index >= limits.max_fields:
            break
        if isinstance(name, str) and len(name) <= limits.max_name_chars:
            controls.append(_control(name, prop, name in required, limits))
    return _Plan(form=True, controls=controls, total=len(properties))


def _object_typed(declared: object) -> bool:
    return declared == "object" or (isinstance(declared, list) and "object" in declared)


def _required_names(required: object) -> frozenset[str]:
    if not isinstance(required, list):
        return frozenset()
    return frozenset(name for name in required if isinstance(name, str))


def _control(name: str, prop: object, in_required: bool, limits: FormLimits) -> _Control:
    """How the property `name` (its schema `prop`, any shape) is shown and read."""
    shown, nullable = _unwrap_nullable(prop) if isinstance(prop, Mapping) else ({}, False)
    on_empty: OnEmpty = ("null" if nullable else "error") if in_required else "omit"
    label = _cut(_text_of(shown.get("title")) or name, limits.max_label_chars)
    description = _text_of(shown.get("description"))
    described = _cut(description, limits.max_description_chars) if description else None
    kind = _kind(shown, on_empty)
    selectable = _choices(shown, kind, limits)
    if selectable is not None:
        texts, values = selectable
        default = _choice_default(shown, texts, values)
        return _Control(name, "select", on_empty, label, described, default, texts, values)
    default = _default_text(kind, shown, limits)
    if kind == "text" and (_long_text(shown) or "\n" in default):
        kind = "textarea"
    return _Control(name, kind, on_empty, label, described, default)


def _unwrap_nullable(prop: Mapping[Any, Any]) -> tuple[Mapping[Any, Any], bool]:
    """`{"type": ["X", "null"]}` and `{"anyOf": [X, {"type": "null"}]}` (or oneOf) read as X,
    nullable; the outer title, description and default win over X's."""
    declared = prop.get("type")
    if isinstance(declared, list) and "null" in declared:
        others = [each for each in declared if each != "null"]
        if len(others) == 1:
            return {**prop, "type": others[0]}, True
        return prop, False
    for keyword in ("anyOf", "oneOf"):
        branches = prop.get(keyword)
        if isinstance(branches, list) and len(branches) == 2:
            kept = [each for each in branches if each != {"type": "null"}]
            if len(kept) == 1 and isinstance(kept[0], Mapping):
                outer = {key: prop[key] for key in ("title", "description", "default")
                         if key in prop}
                return {**kept[0], **outer}, True
    return prop, False


def _kind(shown: Mapping[Any, Any], on_empty: OnEmpty) -> Kind:
    declared = shown.get("type")
    kind = _TYPE_KINDS.get(declared, "json") if isinstance(declared, str) else "json"
    if kind == "checkbox" and on_empty != "error":
        return "select"  # a tri-state true / false / (not given)
    return kind


def _choices(shown: Mapping[Any, Any], kind: Kind, limits: FormLimits
             ) -> tuple[tuple[str, ...], tuple[Any, ...]] | None:
    """The options of a select, as texts and as the values they stand for; None when the
    property is not shown as a select."""
    values = [shown["const"]] if "const" in shown else shown.get("enum")
    if isinstance(values, list):
        texts = _choice_texts(values, limits)
        if texts is not None:
            return texts, tuple(values)
    if kind == "select":  # a boolean that may be left out: true, false or (empty)
        return ("true", "false"), (True, False)
    return None


def _choice_texts(values: list[Any], limits: FormLimits) -> tuple[str, ...] | None:
    """Each value's text, when `values` can be the options of a select."""
    if not values or len(values) > limits.max_choices:
        return None
    texts = []
    for value in values:
        text = _choice_text(value)
        if text is None or text == "" or len(text) > limits.max_choice_chars:
            return None
        texts.append(text)
    if len(set(texts)) != len(texts):
        return None
    return tuple(texts)


def _choice_text(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if not isinstance(value, _SCALARS):
        return None
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:  # NaN, or an int of more digits than Python prints
        return None


def _choice_default(shown: Mapping[Any, Any], texts: tuple[str, ...],
                    values: tuple[Any, ...]) -> str:
    if "default" not in shown:
        return ""
    default = shown["default"]
    for text, value in zip(texts, values, strict=True):
        # JSON equality: true is not 1
        if type(value) is type(default) and value == default:
            return text
    return ""


def _default_text(kind: Kind, shown: Mapping[Any, Any], limits: FormLimits) -> str:
    """The schema's default as the control shows it ("" when there is none it can show)."""
    if "default" not in shown:
        return ""
    default = shown["default"]
    if kind in ("text", "textarea"):
        fits = isinstance(default, str) and _byte_length(default) <= limits.max_value_bytes
        return default if fits else ""
    if kind == "checkbox":
        return "on" if default is True else ""
    if kind in ("integer", "number"):
        return _number_text(default, whole=kind == "integer")
    return _json_text(default, limits)


def _number_text(value: object, *, whole: bool) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return ""
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return ""
        if whole:
            return str(int(value)) if value.is_integer() else ""
        return repr(value)
    try:
        return str(value)
    except ValueError:  # more digits than Python prints
        return ""


def _json_text(value: object, limits: FormLimits) -> str:
    if not _within(value, limits.max_value_bytes // 2, limits.max_json_depth):
        return ""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return ""
    return text if _byte_length(text) <= limits.max_value_bytes else ""


def _long_text(shown: Mapping[Any, Any]) -> bool:
    max_length = shown.get("maxLength")
    return ("contentMediaType" in shown or "contentEncoding" in shown
            or (isinstance(max_length, int) and max_length > LONG_TEXT_CHARS))


# --- the public functions ----------------------------------------------------------------------


def has_form(schema: object, *, limits: FormLimits = DEFAULT_LIMITS) -> bool:
    """Whether `schema` can be shown as fields: an object schema (or one with no `type`) whose
    `properties` is an object, or that takes no arguments at all. When False the page shows
    only the raw JSON textarea (RAW_FIELD) and `form_fields` is empty."""
    return _plan(schema, limits).form


def form_note(schema: object, *, limits: FormLimits = DEFAULT_LIMITS) -> str | None:
    """A sentence for the page when some of the tool's arguments are not fields, else None."""
    plan = _plan(schema, limits)
    if not plan.form:
        return ("This tool's input schema cannot be shown as a form: give its arguments as "
                "a JSON object.")
    left_out = plan.total - len(plan.controls)
    if left_out <= 0:
        return None
    return (f"The form shows {len(plan.controls)} of this tool's {plan.total:,} arguments; "
            "to give the others, edit the arguments as JSON (which replaces the form's "
            "values).")


def form_fields(schema: object, posted: Mapping[str, str] | None = None,
                errors: Mapping[str, str] | None = None, *,
                limits: FormLimits = DEFAULT_LIMITS) -> list[FormField]:
    """The fields of `schema`'s properties (at most max_fields), showing the `posted` values
    (or, on a fresh form, the defaults) and `errors` (by argument name)."""
    fields = []
    for index, control in enumerate(_plan(schema, limits).controls):
        input_name = INPUT_PREFIX + control.name
        value = _shown_value(control, posted, input_name, limits)
        kind = control.kind
        if kind == "text" and "\n" in value:
            kind = "textarea"  # a text input would drop the line breaks
        error = errors.get(control.name) if errors is not None else None
        fields.append(FormField(
            name=control.name, input_name=input_name, label=control.label, kind=kind,
            required=control.on_empty == "error", description=control.description,
            choices=control.choices, value=value,
            error=_cut(error, limits.max_error_chars) if isinstance(error, str) else None,
            control_id=f"arg-{index}"))
    return fields


def raw_value(posted: Mapping[str, str] | None, *, limits: FormLimits = DEFAULT_LIMITS) -> str:
    """The raw JSON textarea's posted text to show again ("" when absent or over the bound)."""
    text = _posted_text(posted, RAW_FIELD)
    return text if text is not None and _byte_length(text) <= limits.max_value_bytes else ""


def arguments_from(schema: object, posted: Mapping[str, str], *,
                   limits: FormLimits = DEFAULT_LIMITS
                   ) -> tuple[dict[str, Any], dict[str, str]]:
    """(arguments, errors by argument name; RAW_FIELD's key for an error of the raw JSON or of
    no field). Call the tool only when the errors are empty."""
    raw = _posted_text(posted, RAW_FIELD)
    if raw is not None and raw.strip():
        arguments, problem = _read_raw(raw, limits)
        if problem is not None:
            return {}, {RAW_FIELD: problem}
        return arguments, _schema_errors(schema, arguments, frozenset(), limits)
    controls = _plan(schema, limits).controls
    arguments = {}
    errors = {}
    for control in controls:
        read = _read(control, _posted_text(posted, INPUT_PREFIX + control.name), limits)
        if isinstance(read, _Problem):
            errors[control.name] = read.message
        elif read is not _OMIT:
            arguments[control.name] = read
    if errors:
        return arguments, errors
    names = frozenset(control.name for control in controls)
    return arguments, _schema_errors(schema, arguments, names, limits)


# --- reading the posted text -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Problem:
    message: str


_OMIT = object()
"""What `_read` returns for an empty optional field: the argument is left out."""

_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _posted_text(posted: Mapping[str, str] | None, key: str) -> str | None:
    if posted is None:
        return None
    value = posted.get(key)
    return value if isinstance(value, str) else None  # an uploaded file is no field's value


def _shown_value(control: _Control, posted: Mapping[str, str] | None, input_name: str,
                 limits: FormLimits) -> str:
    if posted is None:
        return control.default
    text = _posted_text(posted, input_name)
    if control.kind == "checkbox":
        return "on" if text in ("on", "true") else ""  # an unchecked box is not posted
    if text is None:
        return control.default
    return text if _byte_length(text) <= limits.max_value_bytes else ""


def _read(control: _Control, text: str | None, limits: FormLimits) -> object:
    """The argument `text` gives, `_OMIT`, or a `_Problem`."""
    if control.kind == "checkbox":
        if text in (None, "", "off", "false"):
            return False
        return True if text in ("on", "true") else _Problem("a checkbox is either on or off")
    if text is None or text == "" or (control.kind != "text" and control.kind != "textarea"
                                       and not text.strip()):
        if control.on_empty == "error":
            return _Problem("required")
        return None if control.on_empty == "null" else _OMIT
    size = _byte_length(text)
    if size > limits.max_value_bytes:
        return _Problem(f"too long: {size:,} bytes; at most {limits.max_value_bytes:,}")
    if control.kind == "select":
        try:
            return control.choice_values[control.choices.index(text)]
        except ValueError:
            return _Problem("not one of the choices")
    if control.kind in ("integer", "number"):
        return _read_number(text.strip(), whole=control.kind == "integer", limits=limits)
    if control.kind == "json":
        return _read_json(text, limits)
    return _read_text(text)


def _read_text(text: str) -> object:
    try:
        text.encode()
    except UnicodeEncodeError:
        return _Problem("not valid Unicode text (it holds a lone surrogate)")
    return text.replace("\r\n", "\n")  # browsers post a textarea's line breaks as CRLF


def _read_number(text: str, *, whole: bool, limits: FormLimits) -> object:
    expected = "a whole number, such as 42" if whole else "a number, such as 42 or 3.5"
    if len(text) > limits.max_number_chars:
        return _Problem(f"too long for a number: {len(text):,} characters; at most "
                        f"{limits.max_number_chars}")
    if _INTEGER.fullmatch(text):
        return int(text)
    if not _NUMBER.fullmatch(text):
        return _Problem(f"not {expected}")
    if whole:
        return _whole(text, limits)
    number = float(text)
    if number in (float("inf"), float("-inf")):
        return _Problem("out of range: too large for a number")
    return number


def _whole(text: str, limits: FormLimits) -> object:
    """An integer written with a fraction or an exponent (`3.0`, `1e3`: what a browser's
    number input allows), exactly; `1.5` is not one."""
    exact = Decimal(text)
    if exact.adjusted() > limits.max_number_chars:
        return _Problem(f"out of range: more than {limits.max_number_chars} digits")
    if exact != exact.to_integral_value():
        return _Problem("not a whole number, such as 42")
    return int(exact)


def _read_json(text: str, limits: FormLimits) -> object:
    try:
        value = msgspec.json.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeError, RecursionError) as exc:
        hint = ' (text goes in double quotes: "like this")' if "byte 0)" in str(exc) else ""
        return _Problem(f"not valid JSON: {exc}{hint}")
    if isinstance(value, dict | list) and nested_deeper_than(value, limits.max_json_depth):
        return _Problem(f"nested deeper than {limits.max_json_depth} levels")
    return value


def _read_raw(text: str, limits: FormLimits) -> tuple[dict[str, Any], str | None]:
    size = _byte_length(text)
    if size > limits.max_value_bytes:
        return {}, f"too long: {size:,} bytes; at most {limits.max_value_bytes:,}"
    value = _read_json(text, limits)
    if isinstance(value, _Problem):
        return {}, value.message
    if not isinstance(value, dict):
        return {}, f"the arguments must be a JSON object, not {_json_type(value)}"
    return value, None


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "true or false"
    if value is None:
        return "null"
    return "a number"


# --- the schema check --------------------------------------------------------------------------


def _schema_errors(schema: object, arguments: dict[str, Any], fields: frozenset[str],
                   limits: FormLimits) -> dict[str, str]:
    """`arguments` checked against `schema`: each problem at the field its path starts with,
    the others (with where they are) at RAW_FIELD. A schema that cannot be checked: none."""
    if not isinstance(schema, dict) or not _within(
            schema, limits.max_checked_schema_values, limits.max_checked_schema_depth):
        return {}
    try:
        problems = SchemaValidator(schema, patterns=PatternPolicy.SKIP).problems(arguments)
    except (Exception, RecursionError):  # a schema jsonschema chokes on is not checked
        return {}
    errors: dict[str, str] = {}
    elsewhere: list[str] = []
    for problem in problems:
        if problem.unchecked:
            continue
        first = problem.path[0] if problem.path else None
        if isinstance(first, str) and first in fields:
            deeper = "/".join(str(step) for step in problem.path[1:])
            message = f"at {deeper}: {problem.message}" if deeper else problem.message
            errors.setdefault(first, message)
        else:
            elsewhere.append(f"{problem.where}: {problem.message}")
    if elsewhere:
        errors[RAW_FIELD] = _cut("; ".join(elsewhere), limits.max_error_chars)
    return errors


# --- bounds ------------------------------------------------------------------------------------


def _within(value: object, max_values: int, max_depth: int) -> bool:
    """Whether `value` holds at most `max_values` JSON values nested at most `max_depth`
    levels (iteratively, stopping at the first excess: a hostile value must not cost more)."""
    count = 0
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > max_values:
            return False
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            return False
        # values seen + values pending never pass max_values: one child more says "too many"
        room = max_values - count - len(stack)
        stack.extend((child, depth + 1) for child in itertools.islice(children, room + 1))
        if count + len(stack) > max_values:
            return False
    return True


def _byte_length(text: str) -> int:
    """UTF-8 bytes of `text` (a lone surrogate counted as three)."""
    return len(text.encode("utf-8", "surrogatepass"))


def _text_of(value: object) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _cut(text: str, most: int) -> str:
    return text if len(text) <= most else text[:most - 1] + "…"
