"""The owner's OAuth login to one of their upstreams (hub/upstream_login.py):

    POST   /api/v1/users/mcp/upstreams/{id}/oauth/start   {"authorization_url": …} (owner only)
    DELETE /api/v1/users/mcp/upstreams/{id}/oauth         log out: revoke at the AS, delete
    GET    /oauth/upstream/callback                       where the browser comes back

    POST   /oauth/upstream/callback                       the sign-in form shown there
    GET    /oauth/upstream/client.json                    the hub's Client ID Metadata Document
                                                          (when configured at that URL)

The two API routes take the caller's hub credentials like every upstream route (another
user's upstream is a 404). The callback is bound twice to the user who started the login: by
its single-use `state`, and by the browser's sign-in to the hub (the session cookie of
oauth/sign_in.py, the one /oauth/authorize uses). A browser without a hub session gets the
hub's sign-in page (password; the OpenID Connect provider's button when one is set up), whose
form posts back to the callback's own URL and, signed in, goes back there (303) to finish; a
browser signed in as another user is refused (403) and the pending login cancelled
(hub/upstream_login.py says why). Finished, it answers a small page, or redirects to the
`return_to` given at the start (a URL of the hub itself).
"""

# No `from __future__ import annotations`: FastAPI resolves the parameter types at runtime.
import logging

from fastapi import APIRouter, Request, status
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import JSONResponse, RedirectResponse, Response

from mcpkit.hub.api.auth import Context, CurrentUser
from mcpkit.hub.api.context import HubContext
from mcpkit.hub.api.errors import AUTHED, WITH_BODY, ApiError, responses
from mcpkit.hub.api.routes.upstreams import PREFIX, _owned, announce_change
from mcpkit.hub.catalog import refresh_catalog
from mcpkit.hub.oauth import sign_in
from mcpkit.hub.oauth.pages import PAGE_HEADERS, error_page, notice_page
from mcpkit.hub.oauth.routes import BadRequest, read_form
from mcpkit.hub.oauth.service import OAuthService, resume_target
from mcpkit.hub.store import NotFound
from mcpkit.hub.upstream_auth import credentials_for
from mcpkit.hub.upstream_login import (
    CALLBACK_PATH,
    CLIENT_METADATA_PATH,
    MAX_QUERY_VALUE,
    BadReturnTo,
    Finished,
    LoginFailed,
    LoginOfAnotherUser,
    client_metadata_document,
    finish_login,
    logout,
    start_login,
)

log = logging.getLogger(__name__)
MAX_CALLBACK_PARAMS = 16
"""A callback with more query parameters than this is refused (an AS sends a handful)."""
MAX_CALLBACK_QUERY = 4 * MAX_QUERY_VALUE
"""A callback whose query is longer than this is refused (each value is bounded too)."""
SIGN_IN_REASON = "Sign in to the hub to finish connecting your upstream."


