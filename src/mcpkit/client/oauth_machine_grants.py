"""The machine grants: how a client without a user obtains a token, as the token request's
form (`MachineAuth` in oauth_machine sends it, authenticated as the grant's client).

    ClientCredentialsGrant  `client_credentials` (OAuth 2.1 §4.2, SEP-1046), authenticated
                            with a client secret (Basic, else post) or a private key
                            (private_key_jwt, RFC 7523 §2.2)
    WorkloadIdentityGrant   RFC 7523 jwt-bearer with the workload's own JWT (workload identity
                            federation, SEP-1933): a value, a callable, or a file read anew
                            for each grant (platforms rotate those files)
    EnterpriseGrant         enterprise-managed authorization (SEP-990): the user's ID token
                            exchanged at the enterprise IdP for an ID-JAG (RFC 8693), then the
                            ID-JAG as a jwt-bearer grant at the MCP authorization server

Secrets (client secrets, keys, JWTs) are kept out of every repr and message.
"""

from __future__ import annotations

import inspect
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mcpkit.auth.assertions import (
    DEFAULT_MAX_ASSERTION_CHARS,
    client_credentials_form,
    id_jag_exchange_form,
    jwt_bearer_form,
    parse_id_jag_response,
)
from mcpkit.auth.client_auth import (
    ClientAuthMethod,
    ClientCredentials,
    SigningAlgorithm,
    SigningKey,
    choose_auth_method,
    client_authentication,
)
from mcpkit.auth.errors import AuthorizationError
from mcpkit.auth.forms import SecretFields, merge_fields
from mcpkit.auth.metadata import AuthorizationServerMetadata
from mcpkit.client.oauth_http import OAuthHttp, Reply
from mcpkit.errors import InvalidArgument

__all__ = [
    "Assertion",
    "ClientCredentialsGrant",
    "EnterpriseGrant",
    "GrantTarget",
    "MachineGrant",
    "WorkloadIdentityGrant",
    "client_credentials",
    "token_error",
]

Assertion = str | Callable[[], str] | Callable[[], Awaitable[str]]
"""A JWT, or what produces a current one for each grant (sync or async)."""

PrivateKey = str | bytes | SigningKey
"""A PEM private key (or a loaded `SigningKey`) for private_key_jwt."""


@dataclass(frozen=True, slots=True)
class GrantTarget:
    """Where a grant goes and what it asks for: the authorization server's metadata, the
    RFC 8707 resource (the protected resource's identifier) and the scopes."""

    metadata: AuthorizationServerMetadata
    resource: str
    scopes: tuple[str, ...]


class MachineGrant(Protocol):
    """A grant `MachineAuth` can run: the client it authenticates as at the authorization
    server (None: no client authentication) and the grant's own form fields."""

    @property
    def credentials(self) -> ClientCredentials | None: ...

    async def fields(self, http: OAuthHttp, target: GrantTarget) -> SecretFields: ...


def client_credentials(client_id: str, client_secret: str | None = None,
                       private_key: PrivateKey | None = None,
                       signing_algorithm: SigningAlgorithm = "ES256",
                       key_id: str | None = None) -> ClientCredentials:
    """A client's credentials from what a user configures."""
    if client_secret is not None and private_key is not None:
        raise InvalidArgument("give a client secret or a private key, not both")
    key = private_key
    if key is not None and not isinstance(key, SigningKey):
        key = SigningKey(key, signing_algorithm, key_id=key_id)
    return ClientCredentials(client_id, client_secret, key)


def client_auth_fields(credentials: ClientCredentials | None,
                       metadata: AuthorizationServerMetadata,
                       ) -> tuple[SecretFields, SecretFields]:
    """(form fields, headers) authenticating `credentials` at the token endpoint with the
    method both sides support. A public client (an id only) sends its id whatever the server
    advertises; no credentials: nothing."""
    if credentials is None:
        return SecretFields(), SecretFields()
    if credentials.methods() == [ClientAuthMethod.NONE]:
        method = ClientAuthMethod.NONE
    else:
        method = choose_auth_method(
            credentials, metadata.token_endpoint_auth_methods_supported,
            signing_algs_advertised=metadata.token_endpoint_auth_signing_alg_values_supported)
    # The assertion's audience is the issuer: what RFC 7523bis asks, and what the MCP
    # conformance mock checks.
    return client_authentication(method, credentials, audience=metadata.issuer)


def token_error(what: str, reply: Reply) -> AuthorizationError:
    """The error for a refused token request: the endpoint, the status and the OAuth error
    code only (never the body, which may echo a request's secrets)."""
    code = reply.oauth_error()
    return AuthorizationError(f"{what} refused (HTTP {reply.status}" +
                              (f", {code})" if code else ")"))


class ClientCredentialsGrant:
    """The client-credentials grant for a confidential client: `client_secret` or
    `private_key` (PEM; ES256 or RS256 per `signing_algorithm`)."""

    def __init__(self, client_id: str, *, client_secret: str | None = None,
                 private_key: PrivateKey | None = None,
                 signing_algorithm: SigningAlgorithm = "ES256",
                 key_id: str | None = None) -> None:
        if client_secret is None and private_key is None:
            raise InvalidArgument("the client-credentials grant needs a client secret or a "
                                  "private key")
        self._credentials = client_credentials(client_id, client_secret, private_key,
                                               signing_algorithm, key_id)

    @property
    def credentials(self) -> ClientCredentials:
        return self._credentials

    async def fields(self, http: OAuthHttp, target: GrantTarget) -> SecretFields:
        return client_credentials_form(scope=target.scopes, resource=target.resource)

    def __repr__(self) -> str:
        return f"ClientCredentialsGrant({self._credentials!r})"


