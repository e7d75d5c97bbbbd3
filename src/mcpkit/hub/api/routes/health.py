"""`/healthz` (the process answers) and `/readyz` (it can serve: the database answers within
a bounded time). No authentication: load balancers and orchestrators call them. The periodic
upstream health checks are another thing (the health checker stores them on each upstream)."""

from __future__ import annotations

import logging

import anyio
from fastapi import APIRouter

from mcpkit.hub.api.auth import Context
from mcpkit.hub.api.errors import ApiError, responses
from mcpkit.hub.api.schemas import Status
from mcpkit.hub.store import StoreError

log = logging.getLogger(__name__)
READY_TIMEOUT_S = 2.0


def router() -> APIRouter:
    api = APIRouter(tags=["operations"])

    @api.get("/healthz", response_model=Status, summary="The process is alive",
             operation_id="healthz")
    async def healthz() -> Status:
        return Status(status="ok")

    @api.get("/readyz", response_model=Status, summary="The database is reachable",
             operation_id="readyz",
             responses=responses(503))
    async def readyz(context: Context) -> Status:
        try:
            with anyio.fail_after(READY_TIMEOUT_S):
                await context.store.users.list(limit=1)
        except (StoreError, TimeoutError) as error:
            log.warning("not ready: %s", error or type(error).__name__)
            raise ApiError(503, "the database is not reachable", code="not_ready") from None
        return Status(status="ready")

    return api
