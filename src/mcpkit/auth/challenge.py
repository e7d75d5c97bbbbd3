"""`WWW-Authenticate` parsing: the `Bearer` challenge's parameters (RFC 6750 §3, RFC 9728 §5.1).

The header is hostile input: `mcpkit.auth.challenges` reads it (bounded, strict RFC 9110
grammar); here a malformed or over-long header yields no challenge (the caller then discovers
by well-known URLs) instead of an exception."""

from __future__ import annotations

from dataclasses import dataclass

from mcpkit.auth.challenges import DEFAULT_MAX_CHALLENGE_CHARS, MalformedChallenge, parse_challenges

MAX_HEADER_CHARS = DEFAULT_MAX_CHALLENGE_CHARS
"""Longer `WWW-Authenticate` values are ignored: no legitimate challenge comes near this."""


@dataclass(frozen=True, slots=True)
class BearerChallenge:
    """The parameters of a `Bearer` challenge that matter to a client."""

    resource_metadata: str | None = None
    scope: str | None = None
    error: str | None = None
    error_description: str | None = None

    @property
    def scopes(self) -> list[str]:
        return self.scope.split() if self.scope else []


def parse_bearer_challenge(value: str | None, *,
                           max_chars: int = MAX_HEADER_CHARS) -> BearerChallenge | None:
    """The `Bearer` (else `DPoP`) challenge in a `WWW-Authenticate` value, or None (absent,
    too long, malformed, or a parameter given twice, which RFC 6750 §3 forbids)."""
    if not value:
        return None
    try:
        challenges = parse_challenges(value, max_chars=max_chars)
    except MalformedChallenge:
        return None
    # A DPoP resource challenges with the `DPoP` scheme (RFC 9449 §7.1) and the same
    # parameters; Bearer is preferred when both come.
    for scheme, params in sorted(challenges, key=lambda c: c[0] != "bearer"):
        if scheme in ("bearer", "dpop"):
            return BearerChallenge(
                resource_metadata=params.get("resource_metadata"),
                scope=params.get("scope"),
                error=params.get("error"),
                error_description=params.get("error_description"),
            )
    return None
