"""`mcpkit hub`: users register their MCP servers ("upstreams") and reach them all through one
authenticated endpoint. Needs the `hub` extra (`pip install 'mcpkit[hub]'`; in a source
checkout `pip install -e '.[hub]'`); importing this package alone loads nothing of it.

    settings.py    HubSettings: the operator's knobs, from options and MCPKIT_HUB_* variables
    crypto.py      SecretBox (Fernet credentials at rest, key rotation), API token secrets and
                   hashes, the generated key file
    db/            the database: models.py (schema), engine.py (SQLite/PostgreSQL engines,
                   default URL), migrate.py + migrations/ (alembic, run from Python)
    store/         the registry: users, tokens, upstreams (owner-scoped), catalogs, audit log;
                   typed records in and out, StoreError subclasses for every failure
    upstream_client.py  the one client the hub presents to its upstreams (every connection)
    upstream_auth.py    an "oauth" upstream's owner login as that client's auth (refreshed
                        under a Redis lock across replicas); UpstreamNeedsLogin
    upstream_login.py   starting, finishing (the callback) and ending those logins
    upstream_token_exchange.py  a "token_exchange" upstream: the owner's identity at the
                        hub's OpenID Connect provider exchanged there (RFC 8693) for an
                        upstream token, kept in memory only (exchanged_tokens.py: the
                        cache, per owner and upstream, bounded in bytes)
    catalog.py     fetch an upstream's catalog with that client (SSRF-guarded), store it with
                   the upstream's health
    catalog_limits.py  how much of a catalog the hub takes (count, bytes, nesting)
    refresh_slots.py   catalog refreshes in flight, shared fairly between users
    keyed_locks.py     one lock per key, kept only while held or waited for
    health.py      the health checker: refreshes the due upstreams' catalogs periodically
    needs_auth.py  an upstream that wants a login or credentials: "needs_auth", not
                   "unhealthy" (what refused the hub, and the action that fixes it)
    api/           the REST API (FastAPI): create_app(settings) - routes, auth, error shape,
                   request limits; the seams where /mcp, Redis and metrics plug in
    console/       the web console at `/`: server-rendered pages a user signs in to through
                   the hub's authorization server, acting only through the REST API
    router/        /mcp: every enabled upstream of the caller as one MCP server (HubRouter;
                   gate, handlers, forwarding, relay, events, sealed sessions, audit)
    oauth/         the hub as an OAuth authorization server for /mcp and /api/v1 (Authlib grants,
                   sign-in pages, OpenID Connect sign-in, DPoP, client metadata documents,
                   signing keys)
    ratelimit.py   per-user token buckets, in memory or shared in Redis
    shared.py      the Redis connection replicas share (--redis-url)
    metrics.py     Prometheus metrics, served at GET /metrics
    cli.py         mcpkit hub user … / token … (admin commands); `add_parser` hooks `hub` into
                   the mcpkit command, `HUB_COMMANDS` lists its subcommands
    cli_common.py  what every hub command shares: the storage options, the one-line failure,
                   the missing-extra hint (the command modules import it, not each other)
    serve.py       mcpkit hub serve: the app under uvicorn, graceful shutdown
    startup.py     the start-up summary hub serve prints (URL, database, data dir, counts)
    upstream_cli.py  mcpkit hub upstream …: the REST API's upstream routes from the shell
    rest_client.py   HubRestClient: the REST API over urllib, for upstream_cli.py
"""
