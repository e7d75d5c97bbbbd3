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
- or the owner's per-user login is missing or dead (`UpstreamNeedsLogin`, raised by
  `hub/upstream_auth.py` before anything is sent; see `login_errors`).

Everything else - refused connections, timeouts, a broken protocol, 5xx - stays "unhealthy".
The reason names the action: the login endpoint (`POST …/{id}/oauth/start`, which answers
with the authorization URL), or new credentials (PATCH `bearer_token`/`headers`).
"""

from __future__ import annotations

import functools
import importlib

from mcpkit.client.auth_refusal import authorization_refusal, causes
from mcpkit.hub.store.records import UpstreamRecord
from mcpkit.hub.upstream_client import UpstreamUnavailable, reason

UPSTREAMS_PATH = "/api/v1/users/mcp/upstreams"
LOGIN_SUFFIX = "/oauth/start"
UPSTREAM_AUTH_MODULE = "mcpkit.hub.upstream_auth"


class UpstreamNeedsAuth(UpstreamUnavailable):
    """The upstream refused the hub for want of authorization (see the module); `str()` is
    the reason with the action that fixes it (no secrets: never a token or a header value)."""

    def __init__(self, message: str, upstream_id: str) -> None:
        super().__init__(message)
        self.upstream_id = upstream_id

    @property
    def login_path(self) -> str:
        return login_path(self.upstream_id)


def login_path(upstream_id: str) -> str:
    """The hub's endpoint that starts the owner's login to the upstream (POST)."""
    return f"{UPSTREAMS_PATH}/{upstream_id}{LOGIN_SUFFIX}"


def login_action(upstream_id: str) -> str:
    """What the owner does about `needs_auth`, in a sentence."""
    return (f"log in with POST {login_path(upstream_id)} (it answers with the authorization "
            "URL to open), or give the upstream credentials that it accepts (PATCH "
            "bearer_token or headers)")


def refusal(
    upstream: UpstreamRecord, error: BaseException, *, sent_credentials: bool
) -> UpstreamNeedsAuth | None:
    """`error` (what connecting to or calling `upstream` raised) as `UpstreamNeedsAuth`,
    or None when it is some other failure. `sent_credentials`: whether the hub sent stored
    headers or a bearer (then a 401 is their refusal)."""
    login_error = next((cause for cause in causes(error) if isinstance(cause, login_errors())),
                       None)
    if login_error is not None:
        what = reason(login_error)
    else:
        found = authorization_refusal(error)
        if found is None or not (found.status is not None or found.login_needed):
            return None
        if found.status is None:
            what = "no login to it is kept"
        else:
            kind = "an OAuth login" if found.oauth_challenge else "authorization"
            what = (f"it refused the stored credentials (HTTP {found.status}; it asks for "
                    f"{kind})" if sent_credentials
                    else f"it asks for {kind} (HTTP {found.status})")
    return UpstreamNeedsAuth(f"{upstream.name}: {what}; {login_action(upstream.id)}",
                             upstream.id)


@functools.cache
def login_errors() -> tuple[type[BaseException], ...]:
    """`UpstreamNeedsLogin` of `hub/upstream_auth.py` (the owner's login missing or dead),
    or () while that module is not part of this mcpkit: then only the upstream's own 401
    tells (a stand-in until the per-user login lands; imported by name so either way
    type-checks)."""
    try:
        module = importlib.import_module(UPSTREAM_AUTH_MODULE)
    except ImportError:
        return ()
    found = getattr(module, "UpstreamNeedsLogin", None)
    return (found,) if isinstance(found, type) and issubclass(found, BaseException) else ()


__all__ = ["UpstreamNeedsAuth", "login_action", "login_errors", "login_path", "refusal"]
