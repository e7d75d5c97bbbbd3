"""The console's browser session: a cookie sealed with the hub's SecretBox (any replica opens
it) holding the user's hub tokens (for the REST API, and for /mcp once "Try a tool" asked for
one) and the session's CSRF token.

    session = open_session(box, request, secure)        # None: signed out (or unreadable)
    set_session(response, box, session, secure)         # after a sign-in or a refresh
    clear_session(response, secure)

Flags: HttpOnly (no script reads it), SameSite=Lax (not sent on cross-site POSTs), Path=/;
over TLS also Secure and the `__Host-` prefix (the browser then refuses one set by another
host or without Secure). A sign-in always writes a new value - fresh tokens and a fresh CSRF
token - whatever cookie the browser had before (no session fixation).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, replace

from starlette.requests import Request
from starlette.responses import Response

from mcpkit.hub.crypto import CredentialError, SecretBox

COOKIE = "mcpkit_console"
SECURE_COOKIE = "__Host-mcpkit_console"
MAX_COOKIE_CHARS = 4000
"""Browsers keep cookies up to 4096 bytes; a sealed session is about 1.5 KB, 2.5 KB with
its /mcp token."""
SESSION_MAX_AGE_S = 14 * 24 * 3600
"""How long the browser keeps the cookie; the refresh token's own lifetime ends it sooner."""


@dataclass(frozen=True, slots=True)
class Session:
    access_token: str
    refresh_token: str
    expires_at: float
    """When the access token expires (epoch seconds)."""
    csrf: str
    """Every state-changing request of this session carries it (forms and fetch)."""
    admin: bool = False
    """Whether the user was an admin at sign-in: shows the operators' links, nothing more
    (the API refuses a non-admin's admin call with 403 whatever the browser asks)."""
    mcp_token: str = ""
    """An access token for the hub's /mcp ("Try a tool"), got from the same login on first
    use ("": none yet)."""
    mcp_expires_at: float = 0.0

    def expiring(self, margin_s: float, now: float | None = None) -> bool:
        return (now if now is not None else time.time()) >= self.expires_at - margin_s

    def refreshed(self, access_token: str, refresh_token: str, expires_in: float) -> Session:
        """The same session (same CSRF token: open forms stay valid) with new tokens."""
        return replace(self, access_token=access_token, refresh_token=refresh_token,
                       expires_at=time.time() + expires_in)

    def usable_mcp_token(self, margin_s: float) -> str | None:
        """The /mcp access token, unless there is none or it expires within `margin_s`."""
        if not self.mcp_token or time.time() >= self.mcp_expires_at - margin_s:
            return None
        return self.mcp_token

    def with_mcp_token(self, mcp_token: str, refresh_token: str, expires_in: float) -> Session:
        """The session after its login was redeemed for /mcp (the refresh token rotated)."""
        return replace(self, refresh_token=refresh_token, mcp_token=mcp_token,
                       mcp_expires_at=time.time() + expires_in)


def new_session(access_token: str, refresh_token: str, expires_in: float,
                admin: bool = False) -> Session:
    """A signed-in session: a new CSRF token, never one the browser had."""
    return Session(access_token, refresh_token, time.time() + expires_in,
                   secrets.token_urlsafe(24), admin)


def cookie_name(secure: bool) -> str:
    return SECURE_COOKIE if secure else COOKIE


def open_session(box: SecretBox, request: Request, secure: bool) -> Session | None:
    return open_sealed(box, request.cookies.get(cookie_name(secure)))


def open_sealed(box: SecretBox, sealed: str | None) -> Session | None:
    """The session a cookie's value holds, or None (absent, too long, not sealed by the hub's
    key, or not a session)."""
    if not sealed or len(sealed) > MAX_COOKIE_CHARS:
        return None
    try:
        values = box.open_mapping(sealed)
        return Session(values["a"], values["r"], float(values["e"]), values["c"],
                       values.get("d") == "1", values.get("m", ""),
                       float(values.get("f", "0")))
    except (CredentialError, KeyError, ValueError):
        return None


def set_session(response: Response, box: SecretBox, session: Session, secure: bool) -> None:
    sealed = box.seal({"a": session.access_token, "r": session.refresh_token,
                       "e": repr(session.expires_at), "c": session.csrf,
                       "d": "1" if session.admin else "0", "m": session.mcp_token,
                       "f": repr(session.mcp_expires_at)})
    response.set_cookie(cookie_name(secure), sealed, max_age=SESSION_MAX_AGE_S, path="/",
                        httponly=True, samesite="lax", secure=secure)


def clear_session(response: Response, secure: bool) -> None:
    response.delete_cookie(cookie_name(secure), path="/", httponly=True, samesite="lax",
                           secure=secure)
