"""Pure parts of the console (no hub): the sign-in's way back (no open redirect), and the
upstream form's mapping of the API's errors onto its fields and of its fields onto the API's
body."""

from __future__ import annotations

import urllib.parse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpkit.hub.console.sign_in import safe_next
from mcpkit.hub.console.upstream_form import FIELDS, FORM_ERROR, UpstreamForm, field_errors


@pytest.mark.parametrize(("where", "field", "shown"), [
    ("name", "name", "bad"),
    ("url", "url", "bad"),
    ("headers.X-Api-Key", "headers", "X-Api-Key: bad"),
    ("command[2]", "command", "[2]: bad"),
    ("version", FORM_ERROR, "someone changed this upstream meanwhile: reload to see it"),
    ("return_to", FORM_ERROR, "bad"),
    (None, FORM_ERROR, "bad"),
])
def test_an_api_error_goes_next_to_its_field(where: str | None, field: str, shown: str) -> None:
    assert field_errors({"code": "invalid", "message": "bad", "field": where}) == {field: shown}


@given(st.text(max_size=40), st.text(max_size=80))
def test_every_api_error_lands_on_exactly_one_place_of_the_form(where: str, message: str
                                                                 ) -> None:
    errors = field_errors({"message": message, "field": where})
    assert len(errors) == 1
    assert next(iter(errors)) in (*FIELDS, FORM_ERROR)


def test_the_form_makes_the_apis_body() -> None:
    form = UpstreamForm.from_post({
        "name": "docs", "transport": "stdio", "command": "uvx 'my server' --flag",
        "headers": "X-Key: v1\n\nX-Other:two", "auth_mode": "static",
        "connect_timeout_s": "5", "call_timeout_s": "30", "enabled": "on"})
    assert form.create_body() == {
        "name": "docs", "transport": "stdio", "command": ["uvx", "my server", "--flag"],
        "headers": {"X-Key": "v1", "X-Other": "two"}, "auth_mode": "static",
        "enabled": True, "connect_timeout_s": 5.0, "call_timeout_s": 30.0}


def test_what_the_form_cannot_read_is_its_own_error() -> None:
    form = UpstreamForm.from_post({"name": "x", "transport": "http", "url": "http://h/mcp",
                                   "headers": "no colon here", "connect_timeout_s": "soon",
                                   "call_timeout_s": "1"})
    assert form.create_body() is None
    assert set(form.errors) == {"headers", "connect_timeout_s"}


@given(st.text(max_size=60))
def test_after_sign_in_the_browser_goes_only_to_a_console_path(candidate: str) -> None:
    """No open redirect: whatever `next` says, it stays on this host, off /oauth and /api."""
    target = safe_next(candidate)
    parts = urllib.parse.urlsplit(target)
    assert target.startswith("/") and not target.startswith("//")
    assert not parts.scheme and not parts.netloc and "\\" not in target
    assert target == "/" or target == candidate
    assert not parts.path.startswith(("/oauth", "/api/"))


def test_next_paths_that_leave_the_console_go_to_the_list() -> None:
    for bad in ("https://evil.example/", "//evil.example", "/\\evil.example", "/oauth/authorize",
                "/api/v1/users/me", "", None, "/ok\n"):
        assert safe_next(bad) == "/"
    assert safe_next("/?cursor=abc") == "/?cursor=abc"
