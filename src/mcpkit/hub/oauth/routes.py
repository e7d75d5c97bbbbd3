"""The authorization server's HTTP endpoints (FastAPI), outside `/api/v1`:

    GET  /.well-known/oauth-authorization-server      RFC 8414 metadata
    GET  /.well-known/oauth-protected-resource[/mcp]  RFC 9728 metadata of /mcp
    GET  /oauth/jwks                                  the access-token signing key (public)
    POST /oauth/register                              DCR (RFC 7591), public clients
    GET  /oauth/authorize                             validate; sign-in or consent page, or
    POST /oauth/authorize                               straight back with a code (RFC 9207 iss)
    POST /oauth/token                                 code (PKCE S256) / refresh (rotated)
    POST /oauth/revoke                                RFC 7009
    GET  /oauth/oidc/callback                         back from the OpenID Connect provider
                                                        (oidc_routes.py)

Bodies are read here, bounded (`MAX_FORM_BYTES`, registration.MAX_REGISTRATION_BYTES), and a
repeated parameter is refused before Authlib sees the request. Signing the browser in (the
session cookie, the password or the OpenID Connect provider, CSRF double submit, the
auth-failure budget wrong passwords spend) is sign_in.py's, shared with the upstream-login
callback. Registrations spend a per-address budget of the same size as a
user's request budget (MCPKIT_HUB_RATE_BURST, _RATE_LIMIT), and MCPKIT_HUB_OAUTH_MAX_CLIENTS
bounds them in all. Passwords, codes and tokens are never logged.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
import urllib.parse
from typing import TYPE_CHECKING

from authlib.oauth2.rfc6749.errors import OAuth2Error
from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from mcpkit.auth.resource import InvalidDPoPProof
from mcpkit.errors import PeerError
from mcpkit.hub.oauth import oidc_routes, pages, sign_in
from mcpkit.hub.oauth.client_documents import ClientDocumentRefused, is_document_client_id
from mcpkit.hub.oauth.dpop import ReplayCheckUnavailable
from mcpkit.hub.oauth.registration import (
    MAX_REGISTRATION_BYTES,
    RegistrationRefused,
    client_from_metadata,
    registration_response,
)
from mcpkit.hub.oauth.server import CONSOLE_CLIENT_ID, Reply, plain_request
from mcpkit.hub.oauth.service import (
    AUTHORIZE_PATH,
    JWKS_PATH,
    METADATA_PATH,
    OIDC_CALLBACK_PATH,
    REGISTER_PATH,
    RESOURCE_METADATA_PATH,
    REVOKE_PATH,
    TOKEN_PATH,
    OAuthService,
)
from mcpkit.hub.ratelimit import retry_after
from mcpkit.hub.store import UserRecord
from mcpkit.transports.server.http.peers import peer_key

if TYPE_CHECKING:  # the API imports this module: the context's class only for annotations
    from mcpkit.hub.api.context import HubContext

log = logging.getLogger(__name__)

MAX_FORM_BYTES = 16 * 1024
"""The largest form (token, revocation, sign-in) or authorization query the hub reads."""
MAX_FIELDS = 32
NO_STORE = {"Cache-Control": "no-store", "Pragma": "no-cache"}


class BadRequest(PeerError):
    """A request the endpoint refuses before Authlib sees it (too big, repeated fields)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _service(request: Request) -> tuple[HubContext, OAuthService]:
    context: HubContext = request.app.state.hub
    if context.oauth is None:  # pragma: no cover - the built-in component always runs
        raise BadRequest(503, "the authorization server is not running")
    return context, context.oauth


