"""Signing in to the console: the authorization code grant with PKCE (S256) against the hub's
own authorization server, as its built-in client `mcpkit-console` (oauth/service.py; the one
client that skips the consent page). The user signs in on the hub's sign-in page (password,
or the OpenID Connect provider when one is set up).

    GET  /console/sign-in?next=/…   a state and a PKCE verifier in a short sealed cookie (to
                                    /console/callback only), then to /oauth/authorize with
                                    resource=<public url>/api/v1
    GET  /console/callback          state and iss checked, the code exchanged: a NEW session
                                    cookie (session.py), then back to `next`
    POST /console/sign-out          CSRF-checked: the refresh token revoked (the login and
                                    its access tokens end), both sign-in cookies removed

`signed_in(request)` gives a page the session, its access token refreshed when it is about to
expire (the refresh token rotates); a refresh the hub refuses means signing in again.
`with_mcp_token` adds an access token for the hub's /mcp, from the same login ("Try a tool").
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
import urllib.parse
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mcpkit.hub.console import hub_calls
from mcpkit.hub.console.session import (
    Session,
    clear_session,
    new_session,
    open_session,
    set_session,
)
from mcpkit.hub.crypto import CredentialError, tokens_equal
from mcpkit.hub.oauth.server import CONSOLE_CLIENT_ID
from mcpkit.hub.oauth.service import (
    AUTHORIZE_PATH,
    CONSOLE_CALLBACK_PATH,
    COOKIE_PATH,
    SESSION_COOKIE,
)

if TYPE_CHECKING:  # the API's app imports the console: its context for annotations only
    from mcpkit.hub.api.context import HubContext

SIGN_IN_PATH = "/console/sign-in"
SIGN_OUT_PATH = "/console/sign-out"
PENDING_COOKIE = "mcpkit_console_pending"
PENDING_TTL_S = 600
"""How long a started sign-in may take (the user types a password, or visits a provider)."""
REFRESH_MARGIN_S = 30.0
"""An access token this close to expiry is refreshed before the page uses it."""
MAX_NEXT_CHARS = 2048


def secure(context: HubContext) -> bool:
    """Cookies are Secure (and `__Host-`) when the hub is served over TLS."""
    return context.settings.issuer.startswith("https://")


def safe_next(candidate: str | None) -> str:
    """A console path to go back to after signing in: only a local absolute path, never
    another host (no open redirect)."""
    if not candidate or not candidate.startswith("/") or candidate.startswith("//") or \
            len(candidate) > MAX_NEXT_CHARS or \
            any(ord(char) < 0x21 or char in "\\\x7f" for char in candidate):
        return "/"
    parts = urllib.parse.urlsplit(candidate)
    if parts.scheme or parts.netloc or parts.path.startswith(("/oauth", "/api/")):
        return "/"
    return candidate


def start(request: Request, context: HubContext) -> Response:
    state = secrets.token_urlsafe(24)
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(
        hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    settings = context.settings
    query = urllib.parse.urlencode({
        "response_type": "code", "client_id": CONSOLE_CLIENT_ID,
        "redirect_uri": settings.issuer + CONSOLE_CALLBACK_PATH, "state": state,
        "code_challenge": challenge, "code_challenge_method": "S256",
        "resource": settings.api_url})
    response = RedirectResponse(f"{AUTHORIZE_PATH}?{query}", status_code=303,
                                headers={"Cache-Control": "no-store"})
    pending = context.box.seal({"state": state, "verifier": verifier,
                                "next": safe_next(request.query_params.get("next")),
                                "expires": repr(time.time() + PENDING_TTL_S)})
    response.set_cookie(PENDING_COOKIE, pending, max_age=PENDING_TTL_S, httponly=True,
                        samesite="lax", secure=secure(context), path=CONSOLE_CALLBACK_PATH)
    return response


async def callback(request: Request, context: HubContext) -> Response | str:
    """The new session's response, or why the sign-in failed (a message for a page)."""
    query = request.query_params
    try:
        pending = context.box.open_mapping(request.cookies.get(PENDING_COOKIE, ""))
        expires = float(pending["expires"])
    except (CredentialError, KeyError, ValueError):
        return "this sign-in was not started in this browser, or took too long: sign in again"
    if expires < time.time() or not tokens_equal(query.get("state", ""), pending["state"]):
        return "this sign-in does not match the one this browser started: sign in again"
    if query.get("iss", context.settings.issuer) != context.settings.issuer:
        return "the sign-in came back from another issuer"
    if "code" not in query:
        return f"the sign-in did not finish ({query.get('error', 'no code')})"
    async with hub_calls.hub_client(request) as client:
        try:
            tokens = await hub_calls.token_request(client, {
                "grant_type": "authorization_code", "code": query["code"],
                "redirect_uri": context.settings.issuer + CONSOLE_CALLBACK_PATH,
                "code_verifier": pending["verifier"], "resource": context.settings.api_url})
        except hub_calls.HubRefused as refused:
            return str(refused)
        session = new_session(tokens["access_token"], tokens["refresh_token"],
                              float(tokens.get("expires_in", 0)))
        me = await hub_calls.api(client, session, "GET", hub_calls.ME)
    if me.ok and isinstance(me.body, dict) and me.body.get("is_admin") is True:
        session = replace(session, admin=True)
    response = RedirectResponse(safe_next(pending.get("next")), status_code=303)
    set_session(response, context.box, session, secure(context))
    response.delete_cookie(PENDING_COOKIE, path=CONSOLE_CALLBACK_PATH)
    return response


