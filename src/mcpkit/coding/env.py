"""What every coding tool gets: the workspace, the task scopes and the server's options."""

from __future__ import annotations

from dataclasses import dataclass, field

from mcpkit.coding import roots
from mcpkit.coding.scope import Scopes
from mcpkit.coding.workspace import Workspace


@dataclass
class CodingEnv:
    base_workspace: Workspace
    """The workspace the operator configured (`--workspace`)."""
    scopes: Scopes = field(default_factory=Scopes)
    allow_private_fetch: bool = False
    """`fetch` may reach loopback/private/link-local addresses (tests; trusted networks)."""
    client_roots: roots.RootsPolicy = roots.RootsPolicy.IGNORE
    """Whether the client's `roots` narrow or widen the workspace (see `roots.py`)."""

    @property
    def workspace(self) -> Workspace:
        """The workspace of the tool call being served (the client's roots applied)."""
        return roots.current_for(self) or self.base_workspace
