"""An upstream that wants authorization the hub does not have: health status `needs_auth`,
told apart from a dead upstream ("unhealthy").

    refused = refusal(upstream, error, sent_credentials=True)   # UpstreamNeedsAuth | None
    raise refused from error                                     # when not None
    login_path(upstream.id)     # "/api/v1/users/mcp/upstreams/<id>/oauth/start"

An upstream needs authorization when connecting to it or calling it failed because

- it answered HTTP 401 - whatever its challenge: an OAuth one (`WWW-Authenticate: Bearer
  resource_metadata=…`, RFC 9728), a bare `Bearer`, or a refusal of the stored token (an
  expired or revoked one); what the Client raised is read by `client.auth_refusal`, the same
  reading the manager's `needs_auth` uses;
- or the client's OAuth had nothing to get a token with (no login kept);
- or the owner's per-user login to an "oauth" upstream is missing or dead
  (`UpstreamNeedsLogin`, raised by `hub/upstream_auth.py`: before anything is sent, or when
  the authorization server refuses its refresh), or, for a "token_exchange" one, their
  identity at the hub's provider (`UpstreamNeedsSignIn`, an `UpstreamNeedsLogin`).

Everything else - refused connections, timeouts, a broken protocol, 5xx - stays "unhealthy".
The reason names the action (`login_action`): the login endpoint (`POST …/{id}/oauth/start`,
which answers with the authorization URL; a "static" upstream is switched to `auth_mode`
"oauth" first), or credentials it accepts (PATCH `bearer_token`/`headers`).
"""

from __future__ import annotations

from mcpkit.client.auth_refusal import authorization_refusal, causes
from mcpkit.hub.store.records import UpstreamRecord
from mcpkit.hub.upstream_auth import UpstreamNeedsLogin
from mcpkit.hub.upstream_auth import start_path as login_path
from mcpkit.hub.upstream_client import UpstreamUnavailable, reason


class UpstreamNeedsAuth(UpstreamUnavailable):
    """The upstream refused the hub for want of authorization (see the module); `str()` is
    the reason with the action that fixes it (no secrets: never a token or a header value)."""

    def __init__(self, message: str, upstream_id: str) -> None:
        super().__init__(message)
        self.upstream_id = upstream_id

    @property
    def login_path(self) -> str:
        """The hub's endpoint that starts the owner's login to the upstream (POST)."""
        return login_path(self.upstream_id)


def login_action(upstream: UpstreamRecord) -> str:
    """What the owner does about `needs_auth`, in a sentence: log in (an "oauth" upstream;
    a "static" one is switched to "oauth" first), or give it credentials it accepts; sign in
    to the hub again (a "token_exchange" one: its token comes from that sign-in)."""
    if upstream.auth_mode == "token_exchange":
        return ("sign in to the hub again through its OpenID Connect provider (the upstream's "
                "token is exchanged for that identity)")
    login = (f"log in with POST {login_path(upstream.id)} (it answers with the authorization "
             "URL to open)")
    if upstream.auth_mode == "oauth":
        return login
    return (f'set its auth_mode to "oauth" (PATCH) and {login}, or give it credentials that '
            "it accepts (PATCH bearer_token or headers)")


def refusal(
    upstream: UpstreamRecord, error: BaseException, *, sent_credentials: bool
) -> UpstreamNeedsAuth | None:
    """`error` (what connecting to or calling `upstream` raised) as `UpstreamNeedsAuth`,
    or None when it is some other failure. `sent_credentials`: whether the hub sent stored
    headers or a bearer (then a 401 is their refusal)."""
    login_error = next((cause for cause in causes(error)
                        if isinstance(cause, UpstreamNeedsLogin)), None)
    if login_error is not None:  # its message already names the login endpoint
        return UpstreamNeedsAuth(reason(login_error), upstream.id)
    found = authorization_refusal(error)
    if found is None or not (found.status is not None or found.login_needed):
        return None
    if found.status is None:
        what = "no login to it is kept"
    else:
        kind = "an OAuth login" if found.oauth_challenge else "authorization"
        what = (f"it refused the stored credentials (HTTP {found.status}; it asks for {kind})"
                if sent_credentials else f"it asks for {kind} (HTTP {found.status})")
    return UpstreamNeedsAuth(f"{upstream.name}: {what}; {login_action(upstream)}", upstream.id)


__all__ = ["UpstreamNeedsAuth", "login_action", "login_path", "refusal"]