async def _body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BadRequest(413, f"the body is over {limit} bytes")
    chunks: list[bytes] = []
    seen = 0
    async for chunk in request.stream():
        seen += len(chunk)
        if seen > limit:
            raise BadRequest(413, f"the body is over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _single_values(pairs: list[tuple[str, str]]) -> dict[str, str]:
    if len(pairs) > MAX_FIELDS:
        raise BadRequest(400, f"more than {MAX_FIELDS} parameters")
    values: dict[str, str] = {}
    for name, value in pairs:
        if name in values:
            raise BadRequest(400, f"the parameter {name!r} is repeated"[:120])
        values[name] = value
    return values


async def read_form(request: Request) -> dict[str, str]:
    body = await _body(request, MAX_FORM_BYTES)
    try:
        pairs = urllib.parse.parse_qsl(body.decode("utf-8"), keep_blank_values=True,
                                       strict_parsing=False, max_num_fields=MAX_FIELDS)
    except (UnicodeDecodeError, ValueError):
        raise BadRequest(400, "the body is not a valid form") from None
    return _single_values(pairs)


def read_query(request: Request) -> dict[str, str]:
    if len(request.url.query) > MAX_FORM_BYTES:
        raise BadRequest(414, "the authorization request is too long")
    return _single_values(list(request.query_params.multi_items()))


def _oauth_error(status: int, error: str, description: str) -> JSONResponse:
    return JSONResponse({"error": error, "error_description": description}, status_code=status,
                        headers=NO_STORE)


def _json_reply(reply: Reply) -> JSONResponse:
    headers = {name: value for name, value in reply.headers
               if name.lower() != "content-type"}
    return JSONResponse(reply.body, status_code=reply.status, headers={**headers, **NO_STORE})


def router() -> APIRouter:
    routes = APIRouter(include_in_schema=False)

    @routes.get(METADATA_PATH)
    async def metadata(request: Request) -> JSONResponse:
        _, service = _service(request)
        return JSONResponse(service.metadata())

    @routes.get(RESOURCE_METADATA_PATH)
    @routes.get("/.well-known/oauth-protected-resource")
    async def resource_metadata(request: Request) -> JSONResponse:
        _, service = _service(request)
        return JSONResponse(service.resource_metadata())

    @routes.get(JWKS_PATH)
    async def jwks(request: Request) -> JSONResponse:
        _, service = _service(request)
        return JSONResponse(await service.tokens.jwks())

    @routes.post(REGISTER_PATH)
    async def register(request: Request) -> Response:
        try:
            context, _ = _service(request)
            wait = await context.limiter.acquire(f"register:{peer_key(request.scope)}")
            if wait is not None:  # an address's registrations spend a budget like a user's
                return _oauth_error(429, "temporarily_unavailable",
                                    f"too many registrations: try again in {retry_after(wait)} s")
            body = await _body(request, MAX_REGISTRATION_BYTES)
            try:
                document = json.loads(body)
            except (ValueError, UnicodeDecodeError):
                return _oauth_error(400, "invalid_client_metadata", "the body is not JSON")
            client = client_from_metadata(document, secrets.token_urlsafe(24))
            if await context.store.oauth.count_clients() >= context.settings.oauth_max_clients:
                return _oauth_error(429, "temporarily_unavailable",
                                    "the hub has registered its maximum of "
                                    f"{context.settings.oauth_max_clients} clients")
            await context.store.oauth.create_client(client)
        except RegistrationRefused as refused:
            return _oauth_error(400, refused.error, refused.description)
        except BadRequest as bad:
            return _oauth_error(bad.status, "invalid_request", bad.message)
        log.info("oauth client registered: %s", client.client_id)
        return JSONResponse(registration_response(client, int(time.time())), status_code=201,
                            headers=NO_STORE)

    @routes.post(TOKEN_PATH)
    async def token(request: Request) -> Response:
        return await _endpoint(request, "token")

    @routes.post(REVOKE_PATH)
    async def revoke(request: Request) -> Response:
        return await _endpoint(request, "revocation")

    @routes.get(AUTHORIZE_PATH)
    async def authorize(request: Request) -> Response:
        return await _authorize(request, None)

    @routes.get(OIDC_CALLBACK_PATH)
    async def oidc_callback(request: Request) -> Response:
        try:
            context, service = _service(request)
            query = read_query(request)
        except BadRequest as bad:
            return pages.error_page(bad.message, bad.status)
        return await oidc_routes.callback(request, context, service, query)

    @routes.post(AUTHORIZE_PATH)
    async def authorize_form(request: Request) -> Response:
        try:
            form = await read_form(request)
        except BadRequest as bad:
            return pages.error_page(bad.message, bad.status)
        return await _authorize(request, form)

    return routes


async def _endpoint(request: Request, name: str) -> Response:
    try:
        _, service = _service(request)
        form = await read_form(request)
    except BadRequest as bad:
        return _oauth_error(bad.status, "invalid_request", bad.message)
    server = service.server
    url = service.settings.issuer + request.url.path
    jkt = None
    if name == "token":
        try:  # RFC 9449 §5: a proof binds what this request issues to its key
            jkt = await service.dpop.token_request_key(request.headers.getlist("dpop"), url)
        except InvalidDPoPProof as refused:
            return _oauth_error(400, "invalid_dpop_proof", refused.description)
        except ReplayCheckUnavailable as unavailable:
            response = _oauth_error(503, "temporarily_unavailable", str(unavailable))
            response.headers["Retry-After"] = "1"
            return response
    try:
        oauth_request = plain_request("POST", url, form, request.headers, dpop_jkt=jkt)
        if name == "token":
            reply: Reply = await server.run(server.create_token_response, oauth_request)
        else:
            reply = await server.run(server.create_endpoint_response, name, oauth_request)
    except OAuth2Error as error:
        reply = server.handle_error_response(None, error)
    return _json_reply(reply)


# --- the authorization endpoint ------------------------------------------------------------


async def _authorize(request: Request, form: dict[str, str] | None) -> Response:
    try:
        context, service = _service(request)
        query = read_query(request)
    except BadRequest as bad:
        return pages.error_page(bad.message, bad.status)
    server = service.server
    url = service.settings.issuer + AUTHORIZE_PATH + (f"?{request.url.query}"
                                                      if request.url.query else "")
    oauth_request = plain_request("GET", url, query, request.headers)
    try:
        grant = await server.run(server.get_consent_grant, oauth_request)
    except OAuth2Error as error:
        return _authorization_error(server.handle_error_response(oauth_request, error),
                                    service.settings.issuer, error)
    client = grant.client
    client_name = client.record.client_name or client.public_id
    if is_document_client_id(client.public_id):  # the name is the document's own claim
        client_name = f"{client_name} ({client.public_id})"
    redirect_host = urllib.parse.urlsplit(oauth_request.payload.redirect_uri or "").hostname
    redirect_host = redirect_host or "?"
    reason = f"{client_name} asks to use the hub as you."
    action = AUTHORIZE_PATH + (f"?{request.url.query}" if request.url.query else "")
    csrf = sign_in.csrf_token(request)
    user = await sign_in.signed_in_user(context, request)
    new_session: UserRecord | None = None

    if form is not None:
        outcome = await sign_in.posted_sign_in(request, context, service, form, action, reason)
        if isinstance(outcome, Response):
            return outcome
        if outcome is not None:
            user = new_session = outcome
        elif form.get("action") in ("allow", "deny") and user is not None:
            if form["action"] == "deny":
                return _redirect(await server.run(server.create_authorization_response,
                                                  oauth_request, None, grant))
            if is_document_client_id(client.public_id):
                try:  # stored once a signed-in user consents, not for every visitor
                    await server.documents.remember(client.record)
                except ClientDocumentRefused as refused:
                    return pages.error_page(str(refused), 429)
            await context.store.oauth.record_consent(user.id, grant.client.get_client_id(),
                                                     (oauth_request.scope or "").split())
            return _redirect(await server.run(server.create_authorization_response,
                                              oauth_request, user, grant))

    if user is None:
        return sign_in.sign_in_page(request, service, action, reason)
    scope = (oauth_request.scope or "").split()
    if grant.client.get_client_id() == CONSOLE_CLIENT_ID or \
            await context.store.oauth.consented(user.id, grant.client.get_client_id(), scope):
        response = _redirect(await server.run(server.create_authorization_response,
                                              oauth_request, user, grant))
    else:
        response = pages.consent_page(action, csrf, client_name, user.name, " ".join(scope),
                                      redirect_host=redirect_host)
    return sign_in.with_cookies(response, service, csrf, session=new_session)


def _authorization_error(reply: Reply, issuer: str, error: OAuth2Error) -> Response:
    """An invalid authorization request: back to the client when its redirect URI was
    verified (with `iss`, RFC 9207), else a page - never a redirect to an unchecked URI."""
    location = reply.location
    if location:
        separator = "&" if "?" in location else "?"
        return RedirectResponse(location + separator + urllib.parse.urlencode({"iss": issuer}),
                                status_code=302)
    return pages.error_page(f"{error.error}: {error.get_error_description() or ''}".strip(),
                            400)


def _redirect(reply: Reply) -> Response:
    location = reply.location
    if location is None:  # an error Authlib answered without a verified redirect URI
        return pages.error_page(str((reply.body or {}).get("error", "invalid_request")
                                    if isinstance(reply.body, dict) else "invalid_request"),
                                reply.status)
    return RedirectResponse(location, status_code=302, headers={"Cache-Control": "no-store"})
