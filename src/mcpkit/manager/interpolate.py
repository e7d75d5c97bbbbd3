"""`${VAR}` interpolation of config values, the shell's way.

    ${VAR}            the variable's value; an error when it is unset
    ${VAR:-default}   the value, or `default` when the variable is unset *or empty*
    $$                a literal `$`

A `$` followed by anything else (`$HOME`, `cost: 5$`) is kept as it is, so plain text rarely
needs escaping. Variable names are `[A-Za-z_][A-Za-z0-9_]*`. A default may itself hold
`${…}` and `$$` (`${A:-${B:-none}}`); it is only expanded when it is used, so an unset
variable inside an unused default is no error. Substituted values are never expanded again.

Only string values are rewritten: lists and objects are walked, object keys are left alone
(an `env` key is a variable name, a `headers` key a header name), numbers and booleans pass
through. Pure: the environment is a parameter and nothing is read or written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from mcpkit.manager.config import ConfigError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXCERPT = 40


def interpolate(value: Any, environ: Mapping[str, str], where: str, *,
                keep_unset: bool = False) -> Any:
    """`value` with every string in it expanded; ConfigError names the variable and `where`.

    With `keep_unset`, an unset variable without a default is left as written (`${VAR}`)
    instead of being an error: for entries that are shown but not started (disabled ones).
    """
    if isinstance(value, str):
        return _Expander(environ, where, keep_unset).expand(value)
    if isinstance(value, list):
        return [interpolate(item, environ, where, keep_unset=keep_unset) for item in value]
    if isinstance(value, dict):
        return {key: interpolate(item, environ, where, keep_unset=keep_unset)
                for key, item in value.items()}
    return value


def escape(text: str) -> str:
    """`text` written so that interpolation gives it back unchanged (`$` → `$$`)."""
    return text.replace("$", "$$")


def is_variable_name(name: str) -> bool:
    return _NAME.fullmatch(name) is not None


class _Expander:
    def __init__(self, environ: Mapping[str, str], where: str, keep_unset: bool) -> None:
        self.environ = environ
        self.prefix = f"{where}: " if where else ""
        self.keep_unset = keep_unset

    def expand(self, text: str) -> str:
        out: list[str] = []
        i = 0
        while i < len(text):
            dollar = text.find("$", i)
            if dollar < 0:
                out.append(text[i:])
                break
            out.append(text[i:dollar])
            following = text[dollar + 1:dollar + 2]
            if following == "$":
                out.append("$")
                i = dollar + 2
            elif following == "{":
                replacement, i = self._reference(text, dollar)
                out.append(replacement)
            else:
                # A lone `$` is literal text: "$HOME" is not a reference here.
                out.append("$")
                i = dollar + 1
        return "".join(out)

    def _reference(self, text: str, start: int) -> tuple[str, int]:
        """Expand the `${…}` at `start`; returns the replacement and the index after `}`."""
        name_match = _NAME.match(text, start + 2)
        if name_match is None:
            raise self._malformed(text, start, "a variable name must follow ${")
        name = name_match.group()
        after = name_match.end()
        if text.startswith("}", after):
            return self._lookup(name, None, text[start:after + 1]), after + 1
        if text.startswith(":-", after):
            end = self._closing_brace(text, after + 2, start)
            return self._lookup(name, text[after + 2:end], text[start:end + 1]), end + 1
        if after >= len(text):
            raise self._malformed(text, start, "no closing }")
        raise self._malformed(text, start, "expected } or :- after the variable name")

    def _closing_brace(self, text: str, i: int, start: int) -> int:
        """The index of the `}` that closes a default starting at `i` (nested `${…}` and
        `$$` skipped)."""
        depth = 0
        while i < len(text):
            if text.startswith("$$", i):
                i += 2
                continue
            if text.startswith("${", i):
                depth += 1
                i += 2
                continue
            if text[i] == "}":
                if depth == 0:
                    return i
                depth -= 1
            i += 1
        raise self._malformed(text, start, "no closing }")

    def _lookup(self, name: str, default: str | None, written: str) -> str:
        value = self.environ.get(name)
        if default is not None:
            # Like the shell's `:-`: an empty value counts as unset.
            return value if value else self.expand(default)
        if value is not None:
            return value
        if self.keep_unset:
            return written
        raise ConfigError(f"{self.prefix}${{{name}}} is not set "
                          f"(use ${{{name}:-default}} for a default)")

    def _malformed(self, text: str, start: int, why: str) -> ConfigError:
        fragment = text[start:start + _EXCERPT]
        if len(text) - start > _EXCERPT:
            fragment += "…"
        return ConfigError(f"{self.prefix}malformed {fragment!r}: {why} "
                           "(write $$ for a literal $)")
