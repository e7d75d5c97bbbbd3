"""Token-request form fields and headers whose repr shows only the names.

A token request carries secrets (a client secret, a signed client assertion, an ID token, a
refresh token) as form fields or an `Authorization` header. The builders in this package hand
them back as a `SecretFields` mapping: a plain `dict[str, str]` to the code that sends it, but
one that prints as `SecretFields(names=[...])`, so a log line or an exception that shows the
object never shows a value.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcpkit.errors import InvalidArgument

__all__ = ["SecretFields", "merge_fields"]


class SecretFields(dict[str, str]):
    """Form fields or headers of a token request; repr()/str() name the fields, never a value."""

    def __repr__(self) -> str:
        return f"SecretFields(names={sorted(self)!r})"

    __str__ = __repr__


def merge_fields(*parts: Mapping[str, str]) -> SecretFields:
    """One form from several (a grant's fields, the client authentication's fields). A name
    given twice is a programming error (two parts disagreeing on `client_id`, say), refused
    rather than letting the later one win silently."""
    merged = SecretFields()
    for part in parts:
        for name, value in part.items():
            if name in merged:
                raise InvalidArgument(f"the token request field {name!r} is set twice")
            merged[name] = value
    return merged
