"""What the store raises. Nothing from SQLAlchemy or a database driver gets past the store:
its errors become one of these (the original stays in `__cause__` for logs).

    StoreError          base class
    NotFound            no such row for this caller (another user's rows are "not found" too)
    Conflict            a unique name is taken, or an optimistic `version` check failed
    Invalid             bad input: `field` names it, `reason` says what is wrong
    StoreUnavailable    the database cannot be reached, or stayed locked past the wait
"""

from __future__ import annotations

from mcpkit.errors import TransportError, UsageError


class StoreError(UsageError):
    """Base class of the store's errors: the request cannot be done as asked (a
    `UsageError`); `StoreUnavailable` is also a `TransportError`."""


class NotFound(StoreError):
    def __init__(self, kind: str, key: object) -> None:
        super().__init__(f"{kind} {key!r} not found")
        self.kind = kind
        self.key = key


class Conflict(StoreError):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class Invalid(StoreError):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class StoreUnavailable(StoreError, TransportError):
    pass
