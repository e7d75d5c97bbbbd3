"""The authorization server's metadata, as a resource server reads it: the well-known URLs
in the spec's order (`mcpkit.auth.discovery`), the first that answers 200 with a document for
exactly this issuer (RFC 8414 §3.3) wins."""

from __future__ import annotations

from mcpkit.auth.discovery import authorization_server_urls
from mcpkit.auth.errors import AuthorizationError
from mcpkit.auth.metadata import IssuerKeysMetadata, decode_document
from mcpkit.auth.resource import VerifierUnavailable
from mcpkit.server.authorization.fetch import AuthServerHttp


async def issuer_metadata(issuer: str, http: AuthServerHttp) -> IssuerKeysMetadata:
    """The metadata of `issuer`, or VerifierUnavailable naming what went wrong."""
    problems: list[str] = []
    for url in authorization_server_urls(issuer):
        reply = await http.get(url)
        if reply.status != 200:
            problems.append(f"{url} answered {reply.status}")
            continue
        try:
            metadata = decode_document(reply.body, IssuerKeysMetadata,
                                       f"the metadata at {url}", http.max_bytes)
        except AuthorizationError as exc:
            problems.append(str(exc))
            continue
        if metadata.issuer != issuer:
            problems.append(f"the metadata at {url} is for another issuer")
            continue
        return metadata
    raise VerifierUnavailable(f"no usable metadata for the issuer {issuer}: "
                              + "; ".join(problems))
