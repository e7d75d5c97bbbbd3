"""Property-based tests of the REST API against its own OpenAPI document (schemathesis): for
generated requests - valid and invalid, with an admin's token, a user's token and none - the
live hub (real HTTP, a real SQLite file) never answers 5xx, and every answer is a documented
status whose body matches its schema.

The hub runs with stand-ins for the two things that would reach the outside: DNS (every
name resolves to one public documentation-range address) and the upstream client (a refresh
returns a fixed catalog, or fails with 502, without connecting anywhere). Generated URLs
therefore never cause traffic beyond 127.0.0.1.
"""

from __future__ import annotations

import itertools
import os
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    ignored_auth,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from tests.hub.hub_helpers import ADMIN_USERS, Hub, database_for, running_hub

from mcpkit.hub.api import create_app
from mcpkit.hub.catalog import UpstreamUnavailable
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Catalog, Credentials, UpstreamRecord


@schemathesis.check
def no_server_error_but_a_gateway_one(
    ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case
) -> bool | None:
    """`not_a_server_error`, except the documented 502 of a refresh whose upstream failed
    (that 5xx is the API's answer, not a fault of the hub)."""
    if response.status_code == 502 and case.operation.path.endswith(("/refresh", "/tools")):
        assert response.json()["error"]["code"] == "upstream_unavailable", response.text
        return True
    return not_a_server_error(ctx, response, case)


CHECKS = [
    no_server_error_but_a_gateway_one,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    ignored_auth,
]
MAX_EXAMPLES = int(os.environ.get("MCPKIT_PROPERTY_EXAMPLES", "12"))
DATABASE = os.environ.get("MCPKIT_PROPERTY_DATABASE", "sqlite")
"""Longer or PostgreSQL runs: MCPKIT_PROPERTY_EXAMPLES=200 MCPKIT_PROPERTY_DATABASE=postgres."""
pytestmark = pytest.mark.serial  # its generated cases are not collected in an xdist worker

