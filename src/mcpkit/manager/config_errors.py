"""The error of a config file or entry, and how its messages name a value's JSON type.

Apart from `config` so that the modules `config` builds on (`oauth_settings`) raise the same
error without importing `config` back."""

from __future__ import annotations

from mcpkit.errors import UsageError


class ConfigError(UsageError, ValueError):
    """A config problem, with where it is (file, server) in the message."""


def json_type(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)
