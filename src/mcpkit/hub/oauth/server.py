"""The grant mechanics, from Authlib (`authlib.oauth2.rfc6749`): the authorization code grant
with PKCE (rfc7636, S256 only, required), refresh tokens rotated on every use, revocation
(rfc7009) and the RFC 9207 `iss` parameter. The hub supplies only storage and policy.

Authlib is synchronous; the hub's store is async. Each Authlib call runs in a worker thread
(`HubAuthorizationServer.run`), and its storage hooks call back into the event loop with
`anyio.from_thread.run`. The request is read (bounded) before that, so Authlib sees a plain
`OAuth2Request` over dicts (`plain_request`).

Policy the hub adds on top of Authlib:
- public clients only (`token_endpoint_auth_method` "none"): DCR issues no secrets;
- a client id that is an https URL is a client metadata document's (client_documents.py):
  fetched, checked, stored under its `cimd:` key and used like a DCR client; a refusal is
  `invalid_client` saying why;
- a `code_challenge` with method S256 is required on every authorization request (Authlib
  would let a request without one through);
- `resource` (RFC 8707), when given, must be one of the two resources the hub issues tokens
  for: its /mcp URL (the default) or its REST API `/api/v1` (the web console's). A login is
  for one resource: the code and its refresh family keep it, the access tokens name it as
  `aud`, and a token request naming another resource is refused (`invalid_target`; a refresh
  token presented so is spent, as any refused refresh) - except the console's, whose login
  covers both (its "Try a tool" calls /mcp);
- a redirect URI must equal a registered one exactly, except that a loopback one (http on
  127.0.0.1 or [::1]) may use any port (RFC 8252 §7.3: native apps bind an ephemeral port);
- DPoP (RFC 9449 §5): a token request with a valid proof (checked before Authlib runs, by
  dpop.py; its key's thumbprint rides on the request as `dpop_jkt`) gets `token_type: DPoP`
  and an access token with `cnf.jkt`. The refresh token of a login that began with a proof is
  bound to that key: refreshing it needs a proof by the same key (store.oauth.use_refresh
  refuses it otherwise, without spending it). A login that began without a proof stays a
  bearer login for its refresh tokens; a refresh of it with a proof gets a bound access token.
  An authorization request may name the key in advance (`dpop_jkt`, §10): its code is then
  redeemed only with a proof by that key.
"""

from __future__ import annotations

import logging
import re
import secrets
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import anyio.from_thread
import anyio.to_thread
from authlib.oauth2 import AuthorizationServer, OAuth2Request
from authlib.oauth2.rfc6749 import (
    ClientMixin,
    InvalidClientError,
    InvalidGrantError,
    InvalidRequestError,
    grants,
)
from authlib.oauth2.rfc6749.errors import OAuth2Error
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc9207 import IssuerParameter
from joserfc.jwk import ECKey

from mcpkit.errors import PeerError
from mcpkit.hub.crypto import hash_token
from mcpkit.hub.oauth.client_documents import (
    ClientDocumentRefused,
    ClientDocuments,
    is_document_client_id,
)
from mcpkit.hub.oauth.keys import AccessTokens
from mcpkit.hub.oauth.registration import is_loopback_redirect
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import NotFound, Store, UserRecord
from mcpkit.hub.store.oauth import ClientRecord, CodeRecord, RefreshKeyMismatch, RefreshRecord

log = logging.getLogger(__name__)

CONSOLE_CLIENT_ID = "mcpkit-console"
"""The web console (hub/console): a built-in public client of the hub's authorization server,
registered at start-up, which alone skips the consent page (it is the hub itself) and alone
gets tokens for the REST API."""


class _WithoutIssuedTokens(logging.Filter):
    """Authlib's grants log each issued token response in full at DEBUG ("Issue token
    {...}"): access and refresh tokens in a log. Those records are dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Issue token")


for _grant_logger in (grants.authorization_code.__name__, grants.refresh_token.__name__):
    logging.getLogger(_grant_logger).addFilter(_WithoutIssuedTokens())

T = TypeVar("T")
SCOPES_SUPPORTED = ("mcp",)
"""The hub's one scope: using its /mcp endpoint as the signed-in user."""
# RFC 7638 SHA-256 thumbprint, base64url without padding: 43 characters
_THUMBPRINT = re.compile(r"[A-Za-z0-9_-]{43}")
REFRESH_TOKEN_BYTES = 32
AUTHORIZATION_CODE_LENGTH = 48