class SignedIn:
    """A request's session; `changed` when a refresh gave it new tokens (the response must
    carry the new cookie: `keep(response)`)."""

    def __init__(self, context: HubContext, session: Session, changed: bool) -> None:
        self.context = context
        self.session = session
        self.changed = changed

    def keep(self, response: Response) -> Response:
        if self.changed:
            set_session(response, self.context.box, self.session, secure(self.context))
        return response


async def signed_in(request: Request, context: HubContext) -> SignedIn | None:
    """The browser's session with a usable access token, or None (sign in again)."""
    session = open_session(context.box, request, secure(context))
    if session is None:
        return None
    if not session.expiring(REFRESH_MARGIN_S):
        return SignedIn(context, session, False)
    tokens = await _redeemed(request, session, context.settings.api_url)
    if tokens is None:
        return None
    return SignedIn(context, session.refreshed(tokens["access_token"], tokens["refresh_token"],
                                               float(tokens.get("expires_in", 0))), True)


async def with_mcp_token(request: Request, found: SignedIn) -> SignedIn | None:
    """`found` holding a usable access token for the hub's /mcp: the one it has, or one its
    login is redeemed for now (RFC 8707 §2.2; the refresh token rotates, so the response
    must `keep` the new cookie). None: the hub refused the refresh (sign in again)."""
    if found.session.usable_mcp_token(REFRESH_MARGIN_S) is not None:
        return found
    tokens = await _redeemed(request, found.session, found.context.settings.mcp_url)
    if tokens is None:
        return None
    session = found.session.with_mcp_token(tokens["access_token"], tokens["refresh_token"],
                                           float(tokens.get("expires_in", 0)))
    return SignedIn(found.context, session, True)


async def _redeemed(request: Request, session: Session, resource: str
                    ) -> dict[str, Any] | None:
    """The token endpoint's answer to the session's refresh token for `resource` (the
    refresh token rotates), or None: the hub refused it (sign in again)."""
    async with hub_calls.hub_client(request) as client:
        try:
            return await hub_calls.token_request(client, {
                "grant_type": "refresh_token", "refresh_token": session.refresh_token,
                "resource": resource})
        except hub_calls.HubRefused:
            return None


async def sign_out(request: Request, context: HubContext, session: Session,
                   signed_out_path: str) -> Response:
    async with hub_calls.hub_client(request) as client:
        await hub_calls.revoke(client, session.refresh_token)
    response = RedirectResponse(signed_out_path, status_code=303)
    clear_session(response, secure(context))
    # the hub's own sign-in (its /oauth pages) ends too: "Sign in" asks for the password again
    response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH, httponly=True, samesite="lax",
                           secure=secure(context))
    return response


def csrf_refusal(request: Request, context: HubContext, session: Session,
                 sent: str | None) -> str | None:
    """Why a state-changing request is refused, or None: its Origin (or, without one, its
    Referer) must be the hub's own, and it must carry the session's CSRF token."""
    allowed = {_origin(context.settings.issuer), _origin(str(request.base_url))}
    origin = request.headers.get("origin")
    if origin is None:
        referer = request.headers.get("referer")
        origin = _origin(referer) if referer else None
    if origin is None or origin not in allowed:
        return "the request did not come from the hub's own pages (Origin)"
    if not sent or not tokens_equal(sent, session.csrf):
        return "the form's CSRF token is missing or wrong: reload the page and try again"
    return None


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()
