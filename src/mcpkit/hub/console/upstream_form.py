"""The upstream form (add and edit) and the API's answers mapped back onto it: the body the
form's fields make, and which field an API error (422's `field`: `url`, `headers.X-Key`,
`command[2]`; 409's `name`) belongs next to.

    form = UpstreamForm.from_post(fields)            # what the user typed, kept on a refusal
    body = form.create_body() / form.update_body()
    form.errors = field_errors(reply.error)          # {"url": "…"} or {"": "…"} (the form's)
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

FIELDS = ("name", "transport", "url", "command", "headers", "bearer_token", "auth_mode",
          "connect_timeout_s", "call_timeout_s", "enabled")
TRANSPORTS = ("http", "sse", "ws", "stdio")
AUTH_MODES = ("static", "oauth", "token_exchange")
FORM_ERROR = ""
"""The key of an error that belongs to no one field (shown at the top of the form)."""


@dataclass
class UpstreamForm:
    name: str = ""
    transport: str = "http"
    url: str = ""
    command: str = ""
    headers: str = ""
    bearer_token: str = ""
    auth_mode: str = "static"
    connect_timeout_s: str = "10"
    call_timeout_s: str = "60"
    enabled: bool = True
    version: str = ""
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_post(cls, fields: dict[str, str]) -> UpstreamForm:
        def text(name: str) -> str:
            return fields.get(name, "").strip()

        return cls(name=text("name"), transport=text("transport"), url=text("url"),
                   command=text("command"), headers=fields.get("headers", ""),
                   bearer_token=fields.get("bearer_token", ""), auth_mode=text("auth_mode"),
                   connect_timeout_s=text("connect_timeout_s"),
                   call_timeout_s=text("call_timeout_s"),
                   enabled=fields.get("enabled") == "on", version=text("version"))

    @classmethod
    def from_upstream(cls, upstream: dict[str, Any]) -> UpstreamForm:
        """The edit form of an upstream the API returned (secrets are never sent back)."""
        headers = upstream.get("headers") or {}
        return cls(name=upstream["name"], transport=upstream["transport"],
                   url=upstream.get("url") or "",
                   command=shlex.join(upstream.get("command") or []),
                   headers="\n".join(f"{key}: {value}" for key, value in headers.items()),
                   auth_mode=upstream.get("auth_mode", "static"),
                   connect_timeout_s=_number(upstream["connect_timeout_s"]),
                   call_timeout_s=_number(upstream["call_timeout_s"]),
                   enabled=bool(upstream["enabled"]), version=str(upstream["version"]))

    def _common(self) -> dict[str, Any] | None:
        """The fields both bodies share; None (with `errors` set) when the form itself cannot
        be read (a header line without a colon, a command that is not shell words)."""
        body: dict[str, Any] = {"name": self.name, "transport": self.transport,
                                "auth_mode": self.auth_mode, "enabled": self.enabled}
        if self.transport == "stdio":
            try:
                body["command"] = shlex.split(self.command)
            except ValueError as error:
                self.errors["command"] = f"not a command line: {error}"
        else:
            body["url"] = self.url
        headers = self._headers()
        if headers is not None:
            body["headers"] = headers
        for name in ("connect_timeout_s", "call_timeout_s"):
            try:
                body[name] = float(getattr(self, name))
            except ValueError:
                self.errors[name] = "must be a number of seconds"
        if self.bearer_token:
            body["bearer_token"] = self.bearer_token
        return None if self.errors else body

    def create_body(self) -> dict[str, Any] | None:
        return self._common()

    def update_body(self) -> dict[str, Any] | None:
        body = self._common()
        if body is None:
            return None
        body.setdefault("headers", None)  # emptied: removed
        if self.version.isdigit():
            body["version"] = int(self.version)
        return body

    def _headers(self) -> dict[str, str] | None:
        lines = [line for line in self.headers.splitlines() if line.strip()]
        if not lines:
            return None
        headers: dict[str, str] = {}
        for number, line in enumerate(lines, 1):
            name, colon, value = line.partition(":")
            if not colon:
                self.errors["headers"] = f"line {number}: write it as Name: value"
                return None
            headers[name.strip()] = value.strip()
        return headers


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


_FIELD_HEAD = re.compile(r"^[a-z_]+")


def field_errors(error: dict[str, Any]) -> dict[str, str]:
    """The API's error as {form field: message}: its `field`'s first part when that is a field
    of the form (`headers.X-Key` -> headers), else the form's own error."""
    message = str(error.get("message") or "the hub refused the change")
    where = error.get("field")
    if isinstance(where, str):
        head = _FIELD_HEAD.match(where)
        if head and head.group(0) in FIELDS:
            detail = where[len(head.group(0)):].lstrip(".")
            return {head.group(0): f"{detail}: {message}" if detail else message}
        if head and head.group(0) == "version":
            return {FORM_ERROR: "someone changed this upstream meanwhile: reload to see it"}
    return {FORM_ERROR: message}
