"""The exceptions of authorization. Messages never carry a secret (token, code, verifier,
client secret): they name the party, the step and the OAuth error code only."""

from __future__ import annotations

from mcpkit.errors import McpkitError, PeerError, TransportError, UsageError


class AuthorizationError(PeerError):
    """The protected resource or its authorization server refused, or sent something the
    client cannot use (bad metadata, a mismatched issuer or resource, an error response)."""


class AuthorizationNotConfigured(UsageError):
    """The client has no way to identify itself to the authorization server: configure a
    client id (and secret), or use an AS that supports DCR or Client ID Metadata Documents."""


class AuthorizationFailed(TransportError):
    """What an HTTP transport raises when a request needed authorization and it could not
    be obtained; `reason` (also the `__cause__`) is the AuthorizationError or
    AuthorizationNotConfigured that stopped it."""

    def __init__(self, url: str, reason: McpkitError) -> None:
        super().__init__(f"authorization for {url} failed: {reason}")
        self.url = url
        self.reason = reason
