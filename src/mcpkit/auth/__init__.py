"""OAuth/OIDC pieces shared by client, server and hub: metadata, PKCE, DPoP proofs, client
authentication, token stores. No HTTP here: the flows that talk HTTP live in mcpkit.client
(and later server and hub)."""
