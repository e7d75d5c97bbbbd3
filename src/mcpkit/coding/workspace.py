"""Workspace confinement: every path a tool touches resolves inside the workspace.

Rules (checked in this order, each refusal a `WorkspaceError` with a clear message):
- NUL bytes are refused;
- a `..` component is refused outright (even when it would stay inside);
- relative paths are taken from the workspace root, absolute ones as given;
- the *real* path (symlinks resolved, for the part that exists) must lie inside one of
  the workspace's roots; a symlink that points out is refused.

Resolution checks a path at one moment; writers must not follow a symlink swapped in
later, so they create a temporary file beside the target and rename it over the target
(a rename replaces a symlink, it never writes through it) — see `files.py`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from mcpkit.errors import UsageError


class WorkspaceError(UsageError, ValueError):
    """A path the workspace refuses (the message is meant for the model). A usage error: the
    caller gave the path; also a `ValueError`, which callers of `Workspace` catch."""


@dataclass(frozen=True)
class Workspace:
    root: Path
    extra_roots: tuple[Path, ...] = field(default_factory=tuple)

    @classmethod
    def at(cls, root: str | os.PathLike[str], extra: Iterable[str | os.PathLike[str]] = ()
           ) -> Workspace:
        real = Path(os.path.realpath(root))
        if not real.is_dir():
            raise WorkspaceError(f"workspace {root} is not a directory")
        return cls(real, tuple(Path(os.path.realpath(p)) for p in extra))

    @property
    def roots(self) -> tuple[Path, ...]:
        return (self.root, *self.extra_roots)

    def resolve(self, path: str | None, *, default_root: bool = True) -> Path:
        """The real path for a tool's `path` argument (None/"" is the root)."""
        if path is None or path == "":
            if default_root:
                return self.root
            raise WorkspaceError("a path is required")
        if "\x00" in path:
            raise WorkspaceError("the path contains a NUL byte")
        if ".." in Path(path).parts:
            raise WorkspaceError(f"'..' is not allowed in paths: {path}")
        candidate = Path(path) if os.path.isabs(path) else self.root / path
        real = Path(os.path.realpath(candidate))
        if not self.contains(real):
            if os.path.islink(candidate) or real != Path(os.path.abspath(candidate)):
                raise WorkspaceError(f"{path} resolves outside the workspace (symlink)")
            raise WorkspaceError(f"{path} is outside the workspace {self.root}")
        return real

    def contains(self, real: Path) -> bool:
        return any(real == root or root in real.parents for root in self.roots)

    def display(self, real: Path) -> str:
        """How to show a path to the model: relative to the root when inside it."""
        try:
            rel = real.relative_to(self.root)
        except ValueError:
            return str(real)
        return str(rel) if str(rel) != "." else "."
