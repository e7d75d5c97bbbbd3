"""Logout: end the kept logins for an MCP server, at the authorization server and here.

`logout(store, url)` revokes each kept login's refresh token, then its access token (RFC
7009), at the authorization server's `revocation_endpoint` when it has one (a server that does
not revoke a type, such as self-contained JWT access tokens, says unsupported_token_type: not a
failure), and then removes the login from the store. A revocation that fails (no endpoint, the
server unreachable or refusing) is reported and does not stop the local removal: a logout
always forgets."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from mcpkit.auth.errors import AuthorizationError
from mcpkit.client import oauth_grant
from mcpkit.client.oauth_http import OAuthHttp
from mcpkit.client.token_records import StoredGrant
from mcpkit.client.token_store import PersistentTokenStore

log = logging.getLogger(__name__)


@dataclass(slots=True)
class LogoutReport:
    """What a logout did: logins removed, tokens the authorization server revoked, and
    why a revocation did not happen (issuer: reason; never a token)."""

    removed: int = 0
    revoked: int = 0
    not_revoked: list[str] = field(default_factory=list)


async def logout(store: PersistentTokenStore, url: str, *,
                 http: OAuthHttp | None = None) -> LogoutReport:
    report = LogoutReport()
    http = http if http is not None else OAuthHttp()
    for grant in await store.grants(url):
        await revoke_grant(http, grant, report)
    report.removed = await store.forget(url)
    return report


async def revoke_grant(http: OAuthHttp, grant: StoredGrant, report: LogoutReport) -> None:
    """Revoke one kept login's refresh token, then its access token (the module says how
    failures are reported)."""
    if grant.metadata is None or grant.client is None:
        report.not_revoked.append(f"{grant.issuer}: the store holds no client for it")
        return
    tokens = grant.tokens
    pairs = [(tokens.refresh_token, "refresh_token"), (tokens.access_token, "access_token")]
    for token, hint in pairs:
        if not token:
            continue
        try:
            await oauth_grant.revoke(http, grant.metadata, grant.client, token, hint)
        except oauth_grant.UnsupportedTokenType:
            continue  # a self-contained access token: it expires on its own
        except AuthorizationError as exc:
            report.not_revoked.append(f"{grant.issuer}: {exc}")
            log.warning("logout: %s was not revoked at %s: %s", hint, grant.issuer, exc)
            return
        report.revoked += 1
