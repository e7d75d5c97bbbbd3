"""`WWW-Authenticate` parsing: the `Bearer` challenge's parameters (RFC 6750 §3, RFC 9728 §5.1).

The header is hostile input: it is bounded in length, parsed by a linear tokenizer, and a
malformed header yields no challenge (the caller then discovers by well-known URLs) instead
of an exception."""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_HEADER_CHARS = 8192
"""Longer `WWW-Authenticate` values are ignored: no legitimate challenge comes near this."""

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
# One auth-param: name = token68-ish value or a quoted string (escapes allowed). Linear: the
# quoted alternative consumes one character or one escape pair per step.
_PARAM = re.compile(rf'({_TOKEN})[ \t]*=[ \t]*(?:"((?:[^"\\]|\\.)*)"|({_TOKEN}))')
_SCHEME = re.compile(rf"({_TOKEN})(?=[ \t]|,|$)")
_SKIP = re.compile(r"[ \t,]*")
_UNESCAPE = re.compile(r"\\(.)")
_TOKEN68 = re.compile(r"[ \t]+[A-Za-z0-9\-._~+/]+=*[ \t]*(?=,|$)")


@dataclass(frozen=True, slots=True)
class BearerChallenge:
    """The parameters of a `Bearer` challenge that matter to a client."""

    resource_metadata: str | None = None
    scope: str | None = None
    error: str | None = None
    error_description: str | None = None

    @property
    def scopes(self) -> list[str]:
        return self.scope.split() if self.scope else []


def parse_bearer_challenge(value: str | None, *,
                           max_chars: int = MAX_HEADER_CHARS) -> BearerChallenge | None:
    """The `Bearer` challenge in a `WWW-Authenticate` value, or None (absent, too long,
    malformed, or a parameter given twice, which RFC 6750 §3 forbids)."""
    if not value or len(value) > max_chars:
        return None
    challenges = _split_challenges(value)
    if challenges is None:
        return None
    for scheme, params in challenges:
        if scheme.lower() == "bearer":
            return BearerChallenge(
                resource_metadata=params.get("resource_metadata"),
                scope=params.get("scope"),
                error=params.get("error"),
                error_description=params.get("error_description"),
            )
    return None


def _split_challenges(value: str) -> list[tuple[str, dict[str, str]]] | None:
    """[(scheme, {param: value})] in order, or None when the value does not parse."""
    out: list[tuple[str, dict[str, str]]] = []
    pos = 0
    end = len(value)
    while True:
        pos = _SKIP.match(value, pos).end()  # type: ignore[union-attr]
        if pos >= end:
            return out
        param = _PARAM.match(value, pos)
        if param is not None and out:
            name = param.group(1).lower()
            quoted, token = param.group(2), param.group(3)
            text = _UNESCAPE.sub(r"\1", quoted) if quoted is not None else token
            if name in out[-1][1]:
                return None
            out[-1][1][name] = text
            pos = param.end()
            continue
        scheme = _SCHEME.match(value, pos)
        if scheme is None:
            return None
        out.append((scheme.group(1), {}))
        pos = scheme.end()
        # token68 form (`Basic dXNlcg==`): a value with no `=` param after the scheme.
        token68 = _TOKEN68.match(value, pos)
        if token68 is not None and "=" not in token68.group(0).strip().rstrip("="):
            pos = token68.end()
