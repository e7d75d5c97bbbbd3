"""The health checker: every `settings.health_interval_s` it refreshes the catalog of each
enabled upstream that is due, which records its health (catalog.refresh_catalog), and tells
the context's `catalog_listeners` about every upstream whose stored catalog changed.

    app = create_app(settings, components=[health_checker])     # what `mcpkit hub serve` does
    checked = await HealthChecker(context).run_pass()            # one pass (tests)

A pass takes the due upstreams (`store.upstreams.due_for_health_check`: never checked, or not
since most of an interval ago) in batches of `BATCH_SIZE`, oldest first, and checks each
batch concurrently - bounded three times: by the context's `refresh_slots`, which the REST
API's refreshes share and which give one user's upstreams only their share, and by a limiter
of half as many slots, so user-initiated refreshes never
queue behind a whole batch. Each check is bounded by the upstream's own timeouts (connect +
call). The passes are jittered (±10 %) so replicas started together drift apart.

Several replicas: with Redis configured, a check first takes the upstream's lock
(`SET mcpkit:hub:health:<id> NX PX`, living most of an interval and never released), so one
replica checks a given upstream per interval and the others skip it. If Redis fails, the
check goes ahead: checking twice is harmless, not checking is not.

An upstream that wants authorization the hub lacks - it answers 401 (an expired or revoked
token, no login yet), or its owner's login is missing or dead - is "needs_auth", with the
login action in `last_error` (`needs_auth.py`); one that cannot be reached or listed is
"unhealthy". The checks use the upstream's catalog credentials when it has any.

Nothing stops the loop but shutdown: a failing upstream is just "unhealthy" (so is one whose
check failed in the hub - a key that cannot open its credentials, a bug - with a generic
`last_error` and the details in the log), and anything else (the database away, a listener
raising) is logged and the loop carries on; the next pass retries. Shutdown cancels the loop
and the checks in flight at once.

After each pass the `upstreams{health}` gauge is set from the store's counts.
"""

from __future__ import annotations

import logging
import random
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import anyio
from redis.exceptions import RedisError

from mcpkit.hub.catalog import UpstreamNeedsAuth, UpstreamUnavailable, refresh_catalog
from mcpkit.hub.db.models import utcnow
from mcpkit.hub.store import Catalog, NotFound, StoreError, UpstreamRecord
from mcpkit.hub.upstream_auth import credentials_for

if TYPE_CHECKING:
    from mcpkit.hub.api.context import HubContext

log = logging.getLogger(__name__)

BATCH_SIZE = 50
JITTER = 0.1
"""Each pause is the interval times a random factor in [1 - JITTER, 1 + JITTER]."""
DUE_SHARE = 0.8
"""An upstream is due once it was last checked more than this share of an interval ago (a
jittered pass comes a little early; a full interval would skip it every other pass)."""
LOCK_SHARE = 0.8
"""A replica's claim on an upstream lives this share of an interval (gone before the next
pass, so the next check may be anyone's)."""
LOCK_PREFIX = "mcpkit:hub:health:"
CHECK_MARGIN_S = 5.0
"""Added to an upstream's connect + call timeouts: the bound of one whole check."""
HUB_FAILURE = "the hub could not check this upstream (an error in the hub; see its log)"
"""`last_error` when the hub, not the upstream, failed (the details stay in the log)."""
GONE = "gone"


