"""Redis for the replica tests (PostgreSQL comes from tests/hub/conftest.py)."""

from tests.services_fixtures import redis_server  # noqa: F401
