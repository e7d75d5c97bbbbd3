"""What every coding tool gets: the workspace, the task scopes and the server's options."""

from __future__ import annotations

from dataclasses import dataclass, field

from mcpkit.coding.scope import Scopes
from mcpkit.coding.workspace import Workspace


@dataclass
class CodingEnv:
    workspace: Workspace
    scopes: Scopes = field(default_factory=Scopes)
    allow_private_fetch: bool = False
    """`fetch` may reach loopback/private/link-local addresses (tests; trusted networks)."""
