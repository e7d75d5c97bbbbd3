"""Which stored login an `OAuth` resumes for a server URL, instead of authorizing again.

A stored grant (mcpkit.client.token_store) is resumed when it can be refreshed (the
authorization server's metadata and the client registration were stored with it, and they
agree with its key), its resource covers the URL (RFC 9728 §3.3), and it fits what is
configured now: the client id and its issuer when set, and every configured scope granted;
DPoP-bound tokens only with DPoP on and their key stored (RFC 9449: they cannot be presented
without it).
Among several, the most specific resource wins, then the latest expiry. A configured client's
secret is taken from the configuration, not the store (it may have been rotated)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from mcpkit.auth.dpop import is_dpop_token_type
from mcpkit.auth.metadata import resource_matches
from mcpkit.auth.tokens import mask
from mcpkit.client.token_records import StoredGrant


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class Configured:
    """The client identity configured on the `OAuth` (None: not configured)."""

    client_id: str | None
    client_secret: str | None
    client_issuer: str | None

    def __repr__(self) -> str:
        return (f"Configured(client_id={self.client_id!r}, client_secret="
                f"{mask(self.client_secret)}, client_issuer={self.client_issuer!r})")


def pick_stored(grants: Sequence[StoredGrant], url: str, scopes: Sequence[str] | None,
                identity: Configured, *, dpop: bool = False) -> StoredGrant | None:
    usable = [g for g in grants if _fits(g, url, identity, scopes)
              and _presentable(g, dpop)]
    if not usable:
        return None
    best = max(usable, key=lambda g: (len(g.resource), g.tokens.expires_at or 0.0))
    client = best.client
    if client is not None and client.source == "configured" and identity.client_secret:
        best = dataclasses.replace(
            best, client=dataclasses.replace(client, client_secret=identity.client_secret))
    return best


def _presentable(grant: StoredGrant, dpop: bool) -> bool:
    if is_dpop_token_type(grant.tokens.token_type):
        return dpop and grant.dpop_key is not None
    return True


def _fits(grant: StoredGrant, url: str, identity: Configured,
          scopes: Sequence[str] | None) -> bool:
    metadata, client = grant.metadata, grant.client
    if metadata is None or client is None:
        return False  # bare tokens: nothing to refresh them with
    if metadata.issuer != grant.issuer or client.client_id != grant.client_id:
        return False  # a record that contradicts its own key (an edited store)
    if not resource_matches(grant.resource, url):
        return False
    if identity.client_id is not None and grant.client_id != identity.client_id:
        return False
    if identity.client_issuer is not None and grant.issuer != identity.client_issuer:
        return False
    return scopes is None or set(scopes) <= set(grant.scopes)
