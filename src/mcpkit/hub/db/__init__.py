"""The hub's database: models, engines and migrations.

    models.py      the SQLAlchemy models (users, tokens, upstreams, catalogs, audit)
    engine.py      make_engine / session_factory, SQLite and PostgreSQL settings, default URL
    migrate.py     upgrade(engine) / migrate(url): alembic, run from Python
    migrations/    the alembic environment and its revisions
    sqlite_rebuild.py  referring_rows_kept: a revision's SQLite table rebuild without the
                   ON DELETE CASCADE of the referring rows
"""
