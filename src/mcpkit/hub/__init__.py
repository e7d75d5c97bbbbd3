"""`mcpkit hub`: users register their MCP servers ("upstreams") and reach them all through one
authenticated endpoint. Needs the `hub` extra (`pip install 'mcpkit[hub]'`; in a source
checkout `pip install -e '.[hub]'`); importing this package alone loads nothing of it.

    crypto.py      SecretBox (Fernet credentials at rest, key rotation), API token secrets and
                   hashes, the generated key file
    db/            the database: models.py (schema), engine.py (SQLite/PostgreSQL engines,
                   default URL), migrate.py + migrations/ (alembic, run from Python)
    store/         the registry: users, tokens, upstreams (owner-scoped), catalogs, audit log;
                   typed records in and out, StoreError subclasses for every failure
    cli.py         mcpkit hub user … / token … (admin commands); `add_parser` hooks `hub` into
                   the mcpkit command, `HUB_COMMANDS` lists its subcommands
    settings.py    HubSettings: the operator's knobs, from options and MCPKIT_HUB_* variables
    catalog.py     fetch an upstream's catalog with mcpkit.Client (SSRF-guarded), store it
                   with the upstream's health
    api/           the REST API (FastAPI): create_app(settings) - routes, auth, error shape,
                   request limits; the seams where /mcp, Redis and metrics plug in
    serve.py       mcpkit hub serve: the app under uvicorn, graceful shutdown
    startup.py     the start-up summary hub serve prints (URL, database, data dir, counts)
    upstream_cli.py  mcpkit hub upstream …: the REST API's upstream routes from the shell
"""