class InvalidTargetError(OAuth2Error, PeerError):  # type: ignore[misc]
    """RFC 8707 §2: the `resource` is not one this server issues tokens for (an Authlib
    OAuth2Error, so Authlib answers it, and a PeerError in mcpkit's tree)."""

    error = "invalid_target"


def _without_port(uri: str) -> str:
    parts = urllib.parse.urlsplit(uri)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, ""))


class Reply:
    """What Authlib answered: status, body (a dict for JSON), headers; `location` is the
    redirect (Authlib's RFC 9207 extension appends `iss` to it)."""

    def __init__(self, status: int, body: Any, headers: list[tuple[str, str]]) -> None:
        self.status = status
        self.body = body
        self.headers = headers

    @property
    def location(self) -> str | None:
        return next((value for name, value in self.headers if name.lower() == "location"),
                    None)

    @location.setter
    def location(self, value: str) -> None:
        self.headers = [(n, v) for n, v in self.headers if n.lower() != "location"]
        self.headers.append(("Location", value))


@dataclass(frozen=True, slots=True)
class Login:
    """The user a grant authenticated, with the login (refresh family) it belongs to: what
    Authlib passes as `user` to the token generator and `save_token`, so the access token
    carries the family as its `sid` (the gate refuses it once the family is revoked)."""

    user: UserRecord
    family_id: str
    jkt: str | None = None
    """The DPoP key this request proved: the access token is bound to it (`cnf.jkt`)."""
    refresh_jkt: str | None = None
    """The DPoP key the login's refresh tokens are bound to (None: a bearer login)."""
    resource: str = ""
    """The resource the login is for (its access tokens' `aud`; "": the hub's /mcp)."""

    @property
    def id(self) -> int:
        return self.user.id


class HubClient(ClientMixin):  # type: ignore[misc]
    """A registered (DCR) or metadata-document public client, as Authlib asks about it.
    `get_client_id()` is its stored id; `public_id` the id it goes by (a document client's
    URL), which token claims and pages show."""

    def __init__(self, record: ClientRecord, public_id: str | None = None) -> None:
        self.record = record
        self.public_id = public_id or record.client_id

    def get_client_id(self) -> str:
        return self.record.client_id

    def get_default_redirect_uri(self) -> str | None:
        # RFC 6749 §3.1.2.3 allows a default only with one registered URI; OAuth 2.1 requires
        # the parameter - the hub requires it too (None: a missing one is refused).
        return None

    def get_allowed_scope(self, scope: str | None) -> str:
        wanted = (scope or "").split()
        return " ".join(s for s in wanted if s in SCOPES_SUPPORTED) or " ".join(
            SCOPES_SUPPORTED)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        if redirect_uri in self.record.redirect_uris:
            return True
        if is_loopback_redirect(redirect_uri):
            bare = _without_port(redirect_uri)
            return any(is_loopback_redirect(known) and _without_port(known) == bare
                       for known in self.record.redirect_uris)
        return False

    def check_client_secret(self, client_secret: str) -> bool:
        return False  # public clients have none

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == self.record.token_endpoint_auth_method == "none"

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in self.record.grant_types


class HubCode:
    """A redeemed authorization code (Authlib's AuthorizationCodeMixin)."""

    def __init__(self, record: CodeRecord) -> None:
        self.record = record
        # what Authlib's rfc7636 extension reads
        self.code_challenge = record.code_challenge
        self.code_challenge_method = record.code_challenge_method

    def get_redirect_uri(self) -> str:
        return self.record.redirect_uri

    def get_scope(self) -> str:
        return self.record.scope


class HubRefreshToken:
    """A refresh token just used (Authlib's TokenMixin, as far as the refresh grant asks)."""

    def __init__(self, record: RefreshRecord) -> None:
        self.record = record

    def check_client(self, client: HubClient) -> bool:
        return client.get_client_id() == self.record.client_id

    def get_scope(self) -> str:
        return self.record.scope


class RevocableToken:
    def __init__(self, token_hash: str, client_id: str, access_token: str | None = None,
                 public_id: str | None = None) -> None:
        self.token_hash = token_hash
        self.client_id = client_id
        self.access_token = access_token
        """Set when the token is shaped like one of the hub's JWT access tokens."""
        self.public_id = public_id or client_id
        """The client id access tokens name (`client_id` claim)."""

    def check_client(self, client: HubClient) -> bool:
        return client.get_client_id() == self.client_id


