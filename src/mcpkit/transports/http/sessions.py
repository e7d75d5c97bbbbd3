"""Legacy Streamable HTTP sessions: ids, the standalone GET stream, resumable stream logs,
limits and idle expiry.

A session id is 192 random bits (visible ASCII). Sessions idle longer than `idle_s` (no
request, no open stream) expire and answer 404 from then on; at most `max_sessions` exist
at once (the oldest idle ones are swept first).

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
from collections.abc import Callable
from typing import Any, Protocol

from mcpkit.server.connection import Connection, LegacySession
from mcpkit.transports.http.replay import EventLog, ReplayBudget, SessionReplay

MAX_LOGS_PER_SESSION = 256
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
        self, session_id: str, principal: str = "", replay: ReplayBudget | None = None
    ) -> None:
        self.id = session_id
        self.principal = principal  # who opened it: nobody else may use it
        self.replay = (replay or ReplayBudget()).session()
        """The session's stream logs, bounded in bytes (`replay.py`)."""
        self.standalone = StandaloneStream(self.replay)
        self.connection = Connection(
            self.standalone, session_id=session_id, principal=principal
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


class SessionLimitReached(Exception):
    pass


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
        max_sessions: int = 1000,
        idle_s: float = 1800.0,
        codec: SessionCodec | None = None,
        replay: ReplayBudget | None = None,
    ) -> None:
        self.max_sessions = max_sessions
        self.replay = replay or ReplayBudget()
        """The byte budget of every session's stream logs."""
        self.idle_s = idle_s
        self.codec = codec
        self.sessions: dict[str, HttpSession] = {}
        self.on_restore: Callable[[HttpSession], None] | None = None
        """Called with each session rebuilt from a sealed id (the app registers it for
        notifications)."""

    def create(self, principal: str = "", legacy: LegacySession | None = None) -> HttpSession:
        """A new session. With a codec, `legacy` (what `initialize` will negotiate) is
        sealed into its id."""
        self.sweep()
        if len(self.sessions) >= self.max_sessions:
            raise SessionLimitReached
        if self.codec is not None and legacy is not None:
            session_id = self.codec.seal(session_state(principal, legacy))
        else:
            session_id = secrets.token_urlsafe(24)
        session = HttpSession(session_id, principal, self.replay)
        self.sessions[session.id] = session
        return session

    def get(self, session_id: str, principal: str = "") -> HttpSession | None:
        """The live session `session_id` opened by `principal` (another principal's session
        is None, exactly like a missing one); with a codec, rebuilt from a sealed id."""
        session = self.sessions.get(session_id)
        if session is None:
            session = self.restore(session_id, principal)
        if session is None or session.principal != principal:
            return None
        if session.idle_for(time.monotonic()) > self.idle_s:
            self.forget(session_id)
            return None
        session.touch()
        return session

    def restore(self, session_id: str, principal: str) -> HttpSession | None:
        """Rebuild a session sealed by another process (or before this one restarted)."""
        if self.codec is None or not session_id:
            return None
        state = self.codec.open(session_id)
        if state is None or state.get("p") != principal:
            return None
        legacy = restored_legacy(state)
        if legacy is None:
            return None
        self.sweep()
        if len(self.sessions) >= self.max_sessions:
            return None
        session = HttpSession(session_id, principal, self.replay)
        session.connection.legacy = legacy
        self.sessions[session_id] = session
        if self.on_restore is not None:
            self.on_restore(session)
        return session

    def close(self, session_id: str) -> bool:
        """End the session for good (DELETE, a failed initialize)."""
        if self.codec is not None and session_id in self.sessions:
            self.codec.revoke(session_id)
        return self.forget(session_id)

    def forget(self, session_id: str) -> bool:
        """Drop this process's copy (idle, shutdown); a sealed id can come back."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            return False
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