SEEN: defaultdict[tuple[str, str], set[int]] = defaultdict(set)
"""(path, method) → the statuses the hub answered, over all runs."""
CATALOG = Catalog(tools=(
    {"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}},
    {"name": "odd", "title": 3, "inputSchema": "not an object", "annotations": []},
))


async def public_dns(host: str, port: int) -> list[str]:
    return ["192.0.43.10"]  # a public (IANA) address: accepted, never connected to


REFRESHES = itertools.count()


async def canned_catalog(
    upstream: UpstreamRecord, credentials: Credentials, settings: HubSettings
) -> Catalog:
    """Every other refresh fails (502), the others give CATALOG: both paths get exercised."""
    if next(REFRESHES) % 2:
        raise UpstreamUnavailable(f"{upstream.name}: unreachable (canned)")
    return CATALOG


# The rate limit is far above what a run sends: generated requests come faster than any user's
# budget, and 429s would crowd out the paths these tests are after (test_ratelimit.py checks
# the 429 itself; its documentation is in this document all the same).
LIMITS = {"page_size": 10, "max_page_size": 20, "max_body_bytes": 64 * 1024,
          "rate_limit_per_minute": 1_000_000, "rate_limit_burst": 100_000,
          "auth_failure_burst": 1_000_000}  # wrong tokens per address: test_hub_limits.py
# The document the cases are generated from: the app's own, for the same settings as the live
# hub below (test_the_served_document_is_the_one_tested checks they are the same). Loaded
# eagerly: schemathesis' lazy `from_fixture` does not work with this pytest.
DOCUMENT = create_app(HubSettings(**LIMITS)).openapi()
schema = schemathesis.openapi.from_dict(DOCUMENT)


@pytest.fixture(scope="module")
def hub(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
        ) -> Iterator[Hub]:
    url = database_for(request, DATABASE, tmp_path_factory.mktemp("props"))
    with running_hub(url, resolve=public_dns, fetch=canned_catalog, **LIMITS) as running:
        yield running


@dataclass(frozen=True)
class Tokens:
    admin: str
    admin_token_id: int
    user: str
    user_id: int
    user_token_id: int


@pytest.fixture(scope="module")
def tokens(hub: Hub) -> Tokens:
    """A user's token (made before any generated request can change users), and the ids of
    the admin's and the user's tokens, which their runs must not revoke under themselves."""
    auth = {"Authorization": f"Bearer {hub.admin_token}"}
    with requests.Session() as session:
        user = session.post(f"{hub.url}{ADMIN_USERS}", json={"name": "prop-user"}, headers=auth,
                            timeout=10).json()
        token = session.post(f"{hub.url}{ADMIN_USERS}/{user['id']}/tokens", json={},
                             headers=auth, timeout=10).json()
        mine = session.get(f"{hub.url}{ADMIN_USERS}/1/tokens", headers=auth, timeout=10).json()
    return Tokens(hub.admin_token, mine["items"][0]["id"], token["secret"], user["id"],
                  token["token"]["id"])


def spare(case: schemathesis.Case, token_id: int) -> None:
    """A generated DELETE does not revoke the token the run is using (another id instead;
    the generated id may be a string: `'2'`)."""
    parameters = case.path_parameters or {}
    if case.method == "DELETE" and str(parameters.get("token_id")) == str(token_id):
        parameters["token_id"] = token_id + 10_000


SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


TARGETED = itertools.count()
TARGET_BODY = {"name": "target", "url": "https://target.example/mcp", "bearer_token": "t" * 20}


def aim(case: schemathesis.Case, hub: Hub, token: str, user_id: int | None = None) -> None:
    """Point two of every three cases on an `{upstream_id}` (or `{user_id}`) route at a real
    one of the caller's (made again when a DELETE took it), so success paths are generated
    too, not only 404s for random ids."""
    parameters = case.path_parameters
    if not parameters or next(TARGETED) % 3 == 0:
        return
    if "upstream_id" in parameters:
        auth = {"Authorization": f"Bearer {token}"}
        url = f"{hub.url}/api/v1/users/mcp/upstreams"
        found = requests.get(url + "?limit=1", headers=auth, timeout=10).json().get("items")
        if not found:
            created = requests.post(url, json=TARGET_BODY, headers=auth, timeout=10).json()
            found = [created] if "id" in created else []
        if found:
            parameters["upstream_id"] = found[0]["id"]
    if "user_id" in parameters and user_id is not None:
        parameters["user_id"] = user_id


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as opened:
        yield opened


def test_the_served_document_is_the_one_tested(hub: Hub) -> None:
    served = requests.get(f"{hub.url}/openapi.json", timeout=10).json()
    assert served == DOCUMENT


@schema.parametrize()
@SETTINGS
def test_with_a_users_token(
    case: schemathesis.Case, hub: Hub, tokens: Tokens, session: requests.Session
) -> None:
    aim(case, hub, tokens.user)
    spare(case, tokens.user_token_id)
    response = case.call_and_validate(
        base_url=hub.url, session=session, timeout=30,
        headers={"Authorization": f"Bearer {tokens.user}"}, checks=CHECKS,
    )
    SEEN[(case.operation.path, case.method)].add(response.status_code)
    if case.operation.path.startswith("/api/v1/admin/"):  # never a success for a user
        assert response.status_code >= 400, (case.operation.path, response.text)


@schema.parametrize()
@SETTINGS
def test_without_a_token(case: schemathesis.Case, hub: Hub, session: requests.Session) -> None:
    response = case.call_and_validate(base_url=hub.url, session=session, timeout=30,
                                      checks=CHECKS)
    SEEN[(case.operation.path, case.method)].add(response.status_code)
    if case.operation.path.startswith("/api/"):  # never a success without a token
        assert response.status_code >= 400, (case.operation.path, response.text)


@schema.parametrize()
@SETTINGS
def test_with_an_admin_token(
    case: schemathesis.Case, hub: Hub, tokens: Tokens, session: requests.Session
) -> None:
    """Last: generated admin requests change users and revoke tokens."""
    aim(case, hub, tokens.admin, tokens.user_id)
    spare(case, tokens.admin_token_id)
    response = case.call_and_validate(
        base_url=hub.url, session=session, timeout=30,
        headers={"Authorization": f"Bearer {tokens.admin}"}, checks=CHECKS,
    )
    SEEN[(case.operation.path, case.method)].add(response.status_code)


def test_the_generated_requests_reached_the_routes() -> None:
    """The runs above did more than bounce off auth: successes and refusals of every kind."""
    statuses = set().union(*SEEN.values())
    assert {200, 201, 204, 400, 401, 403, 404, 405, 409, 413, 415, 422} <= statuses, \
        sorted(statuses)
    upstream = "/api/v1/users/mcp/upstreams/{upstream_id}"
    for path, method, status in ((upstream, "GET", 200), (upstream, "PATCH", 200),
                                 (upstream, "DELETE", 204)):
        assert status in SEEN[(path, method)], (path, method, SEEN[(path, method)])
    refreshes = SEEN[(upstream + "/refresh", "POST")] | SEEN[(upstream + "/tools", "GET")]
    assert {200, 502} <= refreshes, refreshes
    assert any(200 <= status < 300 for status in SEEN[("/api/v1/users/mcp/upstreams",
                                                       "POST")])
