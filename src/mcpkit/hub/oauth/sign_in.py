"""The browser's sign-in to the hub, for every page that needs a signed-in user: the
authorization endpoint (routes.py) and the upstream-login callback
(api/routes/upstream_oauth.py).

    user = await signed_in_user(context, request)        # the session cookie's user, or None
    page = sign_in_page(request, service, action, reason)  # the form (posts back to `action`)
    outcome = await posted_sign_in(request, context, service, form, action)

A page asks for a sign-in by answering `sign_in_page` with its own URL (path and query) as
the form's `action`: the form posts back there, so the request rides along unchanged. The
posted form is checked (CSRF double submit: the form's token must equal the CSRF cookie),
then either signs in with the password (argon2, a bounded number at once; every failure costs
the client address one unit of the auth-failure budget) or goes to the OpenID Connect
provider (oidc_routes.py), which comes back to `action` - checked by
`service.resume_target`, so only to one of the hub's own sign-in pages.

The session is a cookie sealed with the hub's key (any replica opens it), HttpOnly,
SameSite=Lax, Secure when the issuer is https, sent to /oauth/… only (service.COOKIE_PATH).
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import TYPE_CHECKING

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response

from mcpkit.hub.crypto import CredentialError, tokens_equal
from mcpkit.hub.oauth import oidc_routes, pages
from mcpkit.hub.oauth.service import COOKIE_PATH, SESSION_COOKIE, OAuthService
from mcpkit.hub.passwords import password_matches
from mcpkit.hub.ratelimit import retry_after
from mcpkit.hub.store import NotFound, UserRecord
from mcpkit.transports.server.http.peers import peer_key

if TYPE_CHECKING:
    from mcpkit.hub.api.context import HubContext

log = logging.getLogger(__name__)

CSRF_COOKIE = "mcpkit_hub_csrf"
MAX_USERNAME_CHARS = 63
MAX_SESSION_COOKIE_CHARS = 1024
SIGN_IN_ACTIONS = frozenset({"sign-in", "oidc"})
"""The values of a posted form's `action` that `posted_sign_in` handles."""


async def signed_in_user(context: HubContext, request: Request) -> UserRecord | None:
    """The user the browser's session cookie signs in, if it is valid, unexpired, and the
    user still exists and is enabled."""
    sealed = request.cookies.get(SESSION_COOKIE)
    if not sealed or len(sealed) > MAX_SESSION_COOKIE_CHARS:
        return None
    try:
        session = context.box.open_mapping(sealed)
        user_id, expires = int(session["user"]), float(session["expires"])
    except (CredentialError, KeyError, ValueError):
        return None
    if expires < time.time():
        return None
    try:
        user = await context.store.users.get(user_id)
    except NotFound:  # deleted since
        return None
    return None if user.disabled else user


def csrf_token(request: Request) -> str:
    """The browser's CSRF token (its cookie's), or a new one (set by `with_cookies`)."""
    return request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(24)


def csrf_matches(request: Request, form: dict[str, str]) -> bool:
    """Double submit: the form's token equals the CSRF cookie (a cross-site page can make a
    browser post a form, but cannot read or set the hub's cookie)."""
    cookie, sent = request.cookies.get(CSRF_COOKIE), form.get("csrf_token", "")
    return bool(cookie) and bool(sent) and tokens_equal(sent, cookie or "")


def provider_name(service: OAuthService) -> str | None:
    """The OpenID Connect provider's name for the sign-in page's button, if one is set up."""
    return service.oidc.name if service.oidc is not None else None


def sign_in_page(request: Request, service: OAuthService, action: str, reason: str, *,
                 error: str | None = None, status: int = 200) -> Response:
    """The sign-in page (password form; the provider's button when one is set up), posting
    back to `action`, with the CSRF cookie."""
    csrf = csrf_token(request)
    page = pages.sign_in_page(action, csrf, reason, error=error, status=status,
                              provider=provider_name(service))
    return with_cookies(page, service, csrf)


async def posted_sign_in(request: Request, context: HubContext, service: OAuthService,
                         form: dict[str, str], action: str, reason: str
                         ) -> UserRecord | Response | None:
    """A form posted to a page that asks for a sign-in (`action`: that page's path and
    query): a refusal page when the CSRF token is wrong; the way to the OpenID Connect
    provider (coming back to `action`); the user a right password signs in (the caller sets
    the session cookie with `with_cookies(…, session=user)`), or the sign-in page again with
    why not. None when the form is not a sign-in (a consent answer, say)."""
    if not csrf_matches(request, form):
        return pages.error_page("the form's CSRF token is missing or wrong: start the "
                                "sign-in again", 403)
    chosen = form.get("action")
    if chosen == "oidc" and service.oidc is not None:
        # to the provider; its callback (oidc_routes) signs the browser in and comes back
        return await oidc_routes.start(service, action)
    if chosen != "sign-in":
        return None
    outcome = await _password_sign_in(context, service, request, form)
    if isinstance(outcome, str):
        status = 429 if outcome.startswith("too many") else 401
        return sign_in_page(request, service, action, reason, error=outcome, status=status)
    return outcome


def with_cookies(response: Response, service: OAuthService, csrf: str, *,
                 session: UserRecord | None = None) -> Response:
    """`response` with the CSRF cookie (and, after a sign-in, the session cookie)."""
    secure = service.settings.issuer.startswith("https://")
    response.set_cookie(CSRF_COOKIE, csrf, httponly=True, samesite="lax", secure=secure,
                        path=COOKIE_PATH)
    if session is not None:
        service.set_session_cookie(response, session.id)
    return response


async def _password_sign_in(context: HubContext, service: OAuthService, request: Request,
                            form: dict[str, str]) -> UserRecord | str:
    """The user whose name and password the form holds, or why not (a message for the
    page). Every failure costs the address one unit of its auth-failure budget."""
    peer = peer_key(request.scope)
    wait = context.auth_failures.blocked(peer)
    if wait is not None:
        return f"too many failed sign-ins from this address: try again in {retry_after(wait)} s"
    name = form.get("username", "")[:MAX_USERNAME_CHARS + 1]
    password = form.get("password", "")
    found = await context.store.users.sign_in_record(name) if len(name) <= \
        MAX_USERNAME_CHARS else None
    stored = found[1] if found is not None else None
    matched = await anyio.to_thread.run_sync(password_matches, stored, password,
                                             limiter=service.password_checks)
    if not matched or found is None or found[0].disabled:
        context.auth_failures.failed(peer)
        log.info("a hub sign-in failed (wrong name or password, or a disabled user)")
        return "wrong user name or password"
    log.info("user %d signed in to the hub", found[0].id)
    return found[0]
