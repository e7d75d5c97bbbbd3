"""OAuth 2.1 / OpenID pieces shared by the client, server and hub: no network IO here.

    challenge    `WWW-Authenticate: Bearer …` parsing (RFC 6750, RFC 9728 `resource_metadata`)
    metadata     protected-resource (RFC 9728) and authorization-server (RFC 8414 / OIDC
                 discovery) metadata documents, decoded strictly and bounded
    discovery    the well-known URLs to try, in the spec's order (and the 2025-03-26 fallbacks)
    scopes       which scopes to ask for
    tokens       `TokenSet` (secrets masked in repr) and the `TokenStore` interface
    provider     `HttpAuth`: what an HTTP transport asks for headers and hands 401/403s to
    errors       the exceptions of this package

Layering: may import `mcpkit.errors`, `mcpkit.protocol` and libraries; never the client,
server or hub (the flows that talk HTTP live in `mcpkit.client.oauth`).
"""
