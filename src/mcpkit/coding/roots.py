"""The client's `roots` may narrow or widen the workspace (an operator's choice).

`mcpkit serve --client-roots POLICY`:

- `ignore` (default): the workspace is what the operator configured. Roots are deprecated in
  2026-07-28 and a client's roots often name paths on *its* machine, not the sandbox's.
- `narrow`: the client's roots that overlap the workspace restrict it — a root inside the
  workspace becomes the area the tools may touch (the first one is where relative paths
  start); a root that holds the whole workspace leaves it as it is. Roots that do not overlap
  are ignored; when the client names roots and none overlaps, every tool call is refused.
- `widen`: every root that is an existing directory is added to the workspace.

A client that does not declare the `roots` capability, or lists no roots, keeps the
configured workspace. Legacy sessions ask once (`roots/list`) and cache the answer per
connection until `notifications/roots/list_changed`; modern requests carry no session, so
each tool call asks with an `input_required` round (which is why the default is `ignore`).

Every tool handler is wrapped (`apply`) so the workspace of the call is in the context
variable `_current` while it runs; `CodingEnv.workspace` reads it.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import os
import weakref
from collections.abc import Callable, Iterable
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio

from mcpkit.coding.workspace import Workspace, WorkspaceError
from mcpkit.protocol.errors import McpError
from mcpkit.server.connection import Connection
from mcpkit.server.context import Context
from mcpkit.server.server import Server

log = logging.getLogger(__name__)

ROOTS_KEY = "mcpkit.roots"
"""The input-request key of the roots question in modern rounds."""
ASK_TIMEOUT_S = 30.0
"""How long a legacy client has to answer `roots/list`."""
MAX_ROOTS = 64
"""Roots beyond this many are ignored (each one is a `realpath` and a containment check)."""
CONTEXT_PARAM = "_mcpkit_roots_ctx"


class RootsPolicy(StrEnum):
    IGNORE = "ignore"
    NARROW = "narrow"
    WIDEN = "widen"


_current: contextvars.ContextVar[tuple[object, Workspace] | None] = contextvars.ContextVar(
    "mcpkit_coding_workspace", default=None)


def current_for(owner: object) -> Workspace | None:
    """The workspace of the tool call being served for `owner` (a `CodingEnv`), if any."""
    value = _current.get()
    if value is None or value[0] is not owner:
        return None
    return value[1]


def paths_of(roots: Iterable[Any]) -> list[Path]:
    """The existing local directories among `file://` root entries (others are skipped)."""
    found: list[Path] = []
    for entry in roots:
        uri = entry.get("uri") if isinstance(entry, dict) else None
        path = path_of_uri(uri) if isinstance(uri, str) else None
        if path is None:
            log.info("ignoring client root %r: not a local file:// URI", uri)
            continue
        real = Path(os.path.realpath(path))
        if not real.is_dir():
            log.info("ignoring client root %s: not a directory here", real)
            continue
        if real not in found:
            found.append(real)
        if len(found) >= MAX_ROOTS:
            break
    return found


def path_of_uri(uri: str) -> str | None:
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return None
    path = unquote(parts.path)
    if not path.startswith("/") or "\x00" in path:
        return None
    return path


def narrowed(base: Workspace, roots: list[Path]) -> Workspace:
    """`base` restricted to the client's roots; WorkspaceError when none overlaps it."""
    inside: list[Path] = []
    for root in roots:
        if any(root == r or r in root.parents for r in base.roots):
            inside.append(root)  # a root within the workspace narrows to that root
        else:
            inside.extend(r for r in base.roots if root in r.parents)  # it holds a root
    kept = list(dict.fromkeys(inside))
    if not kept:
        shown = ", ".join(str(r) for r in roots)
        raise WorkspaceError(f"the client's roots ({shown}) do not overlap the workspace "
                             f"{base.root}; no file is reachable")
    return Workspace(kept[0], tuple(kept[1:]))


def widened(base: Workspace, roots: list[Path]) -> Workspace:
    extra = [r for r in roots if not base.contains(r)]
    return Workspace(base.root, base.extra_roots + tuple(extra))


class ClientRoots:
    """Works out each tool call's workspace from the policy and the client's roots."""

    def __init__(self, base: Workspace, policy: RootsPolicy) -> None:
        self.base = base
        self.policy = policy
        self._by_connection: weakref.WeakKeyDictionary[Connection, Workspace] = (
            weakref.WeakKeyDictionary())

    def forget(self, connection: Connection) -> None:
        """`notifications/roots/list_changed`: ask again on the next call."""
        self._by_connection.pop(connection, None)

    async def workspace_for(self, ctx: Context) -> Workspace:
        if self.policy is RootsPolicy.IGNORE or not ctx.client_supports("roots"):
            return self.base
        if ctx.modern:
            return self.shaped(await ctx.list_roots(key=ROOTS_KEY))
        cached = self._by_connection.get(ctx.connection)
        if cached is None:
            with anyio.fail_after(ASK_TIMEOUT_S):
                roots = await ctx.list_roots(key=ROOTS_KEY)
            cached = self._by_connection[ctx.connection] = self.shaped(roots)
        return cached

    def shaped(self, roots: list[Any]) -> Workspace:
        paths = paths_of(roots)
        if not paths and not roots:
            return self.base  # no roots named: no guidance
        if self.policy is RootsPolicy.WIDEN:
            return widened(self.base, paths)
        return narrowed(self.base, paths)


def apply(server: Server, owner: object, roots: ClientRoots) -> None:
    """Wrap every registered tool so it runs with the workspace `roots` gives the call."""
    if roots.policy is RootsPolicy.IGNORE:
        return
    server.roots_changed_callbacks.append(roots.forget)
    for tool in server.tools.values():
        own_param = tool.context_param
        tool.fn = _with_workspace(tool.fn, owner, roots, own_param)
        tool.context_param = own_param or CONTEXT_PARAM


def _with_workspace(fn: Callable[..., Any], owner: object, roots: ClientRoots,
                    own_param: str | None) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def run(**kwargs: Any) -> Any:
        ctx = kwargs[own_param] if own_param else kwargs.pop(CONTEXT_PARAM)
        try:
            workspace = await roots.workspace_for(ctx)
        except TimeoutError as exc:
            raise WorkspaceError("the client did not answer roots/list in time") from exc
        except McpError as exc:
            raise WorkspaceError(f"the client's roots/list failed: {exc}") from exc
        token = _current.set((owner, workspace))
        try:
            value = fn(**kwargs)
            if hasattr(value, "__await__"):
                value = await value
            return value
        finally:
            _current.reset(token)

    return run
