"""Prometheus metrics over real HTTP: `/metrics` serves the text format (parsed back with
prometheus_client's parser), the counters move with the requests made, labels are route
templates and bounded values (never a raw path, an id or an arbitrary method), a mounted app
(what /mcp will be) is measured under its mount path, and each app has a registry of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.hub.hub_helpers import UPSTREAMS, Api, Hub, call, fresh_user, running_hub, serve_app

from mcpkit.hub.api import create_app
from mcpkit.hub.crypto import SecretBox, generate_key
from mcpkit.hub.metrics import HubMetrics
from mcpkit.hub.settings import HubSettings

pytestmark = pytest.mark.anyio

MISSING_ID = "00000000-0000-4000-8000-000000000000"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    path = tmp_path_factory.mktemp("metrics") / "hub.db"
    with running_hub(f"sqlite+aiosqlite:///{path}", max_body_bytes=1024) as running:
        yield running


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def scrape(base_url: str) -> Samples:
    reply = await call("GET", base_url + "/metrics")
    assert reply.status == 200, reply.text
    assert reply.headers["Content-Type"].startswith("text/plain; version=")
    return parse(reply.text)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def requests(samples: Samples, method: str, route: str, status: int) -> float:
    return value(samples, "mcpkit_hub_http_requests_total", method=method, route=route,
                 status=str(status))


async def test_http_requests_are_counted_by_route_template(hub: Hub) -> None:
    _user_id, user = await fresh_user(hub)
    item = UPSTREAMS + "/{upstream_id}"
    before = await scrape(hub.url)
    for _ in range(3):
        assert (await call("GET", hub.url + "/healthz")).status == 200
    assert (await user.get(f"{UPSTREAMS}/{MISSING_ID}")).status == 404
    assert (await user.get(f"{UPSTREAMS}/not-an-id")).status == 404
    assert (await Api(hub, None).get("/api/v1/users/me")).status == 401
    assert (await call("GET", hub.url + "/no/such/path")).status == 404
    assert (await call("PUT", hub.url + "/healthz")).status == 405
    assert (await user.post(UPSTREAMS, {"name": "x" * 2000})).status == 413  # before routing
    after = await scrape(hub.url)

    def moved(method: str, route: str, status: int) -> float:
        return requests(after, method, route, status) - requests(before, method, route, status)

    assert moved("GET", "/healthz", 200) == 3
    assert moved("GET", item, 404) == 2
    assert moved("GET", "/api/v1/users/me", 401) == 1
    assert moved("GET", "unmatched", 404) == 1
    assert moved("PUT", "/healthz", 405) == 1
    assert moved("POST", "unmatched", 413) == 1  # refused before routing
    assert moved("GET", "/metrics", 200) == 1  # the scrape before this one
    labels = {dict(key[1]).get("route") for key in after}
    assert MISSING_ID not in str(labels) and "not-an-id" not in str(labels)
    assert "/no/such/path" not in labels
    durations = value(after, "mcpkit_hub_http_request_duration_seconds_count",
                      method="GET", route="/healthz")
    assert durations >= 3


async def test_an_unknown_method_is_counted_as_other(hub: Hub) -> None:
    before = await scrape(hub.url)
    reply = await call("BREW", hub.url + "/healthz")
    assert reply.status == 405
    after = await scrape(hub.url)
    assert requests(after, "other", "/healthz", 405) - requests(before, "other", "/healthz",
                                                                 405) == 1
    assert not any(dict(key[1]).get("method") == "BREW" for key in after)


async def test_the_operations_series_exist_from_the_start(hub: Hub) -> None:
    samples = await scrape(hub.url)
    for outcome in ("ok", "error", "tool_error", "cancelled"):
        assert ("mcpkit_hub_mcp_tool_calls_total", frozenset({("outcome", outcome)})) in samples
    for outcome in ("ok", "unavailable", "error"):
        assert ("mcpkit_hub_upstream_checks_total",
                frozenset({("outcome", outcome)})) in samples
    for health in ("unknown", "healthy", "unhealthy"):
        assert ("mcpkit_hub_upstreams", frozenset({("health", health)})) in samples
    assert ("mcpkit_hub_rate_limited_total", frozenset()) in samples


async def test_metrics_is_not_in_the_api_document(hub: Hub) -> None:
    document = (await call("GET", hub.url + "/openapi.json")).body
    assert "/metrics" not in document["paths"]
    assert (await call("POST", hub.url + "/metrics")).status == 405


async def test_a_mounted_app_is_measured_under_its_mount_path(tmp_path: Path) -> None:
    """The /mcp router is given as a mount: its requests count under `/mcp`."""

    class Mcp:  # an ASGI app object, as the router's is
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})

    settings = HubSettings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}")
    app = create_app(settings, box=SecretBox([generate_key()]), mounts={"/mcp": Mcp()})
    with serve_app(app) as base:
        for _ in range(2):
            assert (await call("POST", base + "/mcp?session=abc123", json={})).status == 202
        samples = await scrape(base)
    assert requests(samples, "POST", "/mcp", 202) == 2
    assert not any("abc123" in str(key) for key in samples)


async def test_a_mounted_app_that_raises_is_answered_500_and_counted(tmp_path: Path) -> None:
    """Mounts are served ahead of FastAPI's stack (fastlane.py): its error handler's job -
    a 500 instead of a dropped connection - is done there too, and the request counts."""

    class Broken:
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            assert scope["app"].state.hub is not None  # the context is reachable, as before
            raise RuntimeError("a bug in the mounted app")

    settings = HubSettings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}")
    app = create_app(settings, box=SecretBox([generate_key()]), mounts={"/mcp": Broken()})
    with serve_app(app) as base:
        response = await call("POST", base + "/mcp", json={})
        assert response.status == 500
        assert (await call("GET", base + "/healthz")).status == 200  # the rest is FastAPI's
        samples = await scrape(base)
    assert requests(samples, "POST", "/mcp", 500) == 1


# --- HubMetrics without HTTP -----------------------------------------------------------------


def test_router_observations_have_bounded_labels() -> None:
    metrics = HubMetrics()
    metrics.observe_mcp("tools/call", "ok", 0.2)
    metrics.observe_mcp("tools/call", "tool_error", 0.3)
    metrics.observe_mcp("x/made-up-by-a-client", "ok", 0.1)
    metrics.observe_mcp("tools/list", "weird", 0.1)
    metrics.observe_tool_call("ok", 1.5)
    metrics.observe_tool_call("cancelled", 0.5)
    metrics.observe_check("unavailable")
    metrics.set_upstream_health({"healthy": 3, "unhealthy": 1})
    metrics.count_rate_limited("user:1")
    body, content_type = metrics.render()
    assert content_type.startswith("text/plain")
    samples = parse(body.decode())
    mcp = "mcpkit_hub_mcp_requests_total"
    assert value(samples, mcp, method="tools/call", outcome="ok") == 1
    assert value(samples, mcp, method="tools/call", outcome="tool_error") == 1
    assert value(samples, mcp, method="other", outcome="ok") == 1
    assert value(samples, mcp, method="tools/list", outcome="other") == 1
    assert value(samples, "mcpkit_hub_mcp_request_duration_seconds_count",
                 method="tools/call") == 2
    assert value(samples, "mcpkit_hub_mcp_tool_calls_total", outcome="ok") == 1
    assert value(samples, "mcpkit_hub_mcp_tool_calls_total", outcome="cancelled") == 1
    assert value(samples, "mcpkit_hub_mcp_tool_call_duration_seconds_count") == 2
    assert value(samples, "mcpkit_hub_mcp_tool_call_duration_seconds_sum") == 2.0
    assert value(samples, "mcpkit_hub_upstream_checks_total", outcome="unavailable") == 1
    assert value(samples, "mcpkit_hub_upstreams", health="healthy") == 3
    assert value(samples, "mcpkit_hub_upstreams", health="unknown") == 0
    assert value(samples, "mcpkit_hub_rate_limited_total") == 1
    assert "user:1" not in body.decode()


def test_each_app_has_its_own_registry() -> None:
    one, two = HubMetrics(), HubMetrics()
    one.observe_tool_call("ok", 0.1)
    assert value(parse(two.render()[0].decode()), "mcpkit_hub_mcp_tool_calls_total",
                 outcome="ok") == 0
    settings = HubSettings()
    create_app(settings)
    create_app(settings)  # a second app in one process: no "Duplicated timeseries"
