"""Validation against hand-written JSON Schemas (2020-12 by default).

Schemas generated from type hints are validated by msgspec (see `signatures`); this module
covers schemas written by hand and kept verbatim: tool input/output schemas, elicitation
schemas. `jsonschema` is imported lazily so a server that never needs it never pays for it.
Remote `$ref`s are never fetched (spec: implementations MUST NOT dereference network URIs).

The schema and the value checked against it come from different parties (a tool's author and
its caller; a server's outputSchema and the client checking it), so validation must stay
bounded whatever either of them sends. jsonschema's validators are extended (not forked) with:
- every regex keyword (`pattern`, `patternProperties`, and the `patternProperties` lookups of
  `additionalProperties` and `unevaluatedProperties`) matched by RE2 in linear time
  (`schema_patterns`); patterns RE2 cannot run are refused or skipped by `PatternPolicy`;
- `uniqueItems` by hashing, in linear time (stock jsonschema compares every pair of objects);
- a budget of keyword evaluations per value (`max_steps`): `$ref` fan-out such as
  `{"allOf": [{"$ref": "#/$defs/a1"}, {"$ref": "#/$defs/a1"}]}` nested 40 deep is exponential;
  past the budget the value is reported invalid with a message naming the limit;
- `$ref` cycles that never consume the value (`{"$ref": "#"}`) end in RecursionError, which
  is reported as a problem of the schema instead of escaping.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from mcpkit import schema_patterns
from mcpkit.errors import InvalidArgument
from mcpkit.schema_patterns import PatternPolicy

MAX_ERRORS = 5
# Each problem is cut to this many characters: jsonschema's messages quote the value and the
# pattern whole, and both may be megabytes long.
MAX_PROBLEM_CHARS = 500
# Keyword evaluations one value may cost: a base plus an allowance per JSON value in it, so a
# big but plain value (a few keywords per item) always fits while a schema's fan-out (what its
# `$ref`s multiply to, whatever the value) is cut off. 20,000 steps take about 0.2-0.4 s of CPU.
DEFAULT_MAX_STEPS = 20_000
DEFAULT_STEPS_PER_VALUE = 20

# Dialect URIs (without a trailing "#") → jsonschema validator class; no `$schema` = 2020-12.
_DIALECTS = {
    "": "Draft202012Validator",
    "https://json-schema.org/draft/2020-12/schema": "Draft202012Validator",
    "https://json-schema.org/draft/2019-09/schema": "Draft201909Validator",
    "http://json-schema.org/draft-07/schema": "Draft7Validator",
    "http://json-schema.org/draft-06/schema": "Draft6Validator",
    "http://json-schema.org/draft-04/schema": "Draft4Validator",
}

# Steps left for the value being validated; a one-item list so keyword functions can spend it.
_steps_left: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "mcpkit_schema_steps_left", default=None)


class _BudgetExceeded(Exception):
    """Internal: unwinds jsonschema's generators once the step budget is spent."""


def _spend() -> None:
    left = _steps_left.get()
    if left is not None:
        left[0] -= 1
        if left[0] < 0:
            raise _BudgetExceeded


