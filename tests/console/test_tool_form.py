"""The "Try a tool" form (hub/console/tool_form.py and _tool_fields.html), pure: a tool's
input schema → fields, the posted form → the call's arguments with an error per field, and
the macro's HTML. Schemas and posts are hostile input: nothing may raise, everything stays
within the form's bounds."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jinja2 import Environment, PackageLoader, select_autoescape

from mcpkit.hub.console.tool_form import (
    INPUT_PREFIX,
    MAX_CHOICES,
    MAX_DESCRIPTION_CHARS,
    MAX_FIELDS,
    MAX_LABEL_CHARS,
    RAW_FIELD,
    FormField,
    FormLimits,
    arguments_from,
    form_fields,
    form_note,
    has_form,
    raw_value,
)


def obj(required: list[str] | None = None, **properties: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        schema["required"] = required
    return schema


def only(schema: dict[str, Any], posted: dict[str, str] | None = None) -> FormField:
    [field] = form_fields(schema, posted)
    return field


# --- kinds -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("prop", "kind", "choices"), [
    ({"type": "string"}, "text", ()),
    ({"type": "string", "maxLength": 10_000}, "textarea", ()),
    ({"type": "string", "contentMediaType": "text/markdown"}, "textarea", ()),
    ({"type": "string", "default": "line 1\nline 2"}, "textarea", ()),
    ({"type": "integer"}, "integer", ()),
    ({"type": "number"}, "number", ()),
    ({"type": "boolean"}, "select", ("true", "false")),  # optional: true / false / not given
    ({"enum": ["a", "b"]}, "select", ("a", "b")),
    ({"type": "integer", "enum": [1, 2, 3]}, "select", ("1", "2", "3")),
    ({"enum": ["x", 1, True, None, 2.5]}, "select", ("x", "1", "true", "null", "2.5")),
    ({"const": "only"}, "select", ("only",)),
    ({"enum": ["1", 1]}, "json", ()),             # texts collide: typed as JSON instead
    ({"type": "string", "enum": ["", "a"]}, "text", ()),  # "" is the empty option's
    ({"type": "string", "enum": [f"v{i}" for i in range(MAX_CHOICES + 1)]}, "text", ()),
    ({"type": "string", "enum": ["x" * 1000]}, "text", ()),
    ({"type": ["string", "null"]}, "text", ()),
    ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "integer", ()),
    ({"oneOf": [{"type": "null"}, {"enum": ["a"]}]}, "select", ("a",)),
    ({"type": "object"}, "json", ()),
    ({"type": "array", "items": {"type": "string"}}, "json", ()),
    ({"type": ["integer", "string"]}, "json", ()),
    ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, "json", ()),
    ({"$ref": "#/$defs/thing"}, "json", ()),
    ({}, "json", ()),
    (True, "json", ()),
    ("garbage", "json", ()),
])
def test_each_property_becomes_its_control(prop: Any, kind: str, choices: tuple[str, ...]
                                           ) -> None:
    field = only(obj(p=prop))
    assert (field.kind, field.choices) == (kind, choices)
    assert field.input_name == "arg.p" and field.name == "p"


def test_a_required_boolean_is_a_checkbox_read_as_on_or_absent() -> None:
    schema = obj(["flag"], flag={"type": "boolean", "default": True})
    assert only(schema).kind == "checkbox"
    assert only(schema).value == "on"                               # the default, checked
    assert only(schema, {}).value == ""                             # posted unchecked
    assert arguments_from(schema, {"arg.flag": "on"}) == ({"flag": True}, {})
    assert arguments_from(schema, {}) == ({"flag": False}, {})
    assert arguments_from(schema, {"arg.flag": "maybe"})[1] == {
        "flag": "a checkbox is either on or off"}


def test_an_optional_boolean_left_untouched_stays_out() -> None:
    schema = obj(flag={"type": "boolean"})
    assert arguments_from(schema, {"arg.flag": ""}) == ({}, {})
    assert arguments_from(schema, {"arg.flag": "false"}) == ({"flag": False}, {})
    assert arguments_from(schema, {"arg.flag": "true"}) == ({"flag": True}, {})


def test_label_and_description_come_from_title_and_description() -> None:
    field = only(obj(q={"type": "string", "title": "Query", "description": "What to find"}))
    assert (field.label, field.description) == ("Query", "What to find")
    bare = only(obj(q={"type": "string", "title": "  ", "description": 3}))
    assert (bare.label, bare.description) == ("q", None)


def test_nullable_unwrapping_keeps_the_outer_title_and_default() -> None:
    field = only(obj(n={"anyOf": [{"type": "integer", "title": "inner"}, {"type": "null"}],
                        "title": "Count", "default": 3}))
    assert (field.kind, field.label, field.value) == ("integer", "Count", "3")


# --- required, optional, defaults ---------------------------------------------------------------


def test_empty_optional_fields_are_left_out_and_empty_required_ones_are_errors() -> None:
    schema = obj(["name", "size"], name={"type": "string"}, size={"type": "integer"},
                 note={"type": "string"}, extra={"type": "object"})
    fields = {field.name: field for field in form_fields(schema)}
    assert fields["name"].required and fields["size"].required
    assert not fields["note"].required and not fields["extra"].required
    posted = {"arg.name": "", "arg.size": "  ", "arg.note": "", "arg.extra": ""}
    assert arguments_from(schema, posted) == ({}, {"name": "required", "size": "required"})
    posted = {"arg.name": "x", "arg.size": "2", "arg.note": "", "arg.extra": ""}
    assert arguments_from(schema, posted) == ({"name": "x", "size": 2}, {})


def test_a_required_nullable_field_left_empty_is_null() -> None:
    schema = obj(["when"], when={"type": ["string", "null"]})
    assert not only(schema).required
    assert arguments_from(schema, {"arg.when": ""}) == ({"when": None}, {})
    assert arguments_from(schema, {"arg.when": "now"}) == ({"when": "now"}, {})


def test_defaults_prefill_a_fresh_form_and_the_post_wins_after() -> None:
    schema = obj(s={"type": "string", "default": "hi"}, n={"type": "number", "default": 2.5},
                 i={"type": "integer", "default": 4.0}, o={"type": "object", "default": {"a": [1]}},
                 e={"enum": [1, 2], "default": 2}, b={"type": "boolean", "default": False},
                 wrong={"type": "integer", "default": True})
    fresh = {field.name: field.value for field in form_fields(schema)}
    assert fresh == {"s": "hi", "n": "2.5", "i": "4", "o": '{"a": [1]}', "e": "2", "b": "false",
                     "wrong": ""}
    posted = {"arg.s": "", "arg.n": "7"}
    again = {field.name: field.value for field in form_fields(schema, posted)}
    assert again["s"] == "" and again["n"] == "7" and again["o"] == '{"a": [1]}'


def test_errors_are_shown_at_their_fields() -> None:
    schema = obj(a={"type": "string"}, b={"type": "string"})
    fields = form_fields(schema, {"arg.a": "x"}, {"a": "bad", "zzz": "elsewhere"})
    assert [field.error for field in fields] == ["bad", None]


# --- strict numbers ------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "text", "value"), [
    ("integer", "42", 42), ("integer", " -7 ", -7), ("integer", "+3", 3),
    ("integer", "1" * 300, int("1" * 300)), ("integer", "1e3", 1000), ("integer", "3.0", 3),
    ("integer", "1e30", 10**30), ("integer", "-2.50e1", -25),
    ("number", "3", 3), ("number", "-2.5e3", -2500.0), ("number", ".5", 0.5),
    ("number", "1e-400", 0.0),
])
def test_numbers_parse_strictly(kind: str, text: str, value: int | float) -> None:
    arguments, errors = arguments_from(obj(x={"type": kind}), {"arg.x": text})
    assert errors == {}
    assert arguments["x"] == value and type(arguments["x"]) is type(value)


@pytest.mark.parametrize(("kind", "text", "error"), [
    ("integer", "1.5", "not a whole number, such as 42"),
    ("integer", "1e-3", "not a whole number, such as 42"),
    ("integer", "1e99999", "out of range: more than 400 digits"),
    ("integer", "true", "not a whole number, such as 42"),
    ("integer", "1_000", "not a whole number, such as 42"),
    ("integer", "١٢", "not a whole number, such as 42"),          # Arabic-Indic digits
    ("number", "NaN", "not a number, such as 42 or 3.5"),
    ("number", "Infinity", "not a number, such as 42 or 3.5"),
    ("number", "inf", "not a number, such as 42 or 3.5"),
    ("number", "0x10", "not a number, such as 42 or 3.5"),
    ("number", "1e400", "out of range: too large for a number"),
    ("number", "9" * 500, "too long for a number: 500 characters; at most 400"),
])
def test_what_is_not_a_number_is_the_fields_error(kind: str, text: str, error: str) -> None:
    assert arguments_from(obj(x={"type": kind}), {"arg.x": text}) == ({}, {"x": error})


# --- enum selects --------------------------------------------------------------------------------


def test_a_select_gives_back_the_enum_value_not_its_text() -> None:
    schema = obj(["level"], level={"enum": [1, "two", None, False]})
    assert only(schema).required
    assert arguments_from(schema, {"arg.level": "1"}) == ({"level": 1}, {})
    assert arguments_from(schema, {"arg.level": "null"}) == ({"level": None}, {})
    assert arguments_from(schema, {"arg.level": "false"}) == ({"level": False}, {})
    assert arguments_from(schema, {"arg.level": "three"}) == (
        {}, {"level": "not one of the choices"})


# --- JSON fields ---------------------------------------------------------------------------------


def test_a_json_field_is_parsed_as_json() -> None:
    schema = obj(tags={"type": "array"}, any={})
    assert arguments_from(schema, {"arg.tags": '["a", 1]', "arg.any": '"text"'}) == (
        {"tags": ["a", 1], "any": "text"}, {})
    _, errors = arguments_from(schema, {"arg.any": "hello"})
    assert errors["any"].startswith("not valid JSON: ")
    assert 'text goes in double quotes' in errors["any"]
    _, errors = arguments_from(schema, {"arg.tags": "[" * 100 + "]" * 100})
    assert errors == {"tags": "nested deeper than 64 levels"}
    _, errors = arguments_from(schema, {"arg.tags": "[" * 100_000 + "]" * 100_000})
    assert errors["tags"].startswith("not valid JSON")


def test_values_over_the_byte_bound_are_refused_and_not_echoed() -> None:
    schema = obj(text={"type": "string"}, data={"type": "object"})
    limits = FormLimits(max_value_bytes=100)
    big = "é" * 60  # 120 bytes in 60 characters
    posted = {"arg.text": big, "arg.data": json.dumps({"k": "v" * 200})}
    assert arguments_from(schema, posted, limits=limits) == ({}, {
        "text": "too long: 120 bytes; at most 100", "data": "too long: 209 bytes; at most 100"})
    assert [field.value for field in form_fields(schema, posted, limits=limits)] == ["", ""]
    assert raw_value({RAW_FIELD: "{}" + " " * 200}, limits=limits) == ""


# --- the raw JSON mode ---------------------------------------------------------------------------


def test_raw_json_replaces_the_fields() -> None:
    schema = obj(["a"], a={"type": "integer"}, b={"type": "string"})
    posted = {RAW_FIELD: '{"a": 5, "b": "x"}', "arg.a": "not looked at"}
    assert arguments_from(schema, posted) == ({"a": 5, "b": "x"}, {})
    assert raw_value(posted) == '{"a": 5, "b": "x"}'
    assert arguments_from(schema, {RAW_FIELD: " \n ", "arg.a": "1"}) == ({"a": 1}, {})


@pytest.mark.parametrize(("raw", "error"), [
    ("[1, 2]", "the arguments must be a JSON object, not an array"),
    ('"a"', "the arguments must be a JSON object, not a string"),
    ("3", "the arguments must be a JSON object, not a number"),
    ("null", "the arguments must be a JSON object, not null"),
    ('{"a": NaN}', "not valid JSON: "),
])
def test_raw_json_that_is_not_an_object_is_its_error(raw: str, error: str) -> None:
    arguments, errors = arguments_from(obj(a={"type": "integer"}), {RAW_FIELD: raw})
    assert arguments == {} and list(errors) == [RAW_FIELD]
    assert errors[RAW_FIELD].startswith(error)


def test_schema_errors_of_raw_json_all_go_to_the_raw_field() -> None:
    schema = obj(["a"], a={"type": "integer"})
    _, errors = arguments_from(schema, {RAW_FIELD: '{"a": "x"}'})
    assert errors == {RAW_FIELD: "a: 'x' is not of type 'integer'"}


# --- the schema check ----------------------------------------------------------------------------


def test_schema_errors_land_at_the_field_their_path_starts_with() -> None:
    schema = obj(n={"type": "integer", "minimum": 10},
                 code={"type": "string", "pattern": "^[A-Z]+$"},
                 items={"type": "array", "items": {"type": "integer"}})
    schema["additionalProperties"] = False
    schema["minProperties"] = 4
    _, errors = arguments_from(schema, {"arg.n": "3", "arg.code": "abc", "arg.items": '[1, "x"]'})
    assert errors == {
        "n": "3 is less than the minimum of 10",
        "code": "'abc' does not match '^[A-Z]+$'",
        "items": "at 1: 'x' is not of type 'integer'",
        RAW_FIELD: "(root): {'n': 3, 'code': 'abc', 'items': [1, 'x']} does not have enough "
                   "properties",
    }


def test_a_required_argument_that_is_no_field_is_reported_at_the_raw_field() -> None:
    schema = obj(["p1"], **{f"p{i}": {"type": "string"} for i in range(3)})
    _, errors = arguments_from(schema, {"arg.p0": "x"}, limits=FormLimits(max_fields=1))
    assert errors == {RAW_FIELD: "(root): 'p1' is a required property"}


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "string", "minLength": "3"}}},  # invalid
    {"type": "object", "properties": {"a": {"type": "string"}}, "$schema": "urn:x"},
    {"type": "object", "properties": {"a": {"type": "string"}},             # a $ref loop
     "$defs": {"l": {"$ref": "#/$defs/l"}}, "allOf": [{"$ref": "#/$defs/l"}]},
    {"type": "object", "properties": {"a": {"type": "string"}},             # too deep to check
     "$defs": {"d": json.loads('{"not": ' * 80 + "{}" + "}" * 80)}},
])
def test_a_schema_that_cannot_be_checked_is_not_checked(schema: dict[str, Any]) -> None:
    assert arguments_from(schema, {"arg.a": "x"}) == ({"a": "x"}, {})


# --- hostile schemas -----------------------------------------------------------------------------


def test_ten_thousand_properties_make_max_fields_fields_and_a_note() -> None:
    schema = obj(**{f"p{i}": {"type": "string"} for i in range(10_000)})
    fields = form_fields(schema)
    assert len(fields) == MAX_FIELDS
    assert form_note(schema) == (
        f"The form shows {MAX_FIELDS} of this tool's 10,000 arguments; to give the others, "
        "edit the arguments as JSON (which replaces the form's values).")
    assert arguments_from(schema, {"arg.p0": "x", "arg.p9999": "y"}) == ({"p0": "x"}, {})
    assert form_note(obj(a={})) is None


def test_hostile_shapes_do_not_break_the_form() -> None:
    deep: Any = {}
    for _ in range(1000):
        deep = {"type": "object", "properties": {"x": deep}}
    assert [field.kind for field in form_fields(deep)] == ["json"]
    assert arguments_from(deep, {"arg.x": "{}"}) == ({"x": {}}, {})
    assert not has_form({"type": "object", "properties": ["a", "b"]})
    assert form_fields({"type": "object", "properties": ["a", "b"]}) == []
    assert not has_form({"type": "string"}) and not has_form(None) and not has_form([1])
    assert not has_form({"anyOf": [{"type": "object"}]})
    assert has_form({"type": "object"}) and form_fields({"type": "object"}) == []
    assert form_note({"type": "array"}) is not None
    odd: dict[Any, Any] = {"type": "object", "required": "a",
                           "properties": {1: {}, ("t",): {}, "a" * 1000: {}, "ok": {}}}
    assert [field.name for field in form_fields(odd)] == ["ok"]
    assert not form_fields(odd)[0].required
    titled = only(obj(t={"type": "string", "title": "T" * 1_000_000,
                         "description": "D" * 1_000_000}))
    assert len(titled.label) == MAX_LABEL_CHARS and titled.label.endswith("…")
    assert titled.description is not None
    assert len(titled.description) == MAX_DESCRIPTION_CHARS
    nested_default = only(obj(d={"type": "array", "default": json.loads("[" * 500 + "]" * 500)}))
    assert (nested_default.kind, nested_default.value) == ("json", "")
    huge_enum = only(obj(e={"enum": list(range(100_000))}))
    assert huge_enum.kind == "json" and huge_enum.choices == ()


def test_hostile_posts_do_not_break_the_form() -> None:
    schema = obj(a={"type": "string"}, b={"type": "object"})
    posted: dict[str, Any] = {"arg.a": b"bytes", "arg.b": "\ud800", RAW_FIELD: 7}
    arguments, errors = arguments_from(schema, posted)  # a non-text value is no value
    assert arguments == {} and list(errors) == ["b"]
    assert errors["b"].startswith("not valid JSON")
    assert arguments_from(schema, {"arg.a": "x\ud800"}) == (
        {}, {"a": "not valid Unicode text (it holds a lone surrogate)"})
    assert arguments_from(schema, {RAW_FIELD: "{" * 10_000})[1][RAW_FIELD].startswith(
        "not valid JSON")
    assert arguments_from(schema, {"arg.a": "line\r\nnext"}) == ({"a": "line\nnext"}, {})


# --- property-based: any schema, any post -------------------------------------------------------

KEYWORDS = ["type", "properties", "required", "enum", "const", "default", "title",
            "description", "anyOf", "oneOf", "allOf", "items", "minimum", "maxLength",
            "pattern", "format", "$ref", "additionalProperties", "contentMediaType", "not"]
TYPE_NAMES = st.sampled_from(["string", "integer", "number", "boolean", "object", "array",
                              "null", "bogus"])
SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
           | st.text(max_size=12))
SCHEMAS = st.recursive(
    SCALARS | TYPE_NAMES,
    lambda kids: (st.lists(kids, max_size=4)
                  | st.dictionaries(st.sampled_from(KEYWORDS) | st.text(max_size=6),
                                    kids | TYPE_NAMES | st.lists(TYPE_NAMES, max_size=3),
                                    max_size=6)),
    max_leaves=40)
TOP_SCHEMAS = st.one_of(
    SCHEMAS,
    st.fixed_dictionaries(
        {"type": st.just("object"),
         "properties": st.dictionaries(st.text(max_size=8), SCHEMAS, max_size=10)},
        optional={"required": st.lists(st.text(max_size=8), max_size=5) | SCHEMAS,
                  "additionalProperties": st.booleans()}))
LIMITS = st.sampled_from([FormLimits(), FormLimits(
    max_fields=2, max_choices=2, max_choice_chars=3, max_name_chars=4, max_label_chars=3,
    max_description_chars=5, max_error_chars=20, max_value_bytes=16, max_json_depth=2,
    max_number_chars=5, max_checked_schema_values=30, max_checked_schema_depth=3)])
KINDS = {"text", "textarea", "number", "integer", "checkbox", "select", "json"}


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(TOP_SCHEMAS, st.data(), LIMITS)
def test_any_schema_and_any_post_give_bounded_fields_and_arguments(
        schema: Any, data: st.DataObject, limits: FormLimits) -> None:
    properties = schema.get("properties") if isinstance(schema, dict) else None
    names = list(properties) if isinstance(properties, dict) else []
    keys = st.sampled_from([INPUT_PREFIX + name for name in names] + [RAW_FIELD, "arg.zz"])
    values = st.text(max_size=40) | SCALARS.map(json.dumps) | st.sampled_from(["on", "true"])
    posted = data.draw(st.dictionaries(keys, values, max_size=8))
    arguments, errors = arguments_from(schema, posted, limits=limits)
    fields = form_fields(schema, posted, errors, limits=limits)
    fresh = form_fields(schema, limits=limits)

    assert isinstance(arguments, dict)
    msgspec.json.encode(arguments)  # what the call sends is JSON
    shown = {field.name for field in fields}
    assert set(errors) <= shown | {RAW_FIELD}
    if not (posted.get(RAW_FIELD) or "").strip():
        assert set(arguments) <= shown
    if not has_form(schema, limits=limits):
        assert fields == [] == fresh
    assert len(fields) <= limits.max_fields and len(fresh) == len(fields)
    assert len({field.control_id for field in fields}) == len(fields)
    for field in (*fields, *fresh):
        assert field.kind in KINDS
        assert field.input_name == INPUT_PREFIX + field.name
        assert len(field.name) <= limits.max_name_chars
        assert 0 < len(field.label) <= limits.max_label_chars or field.name == ""
        assert field.description is None or len(field.description) <= limits.max_description_chars
        assert field.error is None or len(field.error) <= limits.max_error_chars
        assert len(field.choices) <= limits.max_choices
        assert all(0 < len(choice) <= limits.max_choice_chars for choice in field.choices)
        assert (field.kind == "select") == bool(field.choices)
        assert len(field.value.encode("utf-8", "surrogatepass")) <= limits.max_value_bytes


# --- property-based: the round trip through the rendered form ------------------------------------

PLAIN = st.characters(blacklist_categories=("Cs", "Cc")) | st.just("\n")
PLAIN_TEXT = st.text(PLAIN, min_size=1, max_size=20)
ENUM_ITEMS = (st.none() | st.booleans() | st.integers(-10**6, 10**6)
              | st.floats(allow_nan=False, allow_infinity=False) | PLAIN_TEXT)


def _choice_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


@st.composite
def scalar_property(draw: st.DrawFn) -> tuple[dict[str, Any], Any]:
    """A property of one scalar type and a valid value of it."""
    kind = draw(st.sampled_from(["string", "integer", "number", "boolean", "enum"]))
    if kind == "enum":
        enum = draw(st.lists(ENUM_ITEMS, min_size=1, max_size=6, unique_by=_choice_text))
        return {"enum": enum}, draw(st.sampled_from(enum))
    values = {"string": PLAIN_TEXT, "integer": st.integers(-10**30, 10**30),
              "number": st.floats(allow_nan=False, allow_infinity=False) | st.integers(),
              "boolean": st.booleans()}
    return {"type": kind}, draw(values[kind])


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_values_shown_by_the_form_come_back_as_the_same_arguments(data: st.DataObject) -> None:
    names = data.draw(st.lists(st.text(st.characters(blacklist_categories=("Cs", "Cc")),
                                       max_size=10), unique=True, max_size=8))
    properties, required, expected = {}, [], {}
    for name in names:
        prop, value = data.draw(scalar_property())
        if data.draw(st.booleans()):
            required.append(name)
        if name in required or data.draw(st.booleans()):
            prop["default"] = value
            expected[name] = value
        properties[name] = prop
    schema = {"type": "object", "properties": properties, "required": required}
    posted = posted_by_browser(render(form_fields(schema), "", None))
    assert arguments_from(schema, posted) == (expected, {})


# --- the macro's HTML ----------------------------------------------------------------------------


def render(fields: list[FormField], raw: str, raw_error: str | None, note: str | None = None
           ) -> str:
    env = Environment(loader=PackageLoader("mcpkit.hub.console", "templates"),
                      autoescape=select_autoescape(["html"]), trim_blocks=True,
                      lstrip_blocks=True)
    return str(env.get_template("_tool_fields.html").module.tool_fields(  # type: ignore[attr-defined]
        fields, raw, raw_error, note))


class _Controls(HTMLParser):
    """Each control's attributes and what a browser would post for the form."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.posted: dict[str, str] = {}
        self.controls: dict[str, dict[str, str | None]] = {}
        self.labels: dict[str, str] = {}
        self._select: tuple[str, list[tuple[str, bool]]] | None = None
        self._text: tuple[str, list[str]] | None = None
        self._label: tuple[str, list[str]] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag in ("input", "select", "textarea"):
            self.controls[named.get("id") or ""] = named
        name = named.get("name") or ""
        if tag == "input" and named.get("type") == "checkbox":
            if "checked" in named:
                self.posted[name] = named.get("value") or "on"
        elif tag == "input":
            self.posted[name] = named.get("value") or ""
        elif tag == "select":
            self._select = (name, [])
        elif tag == "option" and self._select is not None:
            self._select[1].append((named.get("value") or "", "selected" in named))
        elif tag == "textarea":
            self._text = (name, [])
        elif tag == "label":
            self._label = (named.get("for") or "", [])

    def handle_data(self, data: str) -> None:
        for collecting in (self._text, self._label):
            if collecting is not None:
                collecting[1].append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "select" and self._select is not None:
            name, options = self._select
            chosen = [value for value, selected in options if selected] or [options[0][0]]
            self.posted[name] = chosen[0]
            self._select = None
        elif tag == "textarea" and self._text is not None:
            name, parts = self._text
            text = "".join(parts)
            # a browser drops the line break right after <textarea> and posts CRLF breaks
            self.posted[name] = text.removeprefix("\n").replace("\n", "\r\n")
            self._text = None
        elif tag == "label" and self._label is not None:
            self.labels[self._label[0]] = "".join(self._label[1])
            self._label = None


