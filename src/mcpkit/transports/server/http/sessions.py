"""Legacy Streamable HTTP sessions: ids, the standalone GET stream, resumable stream logs,
limits and idle expiry.

A session id is 192 random bits (visible ASCII). Sessions idle longer than `idle_s` (no
request, no open stream) expire and answer 404 from then on.

Limits, so that one client cannot starve the others (each session costs memory for as
long as it lives, and only expiry would free it):

- `max_sessions_per_principal` (default `DEFAULT_MAX_SESSIONS_PER_PRINCIPAL`, well below the
  global `max_sessions`): a principal - the authenticated caller, or the client's address
  when there is none (`owner`) - at its cap gets a new session in place of its *own* least
  recently used idle one; when all of its sessions are busy (a request in flight, an open
  stream) `initialize` is refused (`PrincipalSessionLimit`, 429).
- `max_sessions` in all: when the pool is full, the least recently used idle session of the
  principal holding the most sessions makes room (a newcomer is never locked out by another
  principal's idle sessions); when no session is idle, `SessionPoolFull` (503).

Replicas: with a `SessionCodec`, the id instead *is* the session - its principal and what
`initialize` negotiated, sealed by the codec - so any process holding the codec's key can
rebuild a session it never saw (`restore`). What stays per process: the resumable stream
logs, the standalone stream and server→client requests awaiting answers. A closed sealed
session is remembered as revoked (`SessionCodec.revoke`), here and wherever the codec
shares that list.
"""

from __future__ import annotations

import itertools
import json
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

from mcpkit.protocol import errors
from mcpkit.server.connection import Connection, LegacySession
from mcpkit.transports.server.http.replay import EventLog, ReplayBudget, SessionReplay

MAX_LOGS_PER_SESSION = 256
DEFAULT_MAX_SESSIONS = 1000
DEFAULT_MAX_SESSIONS_PER_PRINCIPAL = 100
"""A tenth of the pool: ten principals at their cap still leave nothing idle to evict only
when all of them are busy."""
DEFAULT_SESSION_IDLE_S = 1800.0
SESSION_RETRY_AFTER_S = 5
STANDALONE_STREAM = "0"


class StandaloneStream:
    """The session's GET stream: messages unrelated to any request (list changes…).

    Messages go to the stream's event log (bounded, see `EventLog`); the attached GET
    follows the log. Messages sent while no GET is attached wait there and are delivered
    when the next GET arrives, from the last one delivered on.
    """

    def __init__(self, replay: SessionReplay | None = None) -> None:
        self.log = replay.new_log(STANDALONE_STREAM) if replay else EventLog(STANDALONE_STREAM)
        self.delivered = -1  # seq of the last event a GET received
        self.attached = False

    async def send(self, message: bytes) -> None:
        self.log.append(message)

    def attach(self) -> bool:
        """Claim the stream for one GET; False if another GET holds it."""
        if self.attached:
            return False
        self.attached = True
        return True

    def detach(self) -> None:
        self.attached = False

    def mark_delivered(self, seq: int) -> None:
        self.delivered = seq

    def acknowledge_delivered(self) -> None:
        """A GET without Last-Event-ID asks for nothing already delivered: drop it."""
        self.log.acknowledge(self.delivered)


class HttpSession:
    def __init__(
        self,
        session_id: str,
        principal: str = "",
        owner: str = "",
        replay: ReplayBudget | None = None,
    ) -> None:
        self.id = session_id
        self.principal = principal  # who opened it: nobody else may use it
        self.owner = owner or principal
        """Whose quota it counts against: the principal, else the client's address."""
        self.replay = (replay or ReplayBudget()).session()
        """The session's stream logs, bounded in bytes (`replay.py`)."""
        self.standalone = StandaloneStream(self.replay)
        self.connection = Connection(
            self.standalone, session_id=session_id, principal=principal, caller=self.owner
        )
        self._stream_ids = itertools.count(1)
        self.last_active = time.monotonic()
        self.open_streams = 0

    def new_log(self) -> EventLog:
        stream_id = str(next(self._stream_ids))
        event_log = self.replay.new_log(stream_id)
        self.replay.keep_at_most(MAX_LOGS_PER_SESSION + 1, spare=self.standalone.log)
        return event_log

    def find_log(self, last_event_id: str) -> tuple[EventLog, int] | None:
        stream_id, _, seq = last_event_id.rpartition(".")
        if stream_id == STANDALONE_STREAM:
            event_log = self.standalone.log
        else:
            found = self.replay.logs.get(stream_id)
            if found is None:
                return None
            event_log = found
        try:
            return event_log, int(seq)
        except ValueError:
            return None

    @staticmethod
    def names_request_stream(last_event_id: str) -> bool:
        """Whether the event id is a request stream's (not the standalone GET stream's)."""
        return last_event_id.rpartition(".")[0] != STANDALONE_STREAM

    def touch(self) -> None:
        self.last_active = time.monotonic()

    def idle_for(self, now: float) -> float:
        return 0.0 if self.open_streams else now - self.last_active

    @property
    def busy(self) -> bool:
        """A request in flight or a stream open: never evicted to make room."""
        return self.open_streams > 0