class WorkloadIdentityGrant:
    """The jwt-bearer grant with the workload's JWT (`assertion`: a value, or a callable
    returning the current one). `client_id` (with `client_secret` or `private_key` when the
    authorization server wants client authentication) names the client; without it the
    request carries the assertion alone."""

    def __init__(self, assertion: Assertion, *, client_id: str | None = None,
                 client_secret: str | None = None, private_key: PrivateKey | None = None,
                 signing_algorithm: SigningAlgorithm = "ES256") -> None:
        if client_id is None and (client_secret is not None or private_key is not None):
            raise InvalidArgument("a client secret or key needs the client_id it belongs to")
        self._assertion = assertion
        self._credentials = (None if client_id is None else client_credentials(
            client_id, client_secret, private_key, signing_algorithm))

    @classmethod
    def from_file(cls, path: str | Path, *, client_id: str | None = None,
                  client_secret: str | None = None, private_key: PrivateKey | None = None,
                  signing_algorithm: SigningAlgorithm = "ES256") -> WorkloadIdentityGrant:
        """The grant with the JWT in `path` (a projected service-account token, say), read
        again for every grant."""
        return cls(_file_reader(Path(path)), client_id=client_id,
                   client_secret=client_secret, private_key=private_key,
                   signing_algorithm=signing_algorithm)

    @property
    def credentials(self) -> ClientCredentials | None:
        return self._credentials

    async def fields(self, http: OAuthHttp, target: GrantTarget) -> SecretFields:
        return jwt_bearer_form(await _current(self._assertion), scope=target.scopes,
                               resource=target.resource)

    def __repr__(self) -> str:
        return f"WorkloadIdentityGrant(assertion='***', credentials={self._credentials!r})"


class EnterpriseGrant:
    """Enterprise-managed authorization: `id_token` (the user's, from the enterprise IdP;
    a value or a callable) is exchanged at `idp_token_endpoint` for an ID-JAG addressed to
    the MCP authorization server, which the client then presents as a jwt-bearer grant,
    authenticated as `client_id` (with `client_secret` or `private_key`). At the IdP the
    client is `idp_client_id` (with `idp_client_secret` when it is confidential there)."""

    def __init__(self, *, id_token: Assertion, idp_token_endpoint: str, client_id: str,
                 client_secret: str | None = None, private_key: PrivateKey | None = None,
                 signing_algorithm: SigningAlgorithm = "ES256",
                 idp_client_id: str | None = None,
                 idp_client_secret: str | None = None) -> None:
        if idp_client_secret is not None and idp_client_id is None:
            raise InvalidArgument("idp_client_secret needs the idp_client_id it belongs to")
        self._id_token = id_token
        self.idp_token_endpoint = idp_token_endpoint
        self._credentials = client_credentials(client_id, client_secret, private_key,
                                               signing_algorithm)
        self._idp_credentials = (None if idp_client_id is None else
                                 ClientCredentials(idp_client_id, idp_client_secret))

    @property
    def credentials(self) -> ClientCredentials:
        return self._credentials

    async def fields(self, http: OAuthHttp, target: GrantTarget) -> SecretFields:
        id_jag = await self._exchange(http, target)
        return jwt_bearer_form(id_jag, scope=target.scopes, resource=target.resource)

    async def _exchange(self, http: OAuthHttp, target: GrantTarget) -> str:
        """The RFC 8693 token exchange at the IdP: the ID token in, an ID-JAG out."""
        idp = self._idp_credentials
        public = idp is not None and idp.client_secret is None
        form = id_jag_exchange_form(
            await _current(self._id_token), audience=target.metadata.issuer,
            resource=target.resource, scope=target.scopes,
            client_id=idp.client_id if public and idp is not None else None)
        headers = SecretFields()
        if idp is not None and not public:
            extra, headers = client_authentication(ClientAuthMethod.CLIENT_SECRET_BASIC, idp,
                                                   audience=self.idp_token_endpoint)
            form = merge_fields(form, extra)
        reply = await http.post_form(self.idp_token_endpoint, urllib.parse.urlencode(form),
                                     headers)
        if not reply.ok:
            raise token_error(f"the IdP's token exchange at {self.idp_token_endpoint}", reply)
        return parse_id_jag_response(reply.body, max_bytes=http.max_bytes).assertion

    def __repr__(self) -> str:
        return (f"EnterpriseGrant(id_token='***', idp_token_endpoint="
                f"{self.idp_token_endpoint!r}, credentials={self._credentials!r})")


async def _current(assertion: Assertion) -> str:
    if isinstance(assertion, str):
        return assertion
    value = assertion()
    if inspect.isawaitable(value):
        value = await value
    if not isinstance(value, str):
        raise InvalidArgument("an assertion source must return the JWT as a str")
    return value.strip()


def _file_reader(path: Path) -> Callable[[], str]:
    def read() -> str:
        try:
            with path.open("rb") as file:
                data = file.read(DEFAULT_MAX_ASSERTION_CHARS + 1)
        except OSError as exc:
            raise InvalidArgument(f"cannot read the workload token file {str(path)!r}: "
                                  f"{exc.strerror or type(exc).__name__}") from None
        if len(data) > DEFAULT_MAX_ASSERTION_CHARS:
            raise InvalidArgument(f"the workload token file {str(path)!r} is over "
                                  f"{DEFAULT_MAX_ASSERTION_CHARS} bytes")
        try:
            return data.decode("ascii").strip()
        except UnicodeDecodeError:
            raise InvalidArgument(f"the workload token file {str(path)!r} is not a JWT "
                                  "(not ASCII)") from None
    return read
