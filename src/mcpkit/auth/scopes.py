"""Which scopes an authorization request asks for (MCP "scope selection strategy")."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

OFFLINE_ACCESS = "offline_access"


def select_scopes(challenge_scopes: Sequence[str], resource_scopes: Sequence[str] | None,
                  server_scopes: Sequence[str] | None) -> list[str]:
    """The `WWW-Authenticate` scopes, else the protected resource's `scopes_supported`, else
    none; plus `offline_access` when the authorization server lists it (so a refresh token
    comes back) and something else is asked for or the AS lists scopes at all."""
    chosen = list(challenge_scopes) or list(resource_scopes or [])
    if server_scopes and OFFLINE_ACCESS in server_scopes and chosen:
        chosen.append(OFFLINE_ACCESS)
    return unique(chosen)


def union(*groups: Iterable[str]) -> list[str]:
    """The scopes of all groups, first occurrence order (step-up keeps what was granted)."""
    return unique(scope for group in groups for scope in group)


def unique(scopes: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for scope in scopes:
        if scope:
            seen.setdefault(scope, None)
    return list(seen)