class SessionLimitReached(errors.McpError):
    """`initialize` refused for want of room; `status` is the HTTP status to answer with."""

    status = 503

    def __init__(self, message: str) -> None:
        super().__init__(errors.INTERNAL_ERROR, message)


class PrincipalSessionLimit(SessionLimitReached):
    status = 429

    def __init__(self, cap: int) -> None:
        super().__init__(
            f"too many sessions: this client already has {cap} sessions, all busy (close one "
            "with DELETE, or try again later)"
        )


class SessionPoolFull(SessionLimitReached):
    def __init__(self, cap: int) -> None:
        super().__init__(f"too many sessions: all {cap} are busy; try again later")


class SessionCodec(Protocol):
    """Seals a session's state into its id and opens it again (see the module docstring)."""

    def seal(self, state: dict[str, Any]) -> str: ...

    def open(self, session_id: str) -> dict[str, Any] | None:
        """The state sealed in `session_id`; None if it is not one (altered, expired, or
        revoked)."""

    def revoke(self, session_id: str) -> None: ...


MAX_SEALED_PART = 1024
"""Bytes of JSON of the client's capabilities or info a sealed id carries whole; past it only
the names are kept (an id is a header: it must stay small)."""


def session_state(principal: str, legacy: LegacySession) -> dict[str, Any]:
    """What a sealed id carries: enough to rebuild the negotiated session elsewhere."""
    caps, info = legacy.client_capabilities, legacy.client_info
    if len(json.dumps(caps)) > MAX_SEALED_PART:
        caps = {name: {} for name in list(caps)[:32]}
    if len(json.dumps(info)) > MAX_SEALED_PART:
        info = {"name": str(info.get("name", ""))[:100],
                "version": str(info.get("version", ""))[:50]}
    return {
        "p": principal,
        "v": legacy.protocol_version,
        "c": caps,
        "i": info,
        "n": secrets.token_urlsafe(9),  # two sessions of one client never share an id
    }


def restored_legacy(state: dict[str, Any]) -> LegacySession | None:
    version, caps, info = state.get("v"), state.get("c"), state.get("i")
    if not isinstance(version, str) or not isinstance(caps, dict) or not isinstance(info, dict):
        return None
    return LegacySession(version, caps, info, initialized=True)


