"""Prometheus metrics of one hub app, served as text at `GET /metrics`.

    metrics = HubMetrics()                       # a registry of its own (not the global one:
                                                 # a process - a test run - may hold many apps)
    metrics.observe_mcp("tools/call", "ok", 0.12)          # the /mcp router, per request
    metrics.observe_tool_call("tool_error", 0.12)          # the /mcp router, per tools/call
    app.add_middleware(MetricsMiddleware, metrics=metrics, routes=lambda: app.router.routes)
    app.include_router(metrics_router(metrics))

Every name starts with `mcpkit_hub_`:

    http_requests_total{method,route,status}      every HTTP request (the middleware)
    http_request_duration_seconds{method,route}   until the response is sent (a /mcp stream:
                                                  until it closes)
    mcp_requests_total{method,outcome}            + mcp_request_duration_seconds{method}
    mcp_tool_calls_total{outcome}                 + mcp_tool_call_duration_seconds
    upstreams{health}                             enabled upstreams by health (health checker)
    upstream_checks_total{outcome}                ok | needs_auth | unavailable | error
    rate_limited_total                            requests refused by the rate limiter

Label values are bounded, because each one is a time series kept forever: `route` is the
route's template (`/api/v1/users/mcp/upstreams/{upstream_id}`, `/mcp`), never the raw path,
and `unmatched` for requests no route served (an unknown path; a 413/415 refused before
routing); an HTTP method outside the standard ones, an MCP
method the protocol does not define and an unknown outcome are all counted as `other`. No
user id or upstream id is ever a label.

`/metrics` needs no token, like /healthz: it is for the operator's scraper. It tells counts,
not secrets, but still should not be exposed publicly: the hub binds 127.0.0.1 by default,
and a proxy in front should not route /metrics.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, get_args

from fastapi import APIRouter, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcpkit.hub.store.records import HealthStatus
from mcpkit.protocol.types.methods import CLIENT_NOTIFICATIONS, CLIENT_REQUESTS

log = logging.getLogger(__name__)

NAMESPACE = "mcpkit_hub"
OTHER = "other"
UNMATCHED = "unmatched"
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
MCP_METHODS = frozenset(CLIENT_REQUESTS) | frozenset(CLIENT_NOTIFICATIONS)
MCP_OUTCOMES = ("ok", "error", "tool_error", "cancelled")
CHECK_OUTCOMES = ("ok", "needs_auth", "unavailable", "error")
HEALTH_STATUSES: tuple[HealthStatus, ...] = get_args(HealthStatus)
CALL_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""Seconds: MCP requests and tool calls last from milliseconds to the upstream's call timeout."""

RouteSource = Callable[[], Sequence[BaseRoute]]