class SchemaValidator:
    """A compiled validator for one schema; `errors(value)` lists what is wrong.

    `patterns` says what to do with a pattern RE2 cannot run: `REFUSE` (the default, for a
    process's own schemas: compiling raises `ValueError`) or `SKIP` (for a peer's schemas).
    One value may cost `max_steps` keyword evaluations plus `steps_per_value` per JSON value
    in it; past that it is reported invalid.
    """

    def __init__(
        self,
        schema: dict[str, Any],
        *,
        patterns: PatternPolicy = PatternPolicy.REFUSE,
        max_steps: int = DEFAULT_MAX_STEPS,
        steps_per_value: int = DEFAULT_STEPS_PER_VALUE,
    ) -> None:
        self.schema = schema
        self.patterns = patterns
        self.max_steps = max_steps
        self.steps_per_value = steps_per_value
        self._validator: Any = None

    def _compiled(self) -> Any:
        if self._validator is None:
            from referencing import Registry

            dialect = self.schema.get("$schema") or ""
            cls_name = _DIALECTS.get(str(dialect).rstrip("#"))
            if cls_name is None:
                raise InvalidArgument(f"unsupported JSON Schema dialect: {dialect}")
            cls = _bounded_class(cls_name, self.patterns)
            cls.check_schema(self.schema)
            if self.patterns is PatternPolicy.REFUSE:
                for pattern in _patterns_in(self.schema, depth=0):
                    schema_patterns.check_supported(pattern)

            def refuse_remote(uri: str) -> Any:
                # builtin: referencing wraps what `retrieve` raises in its Unretrievable
                raise LookupError(f"remote $ref {uri!r} is not fetched")

            registry: Any = Registry(retrieve=refuse_remote)  # type: ignore[call-arg]
            self._validator = cls(self.schema, registry=registry)
        return self._validator

    def errors(self, value: Any) -> list[str]:
        """What is wrong with `value` (at most MAX_ERRORS problems); a schema that cannot be
        compiled (a peer's: the process's own are checked when registered) is one problem."""
        return [_cut(f"{problem.where}: {problem.message}") for problem in self.problems(value)]

    def problems(self, value: Any) -> list[Problem]:
        """`errors` with each problem's place in the value kept apart (a form shows each next
        to its field). A problem with `unchecked` set says the value could not be checked at
        all: the schema does not compile, the step budget ran out or a `$ref` loops."""
        out: list[Problem] = []
        try:
            validator = self._compiled()
        except (Exception, RecursionError) as exc:
            return [Problem((), _cut(f"invalid JSON Schema: {exc}"), unchecked=True,
                            where="(schema)")]
        budget = self.max_steps + self.steps_per_value * _count_values(value)
        token = _steps_left.set([budget])
        try:
            for error in validator.iter_errors(value):
                path = tuple(error.absolute_path)
                out.append(Problem(path, _cut(error.message),
                                   where="/".join(str(p) for p in path) or "(root)"))
                if len(out) >= MAX_ERRORS:
                    break
        except _BudgetExceeded:
            out.append(Problem((), f"not validated: checking it against the schema took more "
                               f"than {budget} keyword evaluations (max_steps={self.max_steps} "
                               f"+ steps_per_value={self.steps_per_value} per value)",
                               unchecked=True))
        except RecursionError:
            out.append(Problem((), "not validated: the schema refers to itself without end",
                               unchecked=True))
        finally:
            _steps_left.reset(token)
        return out


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a value: `path` is where in it (keys and indexes; () = the value
    itself), `where` the same as text ("a/0/b", "(root)", "(schema)")."""

    path: tuple[str | int, ...]
    message: str
    unchecked: bool = False
    where: str = "(root)"


def _cut(problem: str) -> str:
    if len(problem) <= MAX_PROBLEM_CHARS:
        return problem
    return problem[:MAX_PROBLEM_CHARS] + f"… ({len(problem)} characters)"


def check_schema(schema: dict[str, Any]) -> None:
    """Raise `InvalidArgument` (a ValueError) if `schema` is not a valid schema of its
    dialect (or has a pattern RE2 cannot run)."""
    try:
        SchemaValidator(schema)._compiled()
    except Exception as exc:
        raise InvalidArgument(f"invalid JSON Schema: {exc}") from exc


def _count_values(value: Any) -> int:
    """How many JSON values `value` holds, itself included (iterative: no recursion limit)."""
    count, stack = 0, [value]
    while stack:
        node = stack.pop()
        count += 1
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return count


def _patterns_in(node: Any, depth: int) -> Iterator[str]:
    """Every `pattern` value and `patternProperties` key in a schema (bounded in depth)."""
    if depth > 200:
        raise InvalidArgument("schema nested more than 200 levels deep")
    if isinstance(node, dict):
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            yield pattern
        keyed = node.get("patternProperties")
        if isinstance(keyed, dict):
            yield from (key for key in keyed if isinstance(key, str))
        for child in node.values():
            yield from _patterns_in(child, depth + 1)
    elif isinstance(node, list):
        for child in node:
            yield from _patterns_in(child, depth + 1)


# --- the extended validator classes --------------------------------------------------------

Keyword = Callable[[Any, Any, Any, dict[str, Any]], Any]


@cache
def _bounded_class(cls_name: str, policy: PatternPolicy) -> Any:
    import jsonschema
    from jsonschema import validators

    base = getattr(jsonschema, cls_name)
    own = _keywords(policy, draft2019=cls_name == "Draft201909Validator")
    replaced = {name: own.get(name, fn) for name, fn in base.VALIDATORS.items()}
    for name in ("pattern", "patternProperties", "additionalProperties",
                 "unevaluatedProperties", "uniqueItems"):
        if name in base.VALIDATORS:
            replaced[name] = own[name]
    counted = {name: _counted(fn) for name, fn in replaced.items()}
    return validators.extend(base, validators=counted)


def _counted(keyword: Keyword) -> Keyword:
    def spend_then(validator: Any, value: Any, instance: Any, schema: dict[str, Any]) -> Any:
        _spend()
        return keyword(validator, value, instance, schema)
    return spend_then


def _keywords(policy: PatternPolicy, *, draft2019: bool) -> dict[str, Keyword]:
    from jsonschema import ValidationError

    def matches(pattern: str, text: str) -> bool:
        return schema_patterns.matcher(pattern, policy)(text)

    def pattern(validator: Any, patrn: str, instance: Any, schema: dict[str, Any]) -> Any:
        if validator.is_type(instance, "string") and not matches(patrn, instance):
            yield ValidationError(f"{instance!r} does not match {patrn!r}")

    def pattern_properties(validator: Any, pp: dict[str, Any], instance: Any,
                           schema: dict[str, Any]) -> Any:
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in pp.items():
            for key, value in instance.items():
                if matches(patrn, key):
                    yield from validator.descend(value, subschema, path=key, schema_path=patrn)

    def additional(instance: dict[str, Any], schema: dict[str, Any]) -> set[str]:
        properties = schema.get("properties", {})
        patterns = list(schema.get("patternProperties", {}))
        return {key for key in instance if key not in properties
                and not any(matches(p, key) for p in patterns)}

    def additional_properties(validator: Any, ap: Any, instance: Any,
                              schema: dict[str, Any]) -> Any:
        if not validator.is_type(instance, "object"):
            return
        extras = additional(instance, schema)
        if validator.is_type(ap, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], ap, path=extra)
        elif not ap and extras:
            joined = ", ".join(repr(each) for each in sorted(extras))
            if "patternProperties" in schema:
                patterns = ", ".join(repr(p) for p in sorted(schema["patternProperties"]))
                yield ValidationError(f"{joined} do not match any of the regexes: {patterns}")
            else:
                yield ValidationError(f"Additional properties are not allowed ({joined} "
                                      f"{'was' if len(extras) == 1 else 'were'} unexpected)")

    def unevaluated_properties(validator: Any, up: Any, instance: Any,
                               schema: dict[str, Any]) -> Any:
        if not validator.is_type(instance, "object"):
            return
        evaluated = _evaluated_keys(validator, instance, schema, matches, draft2019)
        bad = [key for key in instance if key not in evaluated
               and next(validator.descend(instance[key], up, path=key), None) is not None]
        if bad:
            joined = ", ".join(repr(each) for each in sorted(bad))
            if up is False:
                yield ValidationError(f"Unevaluated properties are not allowed ({joined} "
                                      f"{'was' if len(bad) == 1 else 'were'} unexpected)")
            else:
                yield ValidationError("Unevaluated properties are not valid under the given "
                                      f"schema ({joined} unevaluated and invalid)")

    def unique_items(validator: Any, ui: Any, instance: Any, schema: dict[str, Any]) -> Any:
        if ui and validator.is_type(instance, "array") and not _all_unique(instance):
            yield ValidationError(f"{instance!r} has non-unique elements")

    return {
        "pattern": pattern,
        "patternProperties": pattern_properties,
        "additionalProperties": additional_properties,
        "unevaluatedProperties": unevaluated_properties,
        "uniqueItems": unique_items,
    }


def _evaluated_keys(validator: Any, instance: dict[str, Any], schema: Any,
                    matches: Callable[[str, str], bool], draft2019: bool) -> set[str]:
    """The keys of `instance` that `schema` evaluates (the annotations `unevaluatedProperties`
    reads), following jsonschema's own rules for 2020-12 and 2019-09; each schema visited
    spends a step, so `$ref`/`$dynamicRef` fan-out stays within the budget."""
    _spend()
    if not isinstance(schema, dict):
        return set()
    keys: set[str] = set()

    def follow(sub_validator: Any, subschema: Any) -> None:
        keys.update(_evaluated_keys(sub_validator, instance, subschema, matches, draft2019))

    def follow_ref(resolved: Any) -> None:
        follow(validator.evolve(schema=resolved.contents, _resolver=resolved.resolver),
               resolved.contents)

    if "$ref" in schema:
        follow_ref(validator._resolver.lookup(schema["$ref"]))
    if draft2019 and "$recursiveRef" in schema:
        from referencing.jsonschema import lookup_recursive_ref
        follow_ref(lookup_recursive_ref(validator._resolver))
    if not draft2019 and "$dynamicRef" in schema:
        follow_ref(validator._resolver.lookup(schema["$dynamicRef"]))
    if draft2019:
        for keyword in ("properties", "additionalProperties", "unevaluatedProperties"):
            value = schema.get(keyword)
            if value is True:
                keys.update(instance)
            elif isinstance(value, dict):
                keys.update(key for key in value if key in instance)
    else:
        properties = schema.get("properties")
        if isinstance(properties, dict):
            keys.update(properties.keys() & instance.keys())
        for keyword in ("additionalProperties", "unevaluatedProperties"):
            if (subschema := schema.get(keyword)) is not None:
                keys.update(key for key, value in instance.items()
                            if next(validator.descend(value, subschema), None) is None)
    for patrn in schema.get("patternProperties", {}):
        keys.update(key for key in instance if matches(patrn, key))
    for name, subschema in schema.get("dependentSchemas", {}).items():
        if name in instance:
            follow(validator, subschema)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, []):
            if next(validator.descend(instance, subschema), None) is None:
                follow(validator, subschema)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            follow(validator, schema["if"])
            if "then" in schema:
                follow(validator, schema["then"])
        elif "else" in schema:
            follow(validator, schema["else"])
    return keys


def _all_unique(items: list[Any]) -> bool:
    """JSON equality of every pair, in linear time: 1 == 1.0, true != 1, key order ignored."""
    seen = {_hashable(item) for item in items}
    return len(seen) == len(items)


def _hashable(value: Any) -> Any:
    if isinstance(value, bool):
        return (bool, value)  # JSON true is not the number 1
    if isinstance(value, list):
        return (list, tuple(_hashable(item) for item in value))
    if isinstance(value, dict):
        return (dict, frozenset((key, _hashable(item)) for key, item in value.items()))
    return value  # str, int, float (1 == 1.0 and hash alike), None
