"""The one exception tree of mcpkit: every exception mcpkit lets reach a caller derives from
`McpkitError`, and its first branch says whose fault it is.

    McpkitError                  the root: `except mcpkit.McpkitError` catches all of mcpkit
    ├── UsageError               this program used mcpkit wrongly: a bad argument, setting,
    │                            config file or call order. Fix the calling code or config.
    ├── PeerError                the remote peer failed or refused: an error answer, a message
    │                            the protocol does not allow, a server the client cannot work
    │                            with. Nothing local to fix; report it or try another peer.
    ├── TransportError           the connection failed or ended: refused, reset, closed, a
    │   (also ConnectionError)   child process that exited, a message over the size limit.
    └── Timeout                  an operation ran past its deadline.
        (also TimeoutError)

Exceptions used only for control flow inside mcpkit, which never reach a caller, are private
(their names start with an underscore) and need not derive from this tree. Foreign exceptions
(OSError, aiohttp's, SQLAlchemy's, …) are mapped once, where mcpkit meets the library, with
`raise … from exc`, so the original stays in `__cause__`.

This module imports nothing: the protocol layer, which does no IO, builds on it.
"""

from __future__ import annotations

__all__ = ["McpkitError", "PeerError", "Timeout", "TransportError", "UsageError"]


class McpkitError(Exception):
    """The root of every exception mcpkit raises."""


class UsageError(McpkitError):
    """This program used mcpkit wrongly: a bad argument, setting, config or call order."""


class PeerError(McpkitError):
    """The remote peer (server or client on the other end) failed, refused or broke the
    protocol."""


class TransportError(McpkitError, ConnectionError):
    """The connection to the peer failed or ended; the message says what and where."""


class Timeout(McpkitError, TimeoutError):
    """An operation ran past its deadline."""
