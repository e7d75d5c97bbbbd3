"""mcpkit's Client ID Metadata Document (draft-ietf-oauth-client-id-metadata-document, the
MCP 2025-11-25 registration of choice): a JSON document published at an HTTPS URL, and that
URL is the client id. An authorization server that supports it fetches the document and
checks the redirect URI against its `redirect_uris` (here: exactly the loopback range).

mcpkit cannot host a URL by itself, and it ships NO default URL: a default on a domain the
project does not control could be published by whoever holds that domain, who would then
speak as "mcpkit" at every authorization server trusting the document and choose its redirect
URIs. So whoever deploys mcpkit publishes the document (this module writes it) and names its
URL: `OAuth(client_metadata_url=…)`, the `oauth.client_metadata_url` setting, or
$MCPKIT_OAUTH_CLIENT_METADATA_URL. Without one, registration falls back to DCR.

    python -m mcpkit.client.oauth_client_metadata https://example.com/mcp/client.json > client.json
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from collections.abc import Sequence
from typing import Any

from mcpkit.client.oauth_redirect import DEFAULT_REDIRECT_URIS
from mcpkit.errors import InvalidArgument

CLIENT_NAME = "mcpkit"


def check_client_metadata_url(url: str) -> str:
    """`url` when it can be a client id: HTTPS, a host, a path, no fragment or credentials
    (the draft's §3 rules)."""
    parts = urllib.parse.urlsplit(url)
    problem = (
        "it must use https" if parts.scheme != "https" else
        "it has no host" if not parts.hostname else
        "it must have a path (e.g. /client.json)" if parts.path in ("", "/") else
        "it must not have a fragment" if parts.fragment or url.endswith("#") else
        "it must not hold a user name or password" if "@" in parts.netloc else
        "it must not have dot segments" if any(s in (".", "..")
                                               for s in parts.path.split("/")) else
        None)
    if problem:
        raise InvalidArgument(f"the client metadata URL {url!r} cannot be a client id: {problem}")
    return url


def client_metadata_document(url: str, *, client_name: str = CLIENT_NAME,
                             redirect_uris: Sequence[str] = DEFAULT_REDIRECT_URIS
                             ) -> dict[str, Any]:
    """The document to publish at `url` (its `client_id` is `url`, exactly)."""
    return {
        "client_id": check_client_metadata_url(url),
        "client_name": client_name,
        "redirect_uris": list(redirect_uris),
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "application_type": "native",
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcpkit.client.oauth_client_metadata",
        description="Print the Client ID Metadata Document to publish at URL (then set "
                    "MCPKIT_OAUTH_CLIENT_METADATA_URL=URL).")
    parser.add_argument("url", help="the HTTPS URL the document is published at")
    parser.add_argument("--client-name", default=CLIENT_NAME,
                        help=f"the name users see on the consent page (default {CLIENT_NAME})")
    args = parser.parse_args(argv)
    try:
        document = client_metadata_document(args.url, client_name=args.client_name)
    except InvalidArgument as exc:
        parser.error(str(exc))
    sys.stdout.write(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