class HealthChecker:
    """Checks the due upstreams of `context.store`, pass after pass (see the module)."""

    def __init__(self, context: HubContext, *, batch_size: int = BATCH_SIZE) -> None:
        self.context = context
        self.batch_size = batch_size
        self.replica = secrets.token_hex(8)
        """Written into the locks this checker takes (who holds an upstream, for debugging)."""
        assert context.refresh_slots is not None
        self._own_slots = anyio.CapacityLimiter(
            max(1, context.settings.max_concurrent_refreshes // 2))
        self._lock_warned = False

    @property
    def interval_s(self) -> float:
        return self.context.settings.health_interval_s

    async def run(self) -> None:
        """Pass after pass until cancelled; the first one after a short random delay."""
        await anyio.sleep(random.uniform(0, JITTER) * self.interval_s)
        while True:
            try:
                await self.run_pass()
            except Exception:
                log.exception("a health-check pass failed; the next one tries again")
            await anyio.sleep(random.uniform(1 - JITTER, 1 + JITTER) * self.interval_s)

    async def run_pass(self) -> int:
        """Check every upstream due now (in batches); the number checked by this replica."""
        cutoff = utcnow() - timedelta(seconds=self.interval_s * DUE_SHARE)
        self._lock_warned = False
        seen: set[str] = set()
        checked = 0
        while True:
            batch = await self.context.store.upstreams.due_for_health_check(
                checked_before=cutoff, limit=self.batch_size)
            fresh = [upstream for upstream in batch if upstream.id not in seen]
            # an upstream stays due when another replica holds it or its check failed
            # before recording anything: seen ones are not taken again in this pass
            if not fresh:
                break
            seen.update(upstream.id for upstream in fresh)
            checked += await self._check_batch(fresh)
            if len(batch) < self.batch_size:
                break
        await self._count_health()
        return checked

    async def _check_batch(self, batch: list[UpstreamRecord]) -> int:
        """Check the batch concurrently (bounded by the slots); how many this replica did."""
        done: list[bool] = []

        async def one(upstream: UpstreamRecord) -> None:
            done.append(await self.check_safely(upstream))

        async with anyio.create_task_group() as group:
            for upstream in batch:
                group.start_soon(one, upstream)
        return sum(done)

    async def check_safely(self, upstream: UpstreamRecord) -> bool:
        """`check`, with any error logged and counted instead of raised."""
        try:
            return await self.check(upstream)
        except Exception:
            log.exception("health check of upstream %s (user %s) failed", upstream.id,
                          upstream.user_id)
            self.context.metrics.observe_check("error")
            return False

    async def check(self, upstream: UpstreamRecord) -> bool:
        """Refresh one upstream's catalog (recording its health) unless another replica has it
        this interval; listeners hear of a changed catalog. Whether this replica checked it."""
        if not await self._claim(upstream):
            return False
        store = self.context.store
        try:
            before = await store.catalog.get(upstream.user_id, upstream.id)
        except NotFound:  # deleted since the batch was read
            return False
        outcome = await self._refresh(upstream)
        if outcome == GONE:
            return False
        self.context.metrics.observe_check(outcome)
        if outcome == "ok":
            after = await store.catalog.get(upstream.user_id, upstream.id)
            if _lists(before) != _lists(after):
                await self._notify(upstream)
        return True

    async def _refresh(self, upstream: UpstreamRecord) -> str:
        """Refresh within the slots and the upstream's bounds: "ok" (healthy, catalog stored),
        "needs_auth" (recorded so: a login or credentials are wanted), "unavailable" (the
        upstream failed), "error" (the hub failed), these two recorded as unhealthy - each
        recorded, so a check that keeps failing cannot stay due and crowd the others out of
        every pass - or GONE (deleted meanwhile)."""
        context = self.context
        assert context.refresh_slots is not None
        limit = upstream.connect_timeout_s + upstream.call_timeout_s + CHECK_MARGIN_S
        async with context.refresh_slots.for_user(upstream.user_id), self._own_slots:
            try:
                with anyio.fail_after(limit):
                    await refresh_catalog(context.store, upstream, context.settings,
                                          fetch=context.fetch,
                                          credentials=credentials_for(context, "catalog"))
            except UpstreamNeedsAuth:  # recorded as needs_auth by refresh_catalog
                return "needs_auth"
            except UpstreamUnavailable:  # recorded as unhealthy by refresh_catalog
                return "unavailable"
            except NotFound:
                return GONE
            except TimeoutError:  # a fetch that ignored its own bounds
                await self._record_failure(upstream, f"{upstream.name}: no catalog within "
                                                     f"{limit:g} s")
                return "unavailable"
            except Exception:
                log.exception("health check of upstream %s (user %s) failed in the hub",
                              upstream.id, upstream.user_id)
                await self._record_failure(upstream, HUB_FAILURE)
                return "error"
        return "ok"

    async def _record_failure(self, upstream: UpstreamRecord, reason: str) -> None:
        try:
            await self.context.store.upstreams.set_health(
                upstream.user_id, upstream.id, "unhealthy", error=reason)
        except StoreError as error:  # gone, or the database is away: the next pass retries
            log.warning("could not record the health of upstream %s: %s", upstream.id, error)

    async def _claim(self, upstream: UpstreamRecord) -> bool:
        """Whether this replica may check `upstream` this interval (always, without Redis)."""
        redis = self.context.redis
        if redis is None:
            return True
        lifetime_ms = max(1, int(self.interval_s * LOCK_SHARE * 1000))
        try:
            taken = await redis.set(LOCK_PREFIX + upstream.id, self.replica, nx=True,
                                    px=lifetime_ms)
        except (RedisError, OSError) as error:
            if not self._lock_warned:  # once a pass, not once an upstream
                self._lock_warned = True
                log.warning("health-check locks unavailable (Redis: %s); checking anyway",
                            error)
            return True
        return bool(taken)

    async def _notify(self, upstream: UpstreamRecord) -> None:
        for listener in list(self.context.catalog_listeners):
            try:
                await listener(upstream.user_id, upstream.id)
            except Exception:
                log.exception("a catalog listener failed for upstream %s", upstream.id)

    async def _count_health(self) -> None:
        try:
            counts = await self.context.store.upstreams.health_counts()
        except Exception:
            log.exception("could not count upstreams by health")
            return
        self.context.metrics.set_upstream_health(counts)


@asynccontextmanager
async def health_checker(context: HubContext) -> AsyncIterator[None]:
    """The app component: a `HealthChecker` running while the app runs, cancelled (with the
    checks in flight) on shutdown."""
    checker = HealthChecker(context)
    async with anyio.create_task_group() as group:
        group.start_soon(checker.run, name="mcpkit-hub-health-checker")
        try:
            yield
        finally:
            group.cancel_scope.cancel()


def _lists(catalog: Catalog) -> tuple[Any, ...]:
    """What a listener cares about: the four lists (not `updated_at`, which every refresh
    moves)."""
    return (catalog.tools, catalog.prompts, catalog.resources, catalog.resource_templates)

