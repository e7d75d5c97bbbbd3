"""Validation against hand-written JSON Schemas (2020-12 by default).

Schemas generated from type hints are validated by msgspec (see `signatures`); this module
covers schemas written by hand and kept verbatim: tool input/output schemas, elicitation
schemas. `jsonschema` is imported lazily so a server that never needs it never pays for it.
Remote `$ref`s are never fetched (spec: implementations MUST NOT dereference network URIs).
"""

from __future__ import annotations

from typing import Any

MAX_ERRORS = 5

# Dialect URIs (without a trailing "#") → jsonschema validator class; no `$schema` = 2020-12.
_DIALECTS = {
    "": "Draft202012Validator",
    "https://json-schema.org/draft/2020-12/schema": "Draft202012Validator",
    "https://json-schema.org/draft/2019-09/schema": "Draft201909Validator",
    "http://json-schema.org/draft-07/schema": "Draft7Validator",
    "http://json-schema.org/draft-06/schema": "Draft6Validator",
    "http://json-schema.org/draft-04/schema": "Draft4Validator",
}


class SchemaValidator:
    """A compiled validator for one schema; `errors(value)` lists what is wrong."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self._validator: Any = None

    def _compiled(self) -> Any:
        if self._validator is None:
            import jsonschema
            from referencing import Registry

            dialect = self.schema.get("$schema") or ""
            cls_name = _DIALECTS.get(str(dialect).rstrip("#"))
            if cls_name is None:
                raise ValueError(f"unsupported JSON Schema dialect: {dialect}")
            cls = getattr(jsonschema, cls_name)
            cls.check_schema(self.schema)

            def refuse_remote(uri: str) -> Any:
                raise LookupError(f"remote $ref {uri!r} is not fetched")

            registry: Any = Registry(retrieve=refuse_remote)  # type: ignore[call-arg]
            self._validator = cls(self.schema, registry=registry)
        return self._validator

    def errors(self, value: Any) -> list[str]:
        out: list[str] = []
        for error in self._compiled().iter_errors(value):
            where = "/".join(str(p) for p in error.absolute_path)
            out.append(f"{where or '(root)'}: {error.message}")
            if len(out) >= MAX_ERRORS:
                break
        return out


def check_schema(schema: dict[str, Any]) -> None:
    """Raise `ValueError` if `schema` is not a valid schema of its dialect."""
    try:
        SchemaValidator(schema)._compiled()
    except Exception as exc:
        raise ValueError(f"invalid JSON Schema: {exc}") from exc
