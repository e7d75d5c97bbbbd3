"""What the parts of a `Client` (`negotiation`, `sending`) read of it while they work: only
the values that change after the parts are made. Everything fixed once the Client is built
(its target, options, responders, the listen stream's subscriptions, …) is handed to each
part when it is made.

A `typing.Protocol`, so a part depends on this description and not on the `Client` class
(which satisfies it): the parts sit outside the Client, which wires them together.
"""

from __future__ import annotations

from typing import Protocol

from mcpkit.client.session import ClientSession, Timeouts


class LiveState(Protocol):
    """The Client as its parts see it: read again at each use, never copied."""

    @property
    def session(self) -> ClientSession:
        """The open session (replaced when an HTTP+SSE fallback opens another transport);
        ClientMisuse while none is open."""
        ...

    @property
    def default_timeouts(self) -> Timeouts:
        """The time limits of a request that names none (the caller may set new ones)."""
        ...

    @property
    def log_level(self) -> str | None:
        """The server log level asked for (`Client.set_logging_level` changes it)."""
        ...

    def describe(self) -> str:
        """The server, for messages: its transport's description once connected."""
        ...
