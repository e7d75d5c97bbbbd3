"""Resources and resource templates.

A template's `uriTemplate` uses RFC 6570 simple expansion: `{var}` matches one path segment
(no `/`), `{+var}` and `{var*}` match the rest (slashes included). Matched values are passed
to the reader by name.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from mcpkit.errors import InvalidArgumentType
from mcpkit.server.signatures import context_param_of

_VAR = re.compile(r"\{([+#]?)([A-Za-z0-9_]+)(\*?)\}")


def _optional_fields(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


@dataclass(slots=True)
class ResourceDef:
    uri: str
    name: str
    read: Callable[..., Any]
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None
    icons: list[Any] | None = None
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None
    context_param: str | None = None
    scopes: frozenset[str] = frozenset()
    """OAuth scopes a caller needs to see and read it (resource_auth.py)."""

    def to_wire(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "name": self.name,
            **_optional_fields(
                title=self.title,
                description=self.description,
                mimeType=self.mime_type,
                size=self.size,
                icons=self.icons,
                annotations=self.annotations,
                _meta=self.meta,
            ),
        }


@dataclass(slots=True)
class TemplateDef:
    uri_template: str
    name: str
    read: Callable[..., Any]
    pattern: re.Pattern[str]
    variables: tuple[str, ...]
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    icons: list[Any] | None = None
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None
    context_param: str | None = None
    scopes: frozenset[str] = frozenset()
    """OAuth scopes a caller needs to see and read it (resource_auth.py)."""

    def match(self, uri: str) -> dict[str, str] | None:
        found = self.pattern.fullmatch(uri)
        if found is None:
            return None
        return {k: unquote(v) for k, v in found.groupdict().items()}

    def to_wire(self) -> dict[str, Any]:
        return {
            "uriTemplate": self.uri_template,
            "name": self.name,
            **_optional_fields(
                title=self.title,
                description=self.description,
                mimeType=self.mime_type,
                icons=self.icons,
                annotations=self.annotations,
                _meta=self.meta,
            ),
        }


def is_template(uri: str) -> bool:
    return _VAR.search(uri) is not None


def compile_template(template: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """A regex that matches URIs of `template`, and its variable names in order."""
    parts: list[str] = []
    names: list[str] = []
    pos = 0
    for var in _VAR.finditer(template):
        parts.append(re.escape(template[pos : var.start()]))
        operator, name, explode = var.groups()
        greedy = operator in ("+", "#") or explode == "*"
        parts.append(f"(?P<{name}>{'.+' if greedy else '[^/?#]+'})")
        names.append(name)
        pos = var.end()
    parts.append(re.escape(template[pos:]))
    return re.compile("".join(parts)), tuple(names)


def build_resource(
    fn_or_value: Any, uri: str, *, name: str | None, context_type: type, **extra: Any
) -> ResourceDef:
    """A static resource: `fn_or_value` is a reader function or the content itself."""
    if callable(fn_or_value):
        read, ctx = fn_or_value, context_param_of(fn_or_value, context_type)
        default_name = getattr(fn_or_value, "__name__", uri)
        extra.setdefault("description", inspect.getdoc(fn_or_value))
    else:

        def read() -> Any:
            return fn_or_value

        ctx, default_name = None, uri
    return ResourceDef(uri=uri, name=name or default_name, read=read, context_param=ctx, **extra)


def build_template(
    fn: Callable[..., Any],
    uri_template: str,
    *,
    name: str | None,
    context_type: type,
    **extra: Any,
) -> TemplateDef:
    pattern, variables = compile_template(uri_template)
    params = set(inspect.signature(fn).parameters)
    missing = [v for v in variables if v not in params]
    if missing:
        raise InvalidArgumentType(
            f"{uri_template}: reader has no parameter for {', '.join(missing)}")
    extra.setdefault("description", inspect.getdoc(fn))
    return TemplateDef(
        uri_template=uri_template,
        name=name or fn.__name__,
        read=fn,
        pattern=pattern,
        variables=variables,
        context_param=context_param_of(fn, context_type),
        **extra,
    )