def plain_request(method: str, url: str, data: Mapping[str, str],
                  headers: Mapping[str, str], *, query: Mapping[str, str] | None = None,
                  dpop_jkt: str | None = None) -> OAuth2Request:
    """An Authlib request over already-read values: `data` is the payload (the query of an
    authorization request, the form of a token request); `dpop_jkt` the thumbprint of the
    key a token request's DPoP proof was checked against (dpop.py)."""
    request = _PlainRequest(method, url, headers=dict(headers))
    request.dpop_jkt = dpop_jkt
    request.payload = BasicOAuth2Payload(dict(data))
    request.query_values = dict(query if query is not None else data)
    request.form_values = dict(data)
    return request


class _PlainRequest(OAuth2Request):  # type: ignore[misc]
    query_values: dict[str, str]
    form_values: dict[str, str]
    dpop_jkt: str | None

    @property
    def args(self) -> dict[str, str]:
        return self.query_values

    @property
    def form(self) -> dict[str, str]:
        return self.form_values


class HubAuthorizationServer(AuthorizationServer):  # type: ignore[misc]
    """Authlib's server over the hub's store. Call its methods through `run` (a thread)."""

    def __init__(self, store: Store, tokens: AccessTokens, settings: HubSettings) -> None:
        super().__init__(scopes_supported=list(SCOPES_SUPPORTED))
        self.store = store
        self.tokens = tokens
        self.settings = settings
        self.signing_key: ECKey | None = None
        self.documents = ClientDocuments(store, settings)
        self.register_token_generator("default", TokenGenerator(
            self._access_token, _refresh_token, self._expires_in))
        self.register_grant(CodeGrant, [S256Only(required=True)])
        self.register_grant(RotatingRefreshGrant)
        self.register_endpoint(Revocation)
        self.register_extension(Issuer(settings.issuer))

    async def run(self, call: Callable[..., T], *args: Any) -> T:
        """`call(*args)` in a worker thread, with the current signing key loaded first."""
        self.signing_key = await self.tokens.key()
        return await anyio.to_thread.run_sync(call, *args)

    # --- Authlib's hooks (worker thread) --------------------------------------------------

    def wait(self, call: Callable[..., Any], *args: Any) -> Any:
        """Run a store coroutine on the event loop from Authlib's thread."""
        return anyio.from_thread.run(call, *args)

    def query_client(self, client_id: str) -> HubClient | None:
        if isinstance(client_id, str) and is_document_client_id(client_id):
            try:
                document_client = self.wait(self.documents.client, client_id)
            except ClientDocumentRefused as refused:
                raise InvalidClientError(description=str(refused)) from None
            return HubClient(document_client, public_id=client_id)
        if not isinstance(client_id, str) or len(client_id) > 64:
            return None
        record = self.wait(self.store.oauth.get_client, client_id)
        return None if record is None else HubClient(record)

    def save_token(self, token: dict[str, Any], request: OAuth2Request) -> None:
        refresh = token.get("refresh_token")
        if not refresh:
            return
        login: Login = request.user  # rotation: the same family goes on
        grant = RefreshRecord(login.family_id, request.client.get_client_id(), login.id,
                              token.get("scope", ""), login.resource or self.settings.mcp_url,
                              dpop_jkt=login.refresh_jkt)
        expires = datetime.now(UTC) + timedelta(seconds=self.settings.oauth_refresh_token_ttl_s)
        self.wait(self.store.oauth.save_refresh, hash_token(refresh), grant, expires)

    def create_oauth2_request(self, request: OAuth2Request) -> OAuth2Request:
        return request

    def create_json_request(self, request: OAuth2Request) -> OAuth2Request:
        return request

    def handle_response(self, status: int, body: Any, headers: Any) -> Reply:
        return Reply(status, body, list(headers or []))

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        return None

    def _access_token(self, client: HubClient, grant_type: str, user: Login,
                      scope: str) -> str:
        assert self.signing_key is not None
        return self.tokens.issue_with(self.signing_key, user_id=user.id,
                                      client_id=client.public_id, scope=scope,
                                      family_id=user.family_id, jkt=user.jkt,
                                      resource=user.resource or None)

    def _expires_in(self, client: HubClient, grant_type: str) -> int:
        return int(self.settings.oauth_access_token_ttl_s)