class LoginStart(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    return_to: str | None = Field(
        default=None, max_length=MAX_QUERY_VALUE,
        description="where the browser goes once the login is done (a URL of this hub)")


class LoginStarted(BaseModel):
    authorization_url: str = Field(description="open it in a browser to log in upstream")


class LoggedOut(BaseModel):
    removed: bool
    revoked: int = Field(description="tokens the authorization server revoked")
    not_revoked: list[str] = Field(description="why a revocation did not happen")


def router() -> APIRouter:
    api = APIRouter(prefix=PREFIX, tags=["upstreams"], responses=responses(*AUTHED, 404, 422))

    @api.post("/{upstream_id}/oauth/start", response_model=LoginStarted,
              summary="Start your OAuth login to an upstream (auth_mode oauth)",
              operation_id="start_upstream_login", responses=responses(*WITH_BODY, 502))
    async def start(upstream_id: str, user: CurrentUser, context: Context,
                    body: LoginStart | None = None) -> LoginStarted:
        record = await _owned(context, user.id, upstream_id)
        if record.auth_mode != "oauth":
            raise ApiError(422, 'the upstream\'s auth_mode is not "oauth": set it first',
                           field="auth_mode")
        try:
            url = await start_login(context, record,
                                    return_to=body.return_to if body else None)
        except BadReturnTo as error:
            raise ApiError(422, str(error), field="return_to") from None
        except LoginFailed as error:
            raise ApiError(502, str(error), code="upstream_login_failed") from None
        return LoginStarted(authorization_url=url)

    @api.delete("/{upstream_id}/oauth", response_model=LoggedOut,
                summary="Log out of an upstream: revoke your login there and forget it",
                operation_id="logout_upstream")
    async def log_out(upstream_id: str, user: CurrentUser, context: Context) -> LoggedOut:
        record = await _owned(context, user.id, upstream_id)
        report = await logout(context, record)
        await announce_change(context, user.id, record.id)
        return LoggedOut(removed=bool(report.removed), revoked=report.revoked,
                         not_revoked=report.not_revoked)

    return api


def callback_router() -> APIRouter:
    pages = APIRouter(include_in_schema=False)

    @pages.get(CALLBACK_PATH)
    async def callback(request: Request, context: Context) -> Response:
        query = _callback_query(request)
        if isinstance(query, Response):
            return query
        service = _oauth(context)
        user = await sign_in.signed_in_user(context, request)
        if user is None:  # sign in first, then back here (see the module)
            return sign_in.sign_in_page(request, service, _resume(request), SIGN_IN_REASON)
        return await _finish(context, query, user.id)

    @pages.get(CLIENT_METADATA_PATH)
    async def client_metadata(context: Context) -> Response:
        """The hub's Client ID Metadata Document, when its configured URL is this one."""
        document = client_metadata_document(context)
        if document is None:
            return JSONResponse({"error": "not_found"}, status.HTTP_404_NOT_FOUND)
        return JSONResponse(document, headers={"Cache-Control": "public, max-age=3600"})

    @pages.post(CALLBACK_PATH)
    async def callback_sign_in(request: Request, context: Context) -> Response:
        """The sign-in page's form, posted back to the callback's URL."""
        query = _callback_query(request)
        if isinstance(query, Response):
            return query
        service = _oauth(context)
        try:
            form = await read_form(request)
        except BadRequest as bad:
            return error_page(bad.message, bad.status)
        resume = _resume(request)
        outcome = await sign_in.posted_sign_in(request, context, service, form, resume,
                                               SIGN_IN_REASON)
        if isinstance(outcome, Response):
            return outcome
        if outcome is None:  # not a sign-in form: show the page again
            return sign_in.sign_in_page(request, service, resume, SIGN_IN_REASON)
        # signed in: back to the callback's own URL (a GET: a reload posts nothing again)
        back = RedirectResponse(resume, status.HTTP_303_SEE_OTHER, headers=PAGE_HEADERS)
        return sign_in.with_cookies(back, service, sign_in.csrf_token(request), session=outcome)

    return pages


def _callback_query(request: Request) -> dict[str, str] | Response:
    items = request.query_params.multi_items()
    if len(items) > MAX_CALLBACK_PARAMS or len({k for k, _ in items}) != len(items):
        return error_page("The login answer is malformed (repeated or too many "
                          "parameters).", status.HTTP_400_BAD_REQUEST)
    if len(request.url.query) > MAX_CALLBACK_QUERY:
        return error_page("The login answer is too long.", status.HTTP_400_BAD_REQUEST)
    return dict(items)


def _resume(request: Request) -> str:
    """The callback's own path and query: where the sign-in comes back to. Built from the
    route's path (never from a parameter), and checked like every resume."""
    resume = resume_target(f"{CALLBACK_PATH}?{request.url.query}")
    return resume if resume is not None else CALLBACK_PATH


def _oauth(context: HubContext) -> OAuthService:
    assert context.oauth is not None  # the built-in component always runs
    return context.oauth


async def _finish(context: HubContext, query: dict[str, str], user_id: int) -> Response:
    try:
        finished = await finish_login(context, query, signed_in=user_id)
    except LoginOfAnotherUser as refused:
        return error_page(str(refused), status.HTTP_403_FORBIDDEN)
    except (LoginFailed, NotFound) as error:
        log.info("an upstream login callback was refused: %s", error)
        return error_page(str(error) if isinstance(error, LoginFailed)
                          else "The upstream of this login is gone.",
                          status.HTTP_400_BAD_REQUEST)
    await _first_catalog(context, finished)
    if finished.return_to:
        return RedirectResponse(finished.return_to, status.HTTP_303_SEE_OTHER,
                                headers=PAGE_HEADERS)
    return notice_page("Connected", f"Your login to the upstream {finished.upstream_name} "
                                    "is kept by the hub. You may close this window.")


async def _first_catalog(context: HubContext, finished: Finished) -> None:
    """Fetch the newly connected upstream's catalog with the new login (its tools appear in
    /mcp at once) and tell every replica; a failure is only logged (the upstream's health
    says it, and a refresh retries)."""
    assert context.refresh_slots is not None
    try:
        upstream = await context.store.upstreams.get(finished.user_id, finished.upstream_id)
        async with context.refresh_slots.for_user(finished.user_id):
            await refresh_catalog(context.store, upstream, context.settings,
                                  fetch=context.fetch,
                                  credentials=credentials_for(context, "catalog"))
    except Exception as error:  # the login itself is kept: the page says so
        log.info("the first catalog of upstream %s failed: %s", finished.upstream_id, error)
    await announce_change(context, finished.user_id, finished.upstream_id)
