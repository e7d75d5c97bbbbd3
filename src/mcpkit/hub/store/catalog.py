"""The stored catalog of each upstream: its tools, prompts, resources and resource templates as
the upstream listed them (whole wire objects, in order), refreshed on health checks and
`list_changed`. Every function takes the owner's user id, as for upstreams.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from mcpkit.hub.db.models import (
    Upstream,
    UpstreamPrompt,
    UpstreamResource,
    UpstreamResourceTemplate,
    UpstreamTool,
)
from mcpkit.hub.store import validation as check
from mcpkit.hub.store._db import Database
from mcpkit.hub.store.errors import NotFound
from mcpkit.hub.store.records import Catalog, UpstreamRecord
from mcpkit.hub.store.upstreams import require_owned, upstream_record

CatalogModel = (
    type[UpstreamTool] | type[UpstreamPrompt] | type[UpstreamResource]
    | type[UpstreamResourceTemplate]
)
# (catalog field, table, the wire object's identifying member, its column)
KINDS: tuple[tuple[str, CatalogModel, str, str], ...] = (
    ("tools", UpstreamTool, "name", "name"),
    ("prompts", UpstreamPrompt, "name", "name"),
    ("resources", UpstreamResource, "uri", "uri"),
    ("resource_templates", UpstreamResourceTemplate, "uriTemplate", "uri_template"),
)

WireList = Sequence[dict[str, Any]]


class Catalogs:
    def __init__(self, db: Database, clock: Callable[[], datetime]) -> None:
        self._db = db
        self._clock = clock

    async def replace(
        self,
        user_id: int,
        upstream_id: str,
        *,
        tools: WireList | None = None,
        prompts: WireList | None = None,
        resources: WireList | None = None,
        resource_templates: WireList | None = None,
    ) -> None:
        """Replace the given lists (None keeps a list as stored) in one transaction: readers see
        the old catalog or the new one, never a mix. Sets `tool_count` and
        `catalog_updated_at`. A repeated name (or URI) keeps its first object."""
        given = {
            "tools": tools,
            "prompts": prompts,
            "resources": resources,
            "resource_templates": resource_templates,
        }
        entries = {
            field: check.catalog_entries(value, field, member)
            for field, _model, member, _column in KINDS
            if (value := given[field]) is not None
        }
        values: dict[str, Any] = {"catalog_updated_at": self._clock()}
        if "tools" in entries:
            values["tool_count"] = len(entries["tools"])
        async with self._db.write() as session:
            # the upstream's row first: ownership check and (on PostgreSQL) its row lock
            found = await session.execute(
                update(Upstream)
                .where(Upstream.user_id == user_id, Upstream.id == upstream_id)
                .values(**values)
                .returning(Upstream.id)
            )
            if found.scalar_one_or_none() is None:
                raise NotFound("upstream", upstream_id)
            for field, model, _member, column in KINDS:
                if field in entries:
                    await _write_list(session, model, column, upstream_id, entries[field])

    async def get(self, user_id: int, upstream_id: str) -> Catalog:
        """The stored catalog of the user's upstream (empty lists before the first refresh)."""
        async with self._db.read() as session:
            row = await require_owned(session, user_id, upstream_id)
            return await _read_catalog(session, row)

    async def all(
        self, user_id: int, *, enabled_only: bool = True
    ) -> tuple[tuple[UpstreamRecord, Catalog], ...]:
        """Every (enabled) upstream of the user with its catalog, by upstream name, read in one
        transaction: what the router aggregates into the user's single server."""
        query = select(Upstream).where(Upstream.user_id == user_id)
        if enabled_only:
            query = query.where(Upstream.enabled.is_(True))
        async with self._db.read() as session:
            rows = (await session.scalars(query.order_by(Upstream.name))).all()
            lists = {
                field: await _read_lists(session, model, [row.id for row in rows])
                for field, model, _member, _column in KINDS
            }
        return tuple(
            (
                upstream_record(row),
                Catalog(
                    updated_at=row.catalog_updated_at,
                    **{field: tuple(lists[field].get(row.id, ())) for field in lists},
                ),
            )
            for row in rows
        )


async def _write_list(
    session: AsyncSession,
    model: CatalogModel,
    column: str,
    upstream_id: str,
    entries: list[tuple[str, dict[str, Any]]],
) -> None:
    await session.execute(delete(model).where(model.upstream_id == upstream_id))
    if entries:
        await session.execute(
            insert(model),
            [
                {"upstream_id": upstream_id, "position": position, column: key, "definition": obj}
                for position, (key, obj) in enumerate(entries)
            ],
        )


async def _read_catalog(session: AsyncSession, row: Upstream) -> Catalog:
    lists = {
        field: (await _read_lists(session, model, [row.id])).get(row.id, [])
        for field, model, _member, _column in KINDS
    }
    return Catalog(
        updated_at=row.catalog_updated_at, **{field: tuple(items) for field, items in lists.items()}
    )


async def _read_lists(
    session: AsyncSession, model: CatalogModel, upstream_ids: list[str]
) -> dict[str, list[dict[str, Any]]]:
    """upstream id → its objects in order. The ids come from rows already scoped to a user."""
    lists: dict[str, list[dict[str, Any]]] = {}
    if not upstream_ids:
        return lists
    result = await session.execute(
        select(model.upstream_id, model.definition)
        .where(model.upstream_id.in_(upstream_ids))
        .order_by(model.upstream_id, model.position)
    )
    for upstream_id, definition in result:
        lists.setdefault(upstream_id, []).append(definition)
    return lists

