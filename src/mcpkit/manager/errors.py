"""What `ServerManager` raises. A tool that fails is a result with `is_error`, not one of these;
these say the call could not be made (or its outcome is unknown)."""

from __future__ import annotations

from mcpkit.errors import PeerError, UsageError


class ManagerError(UsageError):
    """Base class: a problem of the manager or of one of its servers. A `UsageError` (a call
    the manager cannot make as asked); the servers' failures are also `PeerError`s."""


class UnknownTool(ManagerError, LookupError):
    """No ready server exposes a tool (or prompt) of that name."""


class ToolNotAllowed(ManagerError):
    """The server's `enabled_tools` / `disabled_tools` exclude the tool."""


class PermissionDenied(ManagerError):
    """The permission hook (or the user it asked) refused the call."""


class ServerUnavailable(ManagerError, PeerError):
    """The server is not running (failed to start, crashed, disabled), or it went away
    during a call that is not safe to repeat."""


class RequiredServerFailed(ManagerError, PeerError):
    """A server marked `required` did not start; the manager does not run without it."""
