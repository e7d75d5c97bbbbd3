"""The two steps of a sign-in through the OpenID Connect provider, for sign_in.py:

    start     the sign-in page's "Sign in with NAME" (POSTed, action=oidc, its CSRF token
              checked, to /oauth/authorize or the upstream-login callback): a new state,
              nonce and PKCE verifier are sealed with the hub's key into a cookie sent only
              to the callback, and the browser goes to the provider's authorization endpoint
    callback  GET /oauth/oidc/callback: the cookie opened (any replica can: the key is
              shared), state and iss checked, the code exchanged, the ID token verified
              (oidc.py); (issuer, subject) mapped to a hub user (store.oidc: created on a first
              sign-in only with --oidc-allow-signup); a disabled user refused; the browser
              signed in to the hub and sent back to the page it started from (the authorization
              request: consent page, or straight back to the client with a code; or the
              upstream-login callback) - checked by service.resume_target: a resume that is
              not one of the hub's sign-in pages is refused, the browser not signed in

The pending cookie is single use: every callback answer deletes it, so a replayed callback
URL finds no sign-in to finish; a forged one (another state) is refused; a captured cookie
replayed with its code fails at the provider, which redeems a code once. One sign-in at a
time per browser: a second one started before the first came back replaces its cookie.
A refused callback (a forged state, a bad code or ID token) costs the client address one unit
of the auth-failure budget wrong passwords and wrong API tokens spend; past it, 429. The log
says which user signed in, never a code, token or claim value.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mcpkit.hub.crypto import CredentialError
from mcpkit.hub.oauth import pages
from mcpkit.hub.oauth.oidc import (
    PENDING_TTL_S,
    OidcLogin,
    OidcRefused,
    PendingSignIn,
    user_name_hints,
)
from mcpkit.hub.oauth.service import OIDC_CALLBACK_PATH, OAuthService, resume_target
from mcpkit.hub.ratelimit import retry_after
from mcpkit.hub.store import StoreError, UserRecord
from mcpkit.transports.server.http.peers import peer_key

if TYPE_CHECKING:
    from mcpkit.hub.api.context import HubContext

log = logging.getLogger(__name__)

PENDING_COOKIE = "mcpkit_hub_oidc"
MAX_PENDING_COOKIE_CHARS = 3800
"""Browsers keep cookies up to about 4 KiB: an authorization request too long to fit (with
the state, nonce and verifier, sealed) is refused with a page instead of silently lost."""


async def start(service: OAuthService, resume: str) -> Response:
    """To the provider, remembering (in a sealed cookie) how to come back to `resume`."""
    oidc = service.oidc
    assert oidc is not None
    if resume_target(resume) is None:  # the callback checks it again (the cookie is sealed)
        return pages.error_page("this page cannot be signed in to", 400)
    pending = oidc.new_pending(resume)
    try:
        url = await oidc.authorization_url(pending)
    except OidcRefused as refused:
        log.warning("sign-in with the OpenID Connect provider cannot start: %s",
                    refused.message)
        return pages.error_page(refused.message, refused.status)
    sealed = service.box.seal(pending.fields())
    if len(sealed) > MAX_PENDING_COOKIE_CHARS:
        return pages.error_page("the authorization request is too long to sign in through "
                                f"{oidc.name}: use a password, or a shorter request", 414)
    response = RedirectResponse(url, status_code=302, headers={"Cache-Control": "no-store"})
    response.set_cookie(PENDING_COOKIE, sealed, max_age=int(PENDING_TTL_S), httponly=True,
                        samesite="lax", secure=_secure(service), path=OIDC_CALLBACK_PATH)
    return response


async def callback(request: Request, context: HubContext, service: OAuthService,
                   query: dict[str, str]) -> Response:
    """The provider's redirect back: finish the sign-in, then resume the authorization."""
    oidc = service.oidc
    if oidc is None:
        return pages.error_page("this hub has no OpenID Connect provider to sign in with", 404)
    peer = peer_key(request.scope)
    wait = context.auth_failures.blocked(peer)
    if wait is not None:  # refused callbacks spend the address's auth-failure budget
        return _done(service, pages.error_page("too many failed sign-ins from this address: "
                                               f"try again in {retry_after(wait)} s", 429))
    pending = _pending(request, service)
    if pending is None:
        return _done(service, pages.error_page(
            "no sign-in through the provider is in progress in this browser (or it expired): "
            "start again from the application", 400))
    resume = resume_target(pending.resume)
    if resume is None:  # only the hub's own sign-in pages: never an open redirect
        log.warning("a sign-in through the OpenID Connect provider asked to resume at a page "
                    "that does not ask for a sign-in: refused")
        return _done(service, pages.error_page(
            "this sign-in cannot go back to where it was asked to (not a page of the hub "
            "that asks for a sign-in): start again from the application", 400))
    try:
        login = await oidc.finish(query, pending)
    except OidcRefused as refused:
        context.auth_failures.failed(peer)  # each may have cost a request to the provider
        log.info("a sign-in through the OpenID Connect provider was refused: %s",
                 refused.message)
        return _done(service, pages.error_page(refused.message, refused.status))
    user = await _hub_user(context, service, login)
    if isinstance(user, Response):
        return _done(service, user)
    response = RedirectResponse(resume, status_code=302, headers={"Cache-Control": "no-store"})
    service.set_session_cookie(response, user.id)
    return _done(service, response)


async def _hub_user(context: HubContext, service: OAuthService, login: OidcLogin
                    ) -> UserRecord | Response:
    """The hub user the provider's identity signs in as (made now if sign-up is on), or the
    page that says why not."""
    name = service.oidc.name if service.oidc is not None else "the provider"
    try:
        signed = await context.store.oidc.sign_in(
            login.issuer, login.subject, names=user_name_hints(login.claims, login.subject),
            tokens=login.tokens, allow_signup=service.settings.oidc_allow_signup)
    except (StoreError, CredentialError) as error:
        log.warning("a sign-in through the OpenID Connect provider failed: %s", error)
        return pages.error_page("the hub cannot record the sign-in right now: try again "
                                "shortly", 503)
    if signed is None:
        log.info("an unknown OpenID Connect subject was refused (sign-up is off)")
        return pages.error_page(
            f"your {name} account is not a user of this hub, and this hub does not create "
            "users at a first sign-in: ask an administrator to add you (your subject at "
            f"{name}: {login.subject})", 403)
    if signed.user.disabled:
        log.info("disabled user %d was refused at an OpenID Connect sign-in", signed.user.id)
        return pages.error_page("this hub user is disabled", 403)
    log.info("user %d signed in to the hub through the OpenID Connect provider%s",
             signed.user.id, " (a new user)" if signed.created else "")
    return signed.user


def _pending(request: Request, service: OAuthService) -> PendingSignIn | None:
    sealed = request.cookies.get(PENDING_COOKIE)
    if not sealed or len(sealed) > MAX_PENDING_COOKIE_CHARS:
        return None
    try:
        return PendingSignIn.from_fields(service.box.open_mapping(sealed))
    except (CredentialError, KeyError, ValueError):
        return None


def _done(service: OAuthService, response: Response) -> Response:
    """Every callback answer ends the pending sign-in (its cookie deleted): single use."""
    response.delete_cookie(PENDING_COOKIE, path=OIDC_CALLBACK_PATH, httponly=True,
                           samesite="lax", secure=_secure(service))
    return response


def _secure(service: OAuthService) -> bool:
    return service.settings.issuer.startswith("https://")