class TokenGenerator(BearerTokenGenerator):  # type: ignore[misc]
    """Authlib's token response, typed `DPoP` when the access token is bound to a key
    (RFC 9449 §5: the client then presents it with the DPoP scheme)."""

    def generate(self, grant_type: str, client: HubClient, user: Login | None = None,
                 scope: str | None = None, expires_in: int | None = None,
                 include_refresh_token: bool = True) -> dict[str, Any]:
        token: dict[str, Any] = super().generate(grant_type, client, user, scope, expires_in,
                                                 include_refresh_token)
        if user is not None and user.jkt is not None:
            token["token_type"] = "DPoP"
        return token


def _refresh_token(*_args: Any, **_kwargs: Any) -> str:
    return secrets.token_urlsafe(REFRESH_TOKEN_BYTES)


def _check_resource(server: HubAuthorizationServer, values: Mapping[str, str],
                    granted: str | None = None, *, client_id: str | None = None) -> str:
    """The resource a request names (default: /mcp), if the hub issues tokens for it - and,
    at the token endpoint, it is the one the code or refresh family was `granted` for. The
    REST API is a resource of the console (`client_id`, at the authorization request) alone:
    the consent page asks for /mcp, and scripts use API tokens. The console's login covers
    both resources (RFC 8707 §2.2: its refresh token is redeemed for either), since its "Try
    a tool" calls /mcp as the signed-in user; any other login keeps its one resource."""
    settings = server.settings
    resource = values.get("resource")
    if resource is None:
        return granted or settings.mcp_url
    resource = resource.rstrip("/")
    if resource not in (settings.mcp_url, settings.api_url):
        raise InvalidTargetError("the hub issues tokens only for its /mcp endpoint "
                                 f"({settings.mcp_url}) and its REST API ({settings.api_url})")
    if resource == settings.api_url and granted is None and client_id != CONSOLE_CLIENT_ID:
        raise InvalidTargetError(f"only the hub's web console gets tokens for its REST API "
                                 f"({settings.api_url}); use an API token for scripts")
    if granted is not None and resource != granted and client_id != CONSOLE_CLIENT_ID:
        raise InvalidTargetError(f"this grant is for {granted}, not {resource}")
    return resource


class S256Only(CodeChallenge):  # type: ignore[misc]
    SUPPORTED_CODE_CHALLENGE_METHOD = ("S256",)
    DEFAULT_CODE_CHALLENGE_METHOD = "S256"


