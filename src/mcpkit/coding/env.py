"""What every coding tool gets: the workspace, the task scopes and the server's options."""

from __future__ import annotations

from dataclasses import dataclass, field

from mcpkit.coding import roots
from mcpkit.coding.scope import Scopes
from mcpkit.coding.tracking import Tracker, Tracking
from mcpkit.coding.workspace import Workspace

MAX_JOBS_PER_TASK = 64
"""Background jobs running at once in one task; one more is refused."""
MAX_JOB_OUTPUT_BYTES = 1024 * 1024 * 1024
"""Output a command may write to its output file; past it the command is stopped."""


@dataclass
class CodingEnv:
    base_workspace: Workspace
    """The workspace the operator configured (`--workspace`)."""
    scopes: Scopes = field(default_factory=Scopes)
    allow_private_fetch: bool = False
    """`fetch` may reach loopback/private/link-local addresses (tests; trusted networks)."""
    client_roots: roots.RootsPolicy = roots.RootsPolicy.IGNORE
    """Whether the client's `roots` narrow or widen the workspace (see `roots.py`)."""
    pass_env: tuple[str, ...] = ()
    """Names of server environment variables `bash` gets besides the harmless allow-list
    (`--pass-env`); a name ending in `*` passes every variable with that prefix."""
    set_env: dict[str, str] = field(default_factory=dict)
    """Variables `bash` gets with these values (`--env NAME=VALUE`)."""
    process_tracking: Tracking = Tracking.AUTO
    """How the processes of a command are found and stopped (see `tracking.py`)."""
    max_jobs_per_task: int = MAX_JOBS_PER_TASK
    max_output_bytes: int = MAX_JOB_OUTPUT_BYTES
    processes: Tracker = field(init=False)

    def __post_init__(self) -> None:
        self.processes = Tracker(self.process_tracking)

    @property
    def workspace(self) -> Workspace:
        """The workspace of the tool call being served (the client's roots applied)."""
        return roots.current_for(self) or self.base_workspace