class HubMetrics:
    """The hub's counters, histograms and gauges, in `registry` (a new one by default)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r, ns = self.registry, NAMESPACE
        self.http_requests = Counter(
            "http_requests", "HTTP requests by method, route template and status.",
            ["method", "route", "status"], namespace=ns, registry=r)
        self.http_duration = Histogram(
            "http_request_duration_seconds", "Time to answer an HTTP request.",
            ["method", "route"], namespace=ns, registry=r)
        self.mcp_requests = Counter(
            "mcp_requests", "MCP requests on /mcp by method and outcome.",
            ["method", "outcome"], namespace=ns, registry=r)
        self.mcp_duration = Histogram(
            "mcp_request_duration_seconds", "Time to answer an MCP request on /mcp.",
            ["method"], namespace=ns, registry=r, buckets=CALL_BUCKETS)
        self.tool_calls = Counter(
            "mcp_tool_calls", "Tool calls routed to upstreams, by outcome.", ["outcome"],
            namespace=ns, registry=r)
        self.tool_call_duration = Histogram(
            "mcp_tool_call_duration_seconds", "Time of a tool call routed to an upstream.",
            namespace=ns, registry=r, buckets=CALL_BUCKETS)
        self.upstreams = Gauge(
            "upstreams", "Enabled upstreams by health status (as the health checker last "
            "counted them).", ["health"], namespace=ns, registry=r)
        self.upstream_checks = Counter(
            "upstream_checks", "Upstream health checks by outcome.", ["outcome"],
            namespace=ns, registry=r)
        self.rate_limited = Counter(
            "rate_limited", "Requests refused by the per-user rate limit.",
            namespace=ns, registry=r)
        self._children: dict[tuple[object, tuple[str, ...]], Any] = {}
        for outcome in MCP_OUTCOMES:  # present from the start: rate() needs a first sample
            self.tool_calls.labels(outcome)
        for outcome in CHECK_OUTCOMES:
            self.upstream_checks.labels(outcome)
        for health in HEALTH_STATUSES:
            self.upstreams.labels(health)

    # --- what the router and the health checker call -------------------------------------

    def observe_mcp(self, method: str, outcome: str, seconds: float) -> None:
        """One MCP request on /mcp (outcome: "ok" | "error" | "tool_error" | "cancelled")."""
        method = method if method in MCP_METHODS else OTHER
        self._child(self.mcp_requests, method, _bounded(outcome, MCP_OUTCOMES)).inc()
        self._child(self.mcp_duration, method).observe(max(0.0, seconds))

    def observe_tool_call(self, outcome: str, seconds: float) -> None:
        """One tool call forwarded to an upstream (outcome as for `observe_mcp`)."""
        self._child(self.tool_calls, _bounded(outcome, MCP_OUTCOMES)).inc()
        self.tool_call_duration.observe(max(0.0, seconds))

    def observe_check(self, outcome: str) -> None:
        """One upstream health check: "ok", "needs_auth" (the upstream wants a login or
        credentials), "unavailable" (the upstream failed) or "error" (the hub failed: its
        database, a bug)."""
        self.upstream_checks.labels(_bounded(outcome, CHECK_OUTCOMES)).inc()

    def set_upstream_health(self, counts: Mapping[HealthStatus, int]) -> None:
        """The enabled upstreams per health status (a status not in `counts` is 0)."""
        for health in HEALTH_STATUSES:
            self.upstreams.labels(health).set(counts.get(health, 0))

    def count_rate_limited(self, _key: str) -> None:
        """A refused request (the limiter's `on_limited` hook; the key is not a label)."""
        self.rate_limited.inc()

    def observe_http(self, method: str, route: str, status: int, seconds: float) -> None:
        method = method if method in HTTP_METHODS else OTHER
        self._child(self.http_requests, method, route, str(status)).inc()
        self._child(self.http_duration, method, route).observe(max(0.0, seconds))

    def _child(self, metric: Any, *values: str) -> Any:
        """`metric.labels(*values)`, remembered: `labels` costs microseconds per call (it
        checks and joins the values under a lock). Every label here takes a bounded set of
        values (methods, route templates, statuses, outcomes), so this stays small."""
        key = (metric, values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def render(self) -> tuple[bytes, str]:
        """The text exposition format and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def _bounded(value: str, allowed: Sequence[str]) -> str:
    return value if value in allowed else OTHER


# --- HTTP ------------------------------------------------------------------------------------


class MetricsMiddleware:
    """Counts and times every HTTP request, labelled by its route's template. Outermost (after
    Starlette's error handler), so refusals made before routing (413, 415) count too; a
    request that raises counts as 500, which is what the error handler then answers.

    `routes` gives the app's top-level routes (read when a request ends: routes added after
    the middleware count too)."""

    def __init__(self, app: ASGIApp, metrics: HubMetrics, routes: RouteSource) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        root_path = str(scope.get("root_path", ""))

        def done(status: int, seconds: float) -> None:
            route = route_template(scope, root_path, self.routes())
            self.metrics.observe_http(str(scope["method"]), route, status, seconds)

        await run_measured(self.app, scope, receive, send, done)


async def run_measured(app: ASGIApp, scope: Scope, receive: Receive, send: Send,
                       done: Callable[[int, float], None], *,
                       answer_errors: bool = False) -> None:
    """Run `app` for an HTTP request, then `done(status, seconds)`: the status it answered
    (500 if it raised before starting a response) and how long it took, even if it raised.

    `answer_errors`: an exception is logged and not raised, and answered 500 if no response
    had started - the job of Starlette's error handler, for an app served without one."""
    status = 0

    async def sending(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
        await send(message)

    started = time.perf_counter()
    try:
        await app(scope, receive, sending)
    except Exception:
        if not answer_errors:
            raise
        log.exception("%s %s failed", scope.get("method"), scope.get("path"))
        if not status:
            status = 500
            await send({"type": "http.response.start", "status": 500,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
            await send({"type": "http.response.body", "body": b"Internal Server Error"})
    finally:
        done(status or 500, time.perf_counter() - started)


def route_template(scope: Scope, root_path: str, routes: Sequence[BaseRoute]) -> str:
    """The template of the route that served `scope`, read once the request ran:

    - under a mount, the mount's path (the mount grew `root_path`; a mounted app's own routes
      are relative to it);
    - an API route's template, which FastAPI records in `scope["route"]`;
    - else the first plain top-level route (a Starlette `Route`, such as `/mcp` or `/docs`)
      that matches fully (FastAPI does not record those);
    - else `unmatched`: no route served it - an unknown path, or a refusal before routing
      (413, 415), which the status tells apart."""
    grown = str(scope.get("root_path", ""))
    if grown != root_path and grown.startswith(root_path):
        return grown[len(root_path):]
    path = getattr(scope.get("route"), "path", None)
    if isinstance(path, str) and path:
        return path
    probe = {**scope, "root_path": root_path}
    for route in routes:
        path = getattr(route, "path", None)
        if isinstance(path, str) and path and route.matches(probe)[0] is Match.FULL:
            return path
    return UNMATCHED


def metrics_router(metrics: HubMetrics) -> APIRouter:
    """`GET /metrics`. Left out of the OpenAPI document: it is the operator's text endpoint,
    not part of the JSON API the document describes."""
    api = APIRouter(tags=["operations"])

    @api.get("/metrics", include_in_schema=False, response_class=Response)
    async def prometheus_metrics() -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    return api
