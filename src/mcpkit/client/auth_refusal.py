"""Why a connection failed for want of authorization, read from what the Client raised.

    refusal = authorization_refusal(error)    # None: the failure was something else
    refusal.status == 401, refusal.challenge  # the server answered 401 (its Bearer challenge)
    refusal.login_needed                      # the client's own OAuth could not get a token
                                              # without a user (nothing to log in with)

A Client without `auth` that meets a protected server raises the transport's
`HttpStatusError` (status 401, the `WWW-Authenticate` header kept); a Client whose OAuth
could not get a token raises `AuthorizationFailed`, its `reason` saying why. Either may be
wrapped by the caller (`raise … from error`): the causes are searched, the first of the two
found decides. The manager (`manager/login.py`: when is a server `needs_auth`) and the hub
(`hub/needs_auth.py`: an upstream's `needs_auth`) read failures through this one function.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcpkit.auth.challenge import BearerChallenge, parse_bearer_challenge
from mcpkit.auth.errors import AuthorizationFailed, AuthorizationNotConfigured
from mcpkit.transports.client.base import HttpStatusError

MAX_CAUSES = 20
"""How far down an exception's causes the search goes (a cycle cannot loop)."""
UNAUTHORIZED = 401


@dataclass(frozen=True, slots=True)
class AuthorizationRefusal:
    """A failure for want of authorization: a 401 from the server (`status`, its
    `challenge`), or the client's own OAuth failing before the request (`status` None)."""

    status: int | None
    challenge: BearerChallenge | None = None
    login_needed: bool = False
    """For a failure of the client's OAuth: it had nothing to get a token with (no login
    kept, no way to register) - a user must log in. Other OAuth failures are the
    authorization server's refusals, not a missing login."""

    @property
    def oauth_challenge(self) -> bool:
        """The 401 named the server's protected-resource metadata (RFC 9728): OAuth."""
        return self.challenge is not None and self.challenge.resource_metadata is not None


def authorization_refusal(failure: BaseException | None) -> AuthorizationRefusal | None:
    """The authorization refusal among `failure` and its causes, or None."""
    for cause in causes(failure):
        if isinstance(cause, AuthorizationFailed):
            return AuthorizationRefusal(
                status=None,
                login_needed=isinstance(cause.reason, AuthorizationNotConfigured))
        if isinstance(cause, HttpStatusError) and cause.status == UNAUTHORIZED:
            value = next((v for k, v in cause.headers.items()
                          if k.lower() == "www-authenticate"), None)
            return AuthorizationRefusal(status=UNAUTHORIZED,
                                        challenge=parse_bearer_challenge(value))
    return None


def causes(failure: BaseException | None) -> list[BaseException]:
    """`failure`, its cause, that one's cause, … (at most `MAX_CAUSES`, each once)."""
    found: list[BaseException] = []
    current = failure
    while current is not None and len(found) < MAX_CAUSES and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found