class CodeGrant(grants.AuthorizationCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = ("none",)
    AUTHORIZATION_CODE_LENGTH = AUTHORIZATION_CODE_LENGTH
    server: HubAuthorizationServer

    def validate_authorization_request(self) -> str:
        redirect_uri: str = super().validate_authorization_request()
        values = self.request.payload.data
        error: InvalidRequestError | InvalidTargetError | None = None
        jkt = values.get("dpop_jkt")
        if jkt is not None and not _THUMBPRINT.fullmatch(jkt):
            error = InvalidRequestError("dpop_jkt must be a JWK SHA-256 thumbprint (RFC 7638, "
                                        "base64url)")
        elif not values.get("code_challenge"):
            error = InvalidRequestError("PKCE is required: send code_challenge (S256)")
        elif values.get("code_challenge_method") != "S256":
            error = InvalidRequestError("code_challenge_method must be S256")
        else:
            try:
                _check_resource(self.server, values,
                                client_id=self.request.client.get_client_id())
            except InvalidTargetError as refused:
                error = refused
        if error is not None:
            error.redirect_uri = redirect_uri
            raise error
        return redirect_uri

    def save_authorization_code(self, code: str, request: OAuth2Request) -> None:
        values = request.payload.data
        record = CodeRecord(
            client_id=request.client.get_client_id(), user_id=int(request.user.id),
            redirect_uri=request.payload.redirect_uri, scope=request.scope or "",
            resource=_check_resource(self.server, values,
                                     client_id=request.client.get_client_id()),
            code_challenge=values["code_challenge"],
            code_challenge_method="S256", family_id=secrets.token_hex(16),
            dpop_jkt=values.get("dpop_jkt"))
        expires = datetime.now(UTC) + timedelta(seconds=self.server.settings.oauth_code_ttl_s)
        self.server.wait(self.server.store.oauth.save_code, hash_token(code), record, expires)

    def query_authorization_code(self, code: str, client: HubClient) -> HubCode | None:
        _check_resource(self.server, self.request.form, client_id=client.get_client_id())
        record = self.server.wait(self.server.store.oauth.take_code, hash_token(code),
                                  client.get_client_id())
        if record is not None and record.dpop_jkt not in (None, self.request.dpop_jkt):
            raise InvalidGrantError("the code is bound to a DPoP key (dpop_jkt): the token "
                                    "request needs a DPoP proof signed by it")
        if record is not None:
            _check_resource(self.server, self.request.form, record.resource)
        return None if record is None else HubCode(record)

    def delete_authorization_code(self, authorization_code: HubCode) -> None:
        return None  # taken (marked used) when it was queried

    def authenticate_user(self, authorization_code: HubCode) -> Login | None:
        record = authorization_code.record
        jkt = self.request.dpop_jkt  # a login that begins with a proof is bound to its key
        return _enabled_user(self.server, record.user_id, record.family_id, jkt, jkt,
                             record.resource)


class RotatingRefreshGrant(grants.RefreshTokenGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = ("none",)
    INCLUDE_NEW_REFRESH_TOKEN = True
    server: HubAuthorizationServer

    def authenticate_refresh_token(self, refresh_token: str) -> HubRefreshToken | None:
        client_id = self.request.client.get_client_id()
        _check_resource(self.server, self.request.form, client_id=client_id)
        try:
            record = self.server.wait(self.server.store.oauth.use_refresh,
                                      hash_token(refresh_token), client_id,
                                      self.request.dpop_jkt)
        except RefreshKeyMismatch as mismatch:
            raise InvalidGrantError(str(mismatch)) from None
        if record is not None:
            _check_resource(self.server, self.request.form, record.resource,
                            client_id=client_id)
        return None if record is None else HubRefreshToken(record)

    def authenticate_user(self, refresh_token: HubRefreshToken) -> Login | None:
        record = refresh_token.record
        resource = _check_resource(self.server, self.request.form, record.resource,
                                   client_id=self.request.client.get_client_id())
        return _enabled_user(self.server, record.user_id, record.family_id,
                             self.request.dpop_jkt, record.dpop_jkt, resource)

    def revoke_old_credential(self, refresh_token: HubRefreshToken) -> None:
        return None  # marked used when it was presented; presenting it again revokes all


class Revocation(RevocationEndpoint):  # type: ignore[misc]
    CLIENT_AUTH_METHODS = ("none",)
    SUPPORTED_TOKEN_TYPES = ("access_token", "refresh_token")
    server: HubAuthorizationServer

    def authenticate_token(self, request: OAuth2Request, client: HubClient
                           ) -> RevocableToken | None:
        # A refresh token's whole family (the login) is revoked, if it was issued to this
        # client; so is the login an access token names (its `sid`), if this client holds it.
        # The gate then refuses the login's live access tokens within its re-check bound.
        self.check_params(request, client)
        value = request.form["token"]
        jwt_shaped = value.count(".") == 2
        return RevocableToken(hash_token(value), client.get_client_id(),
                              value if jwt_shaped else None, client.public_id)

    def revoke_token(self, token: RevocableToken, request: OAuth2Request) -> None:
        if token.access_token is not None:
            login = self.server.wait(self.server.tokens.login_of, token.access_token)
            if login is not None and login[0] == token.public_id:
                self.server.wait(self.server.store.oauth.revoke_family, login[1],
                                 token.client_id)
            return
        self.server.wait(self.server.store.oauth.revoke_family_of, token.token_hash,
                         token.client_id)


class Issuer(IssuerParameter):  # type: ignore[misc]
    def __init__(self, issuer: str) -> None:
        self.issuer = issuer

    def get_issuer(self) -> str:
        return self.issuer


def _enabled_user(server: HubAuthorizationServer, user_id: int, family_id: str,
                  jkt: str | None, refresh_jkt: str | None, resource: str) -> Login | None:
    try:
        user: UserRecord = server.wait(server.store.users.get, user_id)
    except NotFound:  # deleted since
        return None
    return None if user.disabled else Login(user, family_id, jkt, refresh_jkt, resource)

