"""Exposed tool names: `mcp__<server>__<tool>`, safe for every LLM API, with a reverse map.

The OpenAI and Anthropic APIs accept tool names matching `^[a-zA-Z0-9_-]{1,64}$`. MCP tool
and server names are free text, so each part is sanitized (every other character becomes
`_`) and a name over 64 characters keeps its first 55 characters plus `_` and 8 hex digits
of a hash of the *original* (server, tool) pair: two long names that share a prefix stay
distinct, and the same pair always gets the same name.

Sanitizing is lossy (`a.b` and `a_b` both become `a_b`), so a `NameTable` detects when two
different pairs want one name: the later pair gets a hash-suffixed variant and the collision
is recorded. Names are never reassigned afterwards, so a model that saw a name keeps
reaching the same tool.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

MAX_NAME = 64
"""The longest tool name the OpenAI and Anthropic APIs accept."""
HASH_CHARS = 8
"""Hex digits of the hash appended to a long or colliding name."""
_HEAD = MAX_NAME - HASH_CHARS - 1  # 55: what is kept of a long name before `_<hash>`
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")  # ASCII classes: `\w` would let unicode letters in
VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What every exposed name matches."""


def sanitize(part: str) -> str:
    """`part` with every character outside `[A-Za-z0-9_-]` replaced by `_`; `_` when empty."""
    return _UNSAFE.sub("_", part) or "_"


def _digest(server: str, tool: str, salt: int = 0) -> str:
    # NUL cannot be typed into a config key or a tool name by accident, so it separates the
    # two parts unambiguously; the salt gives further candidates after a collision.
    key = f"{server}\0{tool}" if salt == 0 else f"{server}\0{tool}\0{salt}"
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]


def _with_hash(name: str, digest: str) -> str:
    return f"{name[:_HEAD]}_{digest}"


def qualified_name(server: str, tool: str, prefix: str = "mcp") -> str:
    """The exposed name of `tool` on `server`: `<prefix>__<server>__<tool>`, sanitized.

    `prefix=""` gives `<server>__<tool>`. Over `MAX_NAME` characters: the first 55
    characters, `_` and 8 hex digits of sha256 of `"<server>\\0<tool>"`.
    """
    parts = [sanitize(server), sanitize(tool)]
    if prefix:
        parts.insert(0, sanitize(prefix))
    name = "__".join(parts)
    if len(name) > MAX_NAME:
        name = _with_hash(name, _digest(server, tool))
    return name


@dataclass(frozen=True, slots=True)
class Collision:
    """Two different (server, tool) pairs that wanted the same exposed name."""

    name: str
    """The contested name (kept by `existing`)."""
    existing: tuple[str, str]
    """The (server, tool) pair that had the name first."""
    added: tuple[str, str]
    """The (server, tool) pair added later."""
    assigned: str
    """The hash-suffixed name `added` got instead."""


class NameTable:
    """Exposed names of the tools of many servers, both ways, unique and stable."""

    def __init__(self, prefix: str = "mcp") -> None:
        self.prefix = prefix
        self._by_pair: dict[tuple[str, str], str] = {}
        self._by_name: dict[str, tuple[str, str]] = {}
        self.collisions: list[Collision] = []

    def add(self, server: str, tool: str) -> str:
        """The exposed name of `tool` on `server`, assigned on first use (then always the same)."""
        pair = (server, tool)
        known = self._by_pair.get(pair)
        if known is not None:
            return known
        name = qualified_name(server, tool, self.prefix)
        holder = self._by_name.get(name)
        if holder is not None:
            assigned = self._free_variant(name, server, tool)
            self.collisions.append(Collision(name, holder, pair, assigned))
            name = assigned
        self._by_pair[pair] = name
        self._by_name[name] = pair
        return name

    def _free_variant(self, name: str, server: str, tool: str) -> str:
        # Salt 0 is the hash a long name already carries, so start at 1; a further clash
        # (a real name equal to a variant, or a hash prefix shared) just tries the next salt.
        salt = 1
        while True:
            candidate = _with_hash(name, _digest(server, tool, salt))
            if candidate not in self._by_name:
                return candidate
            salt += 1

    def lookup(self, exposed: str) -> tuple[str, str] | None:
        """The (server, tool) pair behind an exposed name; None when unknown."""
        return self._by_name.get(exposed)

    def name_of(self, server: str, tool: str) -> str | None:
        """The exposed name already assigned to `tool` on `server`; None when not added."""
        return self._by_pair.get((server, tool))

    def drop_server(self, server: str) -> None:
        """Forget every name of `server` (it went away or its tool list is being replaced).

        Collisions in which `server` was the later pair go too; those in which it held the
        name stay, as they still explain another tool's hash-suffixed name.
        """
        for pair in [p for p in self._by_pair if p[0] == server]:
            del self._by_name[self._by_pair.pop(pair)]
        self.collisions = [c for c in self.collisions if c.added[0] != server]

    def names(self) -> list[str]:
        """Every exposed name, in the order they were added."""
        return list(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, exposed: object) -> bool:
        return exposed in self._by_name
