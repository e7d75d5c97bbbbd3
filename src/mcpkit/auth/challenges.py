"""Strict parsing of an HTTP `WWW-Authenticate` header value (RFC 9110 §11.6.1) into its
challenges: `[("dpop", {"error": "use_dpop_nonce", ...}), ("bearer", {...})]`.

The value comes from the server, so it is hostile input: its length is bounded (a named,
settable limit), a parameter given twice in one challenge is refused (RFC 9110: each parameter
name occurs once), and anything off the grammar raises `MalformedChallenge`, a `PeerError`,
never a builtin. Scheme and parameter names are case-insensitive and come back lowercased;
values come back as sent (quoted strings unescaped). A token68 (`Basic dXNlcg==`) is skipped:
no scheme this package reads carries one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from mcpkit.errors import PeerError

__all__ = ["DEFAULT_MAX_CHALLENGE_CHARS", "Challenge", "MalformedChallenge", "parse_challenges"]

DEFAULT_MAX_CHALLENGE_CHARS = 8192
"""The longest `WWW-Authenticate` value read (all header lines joined); a longer one is refused."""

Challenge = tuple[str, dict[str, str]]
"""A challenge: its scheme (lowercased) and its auth-params (names lowercased)."""

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_SPACES = re.compile(r"[ \t]*")
_QDTEXT = re.compile(r"[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]*")


class MalformedChallenge(PeerError):
    """A `WWW-Authenticate` header the server sent that does not follow RFC 9110's grammar,
    or one over the length limit."""


def parse_challenges(values: str | Iterable[str], *,
                     max_chars: int = DEFAULT_MAX_CHALLENGE_CHARS) -> list[Challenge]:
    """Every challenge in one header value, or in several header lines (given as an iterable,
    read as one comma-joined list, which is what RFC 9110 says several lines mean)."""
    text = values if isinstance(values, str) else ", ".join(values)
    if len(text) > max_chars:
        raise MalformedChallenge(
            f"the WWW-Authenticate header is {len(text)} characters, over the limit of "
            f"{max_chars}")
    return _Scanner(text).challenges()


class _Scanner:
    """A left-to-right reader over one header value: challenges are `scheme [SP (token68 /
    #auth-param)]`, separated by commas that also separate a challenge's parameters."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def challenges(self) -> list[Challenge]:
        found: list[Challenge] = []
        # True right after a scheme, before any comma: only there may a token68 appear.
        after_scheme = False
        while True:
            self._skip(_SPACES)
            if self.pos >= len(self.text):
                return found
            if self.text[self.pos] == ",":
                self.pos += 1
                after_scheme = False
                continue
            name = self._expect(_TOKEN, "a scheme or parameter name")
            if self._at_parameter_value():
                if not found:
                    raise MalformedChallenge("a WWW-Authenticate parameter before any scheme")
                self._add_parameter(found[-1][1], name.lower(), self._parameter_value())
                self._expect_item_end()
                after_scheme = False
            elif after_scheme:
                # `Scheme token68`: the token just read starts the token68; finish it.
                self.pos -= len(name)
                self._expect(_TOKEN68, "a token68")
                self._expect_item_end()
                after_scheme = False
            else:
                found.append((name.lower(), {}))
                after_scheme = True
                if self.pos < len(self.text) and self.text[self.pos] not in " ,":
                    raise MalformedChallenge("a WWW-Authenticate scheme not followed by a "
                                             "space or a comma")

    def _at_parameter_value(self) -> bool:
        """After a name: is this `name = value` (not a token68's trailing `=` padding)?"""
        start = self.pos
        self._skip(_SPACES)
        if self.pos < len(self.text) and self.text[self.pos] == "=":
            self.pos += 1
            self._skip(_SPACES)
            if self.pos < len(self.text) and (self.text[self.pos] == '"'
                                              or _TOKEN.match(self.text, self.pos)):
                return True
        self.pos = start
        return False

    def _parameter_value(self) -> str:
        if self.text[self.pos] != '"':
            return self._expect(_TOKEN, "a parameter value")
        self.pos += 1
        parts: list[str] = []
        while True:
            parts.append(self._expect(_QDTEXT, "quoted text", allow_empty=True))
            if self.pos >= len(self.text):
                raise MalformedChallenge("an unterminated quoted string in WWW-Authenticate")
            char = self.text[self.pos]
            if char == '"':
                self.pos += 1
                return "".join(parts)
            if char == "\\" and self.pos + 1 < len(self.text) and _is_quotable(
                    self.text[self.pos + 1]):
                parts.append(self.text[self.pos + 1])
                self.pos += 2
                continue
            raise MalformedChallenge("a character not allowed in a quoted string in "
                                     "WWW-Authenticate")

    def _expect_item_end(self) -> None:
        """A parameter or token68 ends the item: only spaces, then a comma or the end."""
        self._skip(_SPACES)
        if self.pos < len(self.text) and self.text[self.pos] != ",":
            raise MalformedChallenge(f"WWW-Authenticate: expected a comma at character "
                                     f"{self.pos}")

    @staticmethod
    def _add_parameter(params: dict[str, str], name: str, value: str) -> None:
        if name in params:
            raise MalformedChallenge(f"the WWW-Authenticate parameter {name!r} is given twice "
                                     "in one challenge")
        params[name] = value

    def _skip(self, pattern: re.Pattern[str]) -> None:
        match = pattern.match(self.text, self.pos)
        if match:
            self.pos = match.end()

    def _expect(self, pattern: re.Pattern[str], what: str, *, allow_empty: bool = False) -> str:
        match = pattern.match(self.text, self.pos)
        if match is None or (not match.group() and not allow_empty):
            raise MalformedChallenge(f"WWW-Authenticate: expected {what} at character "
                                     f"{self.pos}")
        self.pos = match.end()
        return match.group()


def _is_quotable(char: str) -> bool:
    """RFC 9110's quoted-pair: a backslash before HTAB, SP, VCHAR or obs-text."""
    return char in "\t " or "\x21" <= char <= "\x7e" or "\x80" <= char <= "\xff"