def posted_by_browser(html: str) -> dict[str, str]:
    parser = _Controls()
    parser.feed(html)
    return parser.posted


def test_the_macro_labels_describes_and_marks_each_control() -> None:
    schema = obj(["name", "flag"],
                 name={"type": "string", "title": "<script>alert(1)</script>",
                       "description": "Who <b>"},
                 count={"type": "integer"}, ratio={"type": "number", "default": 0.5},
                 flag={"type": "boolean"}, mode={"enum": ["a", "b"]},
                 data={"type": "object", "default": {"k": "\n<v>"}})
    posted = {"arg.count": "x", "arg.name": ""}
    _, errors = arguments_from(schema, posted)
    fields = form_fields(schema, posted, errors)
    html = render(fields, '{"a": 1}', "bad <json>", form_note(schema))
    parser = _Controls()
    parser.feed(html)
    controls, labels = parser.controls, parser.labels
    by_name = {field.name: field for field in fields}

    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>" not in html and "<json>" not in html and "<v>" not in html
    assert labels[by_name["name"].control_id].startswith("<script>alert(1)</script>")
    assert "(required)" in labels[by_name["name"].control_id]
    name = controls[by_name["name"].control_id]
    assert "required" in name and name["aria-invalid"] == "true"
    assert name["aria-describedby"] == "arg-0-hint arg-0-error"
    assert 'id="arg-0-hint">Who &lt;b&gt;</p>' in html
    assert '<p class="field-error" id="arg-0-error">required</p>' in html
    count = controls[by_name["count"].control_id]
    assert (count["type"], count["inputmode"], count["value"]) == ("text", "numeric", "x")
    assert count["aria-describedby"] == f"{by_name['count'].control_id}-error"
    assert "required" not in count and "aria-invalid" in count
    ratio = controls[by_name["ratio"].control_id]
    assert (ratio["type"], ratio["inputmode"], ratio["value"]) == ("text", "decimal", "0.5")
    assert "aria-invalid" not in ratio and "aria-describedby" not in ratio
    flag = controls[by_name["flag"].control_id]
    assert flag["type"] == "checkbox" and "required" not in flag  # required=must be checked
    assert set(labels) >= {field.control_id for field in fields}
    assert parser.posted["arg.data"] == '{"k": "\\n<v>"}'
    assert parser.posted["arg.mode"] == ""  # the empty option of an optional select
    raw = controls["arguments_json"]
    assert raw["aria-invalid"] == "true"
    assert raw["aria-describedby"] == "arguments_json-hint arguments_json-error"
    assert parser.posted[RAW_FIELD] == '{"a": 1}'
    assert "<summary>Edit the arguments as JSON</summary>" in html
    assert "<details class=\"raw-arguments\" open>" in html
    assert 'class="field-error" id="arguments_json-error">bad &lt;json&gt;</p>' in html


def test_a_required_select_starts_on_a_placeholder_not_on_its_first_choice() -> None:
    html = render(form_fields(obj(["mode"], mode={"enum": ["a", "b"]})), "", None)
    assert '<option value="" disabled selected>(choose one)</option>' in html
    chosen = render(form_fields(obj(["mode"], mode={"enum": ["a", "b"], "default": "b"})), "",
                    None)
    assert "(choose one)" not in chosen and '<option value="b" selected>' in chosen


def test_the_raw_json_stays_folded_until_needed() -> None:
    fields = form_fields(obj(a={"type": "string"}))
    assert '<details class="raw-arguments">' in render(fields, "", None)
    assert '<details class="raw-arguments" open>' in render([], "", None)