class SessionManager:
    def __init__(
        self,
        *,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        max_sessions_per_principal: int = DEFAULT_MAX_SESSIONS_PER_PRINCIPAL,
        idle_s: float = DEFAULT_SESSION_IDLE_S,
        codec: SessionCodec | None = None,
        replay: ReplayBudget | None = None,
    ) -> None:
        if max_sessions < 1 or max_sessions_per_principal < 1:
            raise errors.LocalError(
                errors.INVALID_PARAMS, "session limits must be whole numbers above 0"
            )
        self.max_sessions = max_sessions
        self.max_per_principal = min(max_sessions_per_principal, max_sessions)
        self.replay = replay or ReplayBudget()
        """The byte budget of every session's stream logs."""
        self.idle_s = idle_s
        self.codec = codec
        self.sessions: dict[str, HttpSession] = {}
        self.by_owner: dict[str, OrderedDict[str, HttpSession]] = {}
        """Each owner's sessions, least recently used first (`get` moves one to the end)."""
        self.on_restore: Callable[[HttpSession], None] | None = None
        """Called with each session rebuilt from a sealed id (the app registers it for
        notifications)."""

    def create(
        self, principal: str = "", legacy: LegacySession | None = None, *, owner: str = ""
    ) -> HttpSession:
        """A new session for `principal`, counted against `owner` (default: the principal;
        the app passes the client's address when there is no principal). With a codec,
        `legacy` (what `initialize` will negotiate) is sealed into its id.
        `SessionLimitReached` when there is no room (see the module docstring)."""
        owner = owner or principal
        self.make_room(owner)
        if self.codec is not None and legacy is not None:
            session_id = self.codec.seal(session_state(principal, legacy))
        else:
            session_id = secrets.token_urlsafe(24)
        return self._add(HttpSession(session_id, principal, owner, self.replay))

    def get(self, session_id: str, principal: str = "", owner: str = "") -> HttpSession | None:
        """The live session `session_id` opened by `principal` (another principal's session
        is None, exactly like a missing one); with a codec, rebuilt from a sealed id."""
        session = self.sessions.get(session_id)
        if session is None:
            session = self.restore(session_id, principal, owner)
        if session is None or session.principal != principal:
            return None
        if session.idle_for(time.monotonic()) > self.idle_s:
            self.forget(session_id)
            return None
        session.touch()
        self.by_owner[session.owner].move_to_end(session_id)
        return session

    def restore(self, session_id: str, principal: str, owner: str = "") -> HttpSession | None:
        """Rebuild a session sealed by another process (or before this one restarted); None
        when there is no room for it here either."""
        if self.codec is None or not session_id:
            return None
        state = self.codec.open(session_id)
        if state is None or state.get("p") != principal:
            return None
        legacy = restored_legacy(state)
        if legacy is None:
            return None
        owner = owner or principal
        try:
            self.make_room(owner)
        except SessionLimitReached:
            return None
        session = self._add(HttpSession(session_id, principal, owner, self.replay))
        session.connection.legacy = legacy
        if self.on_restore is not None:
            self.on_restore(session)
        return session

    def make_room(self, owner: str) -> None:
        """Room for one more session of `owner`: evict its own least recently used idle
        session at its cap; at the global cap, the biggest holder's. Else
        `SessionLimitReached`."""
        self.sweep()
        own = self.by_owner.get(owner)
        if own is not None and len(own) >= self.max_per_principal:
            if not self._evict_idle(own):
                raise PrincipalSessionLimit(self.max_per_principal)
        if len(self.sessions) >= self.max_sessions:
            holders = sorted(self.by_owner.values(), key=len, reverse=True)
            if not any(self._evict_idle(held) for held in holders):
                raise SessionPoolFull(self.max_sessions)

    def _evict_idle(self, held: OrderedDict[str, HttpSession]) -> bool:
        """Forget the least recently used idle session of `held`; False if all are busy."""
        for session_id, session in held.items():
            if not session.busy:
                self.forget(session_id)
                return True
        return False

    def _add(self, session: HttpSession) -> HttpSession:
        self.sessions[session.id] = session
        self.by_owner.setdefault(session.owner, OrderedDict())[session.id] = session
        return session

    def count(self, owner: str) -> int:
        """How many sessions `owner` holds here."""
        return len(self.by_owner.get(owner, ()))

    def close(self, session_id: str) -> bool:
        """End the session for good (DELETE, a failed initialize)."""
        if self.codec is not None and session_id in self.sessions:
            self.codec.revoke(session_id)
        return self.forget(session_id)

    def forget(self, session_id: str) -> bool:
        """Drop this process's copy (idle, evicted, shutdown); a sealed id can come back."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            return False
        held = self.by_owner.get(session.owner)
        if held is not None:
            held.pop(session_id, None)
            if not held:
                del self.by_owner[session.owner]
        session.connection.close()
        session.standalone.log.finish()
        session.replay.close()
        return True

    def sweep(self) -> None:
        now = time.monotonic()
        for session_id, session in list(self.sessions.items()):
            if session.idle_for(now) > self.idle_s:
                self.forget(session_id)

    def close_all(self) -> None:
        """Shutdown: drop every session here (sealed ones live on at the other replicas)."""
        for session_id in list(self.sessions):
            self.forget(session_id)
