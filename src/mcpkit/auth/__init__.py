"""OAuth 2.1 / OpenID pieces shared by the client, server and hub: no network IO here.

    challenge    `WWW-Authenticate: Bearer …` parsing (RFC 6750, RFC 9728 `resource_metadata`)
    challenges   the general `WWW-Authenticate` grammar (RFC 9110 §11.6.1), every scheme
    metadata     protected-resource (RFC 9728) and authorization-server (RFC 8414 / OIDC
                 discovery) metadata documents, decoded strictly and bounded
    discovery    the well-known URLs to try, in the spec's order (and the 2025-03-26 fallbacks)
    scopes       which scopes to ask for
    tokens       `TokenSet` (secrets masked in repr) and the `TokenStore` interface
    provider     `HttpAuth`: what an HTTP transport asks for headers and hands 401/403s to
    client_auth  token-endpoint client authentication: none, client_secret_basic/_post,
                 private_key_jwt (RFC 6749 §2.3, RFC 7523 §2.2)
    assertions   client-credentials and jwt-bearer grant forms (RFC 7523), the ID token → ID-JAG
                 exchange (RFC 8693) of enterprise-managed authorization
    dpop         DPoP keys, proofs and nonce challenges (RFC 9449)
    resource     the resource server's side: `AuthInfo`, `TokenRequest`, `TokenVerifier`,
                 `InvalidToken`, `DPoPNonceRequired`, `presented_token`, `challenge_header`,
                 `protected_resource_metadata`
    access_token RFC 9068 JWT access tokens at a resource: header, signature, claim checks
    introspection RFC 7662 introspection answers, held to the same audience/expiry rules
    dpop_proof   RFC 9449 proofs at a resource: presentation, the proof, the nonce
    forms        `SecretFields`: form fields and headers whose values never show in a repr
    errors       the exceptions of this package

Layering: may import `mcpkit.errors`, `mcpkit.protocol` and libraries; never the client,
server or hub (the flows that talk HTTP live in `mcpkit.client.oauth`).
"""
