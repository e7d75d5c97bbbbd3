"""Legacy Streamable HTTP sessions: ids, the standalone GET stream, resumable stream logs,
limits and idle expiry.

A session id is 192 random bits (visible ASCII). Sessions idle longer than `idle_s` (no
request, no open stream) expire and answer 404 from then on; at most `max_sessions` exist
at once (the oldest idle ones are swept first).
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections import OrderedDict

from mcpkit.server.connection import Connection
from mcpkit.transports.http.streams import EventLog

MAX_LOGS_PER_SESSION = 256
STANDALONE_STREAM = "0"


class StandaloneStream:
    """The session's GET stream: messages unrelated to any request (list changes…).

    Messages go to the stream's event log (bounded, see `EventLog`); the attached GET
    follows the log. Messages sent while no GET is attached wait there and are delivered
    when the next GET arrives, from the last one delivered on.
    """

    def __init__(self) -> None:
        self.log = EventLog(STANDALONE_STREAM)
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


class HttpSession:
    def __init__(self, session_id: str, principal: str = "") -> None:
        self.id = session_id
        self.principal = principal  # who opened it: nobody else may use it
        self.standalone = StandaloneStream()
        self.connection = Connection(
            self.standalone, session_id=session_id, principal=principal
        )
        self.logs: OrderedDict[str, EventLog] = OrderedDict()
        self._stream_ids = itertools.count(1)
        self.last_active = time.monotonic()
        self.open_streams = 0

    def new_log(self) -> EventLog:
        stream_id = str(next(self._stream_ids))
        event_log = EventLog(stream_id)
        self.logs[stream_id] = event_log
        while len(self.logs) > MAX_LOGS_PER_SESSION:
            self.logs.popitem(last=False)
        return event_log

    def find_log(self, last_event_id: str) -> tuple[EventLog, int] | None:
        stream_id, _, seq = last_event_id.rpartition(".")
        if stream_id == STANDALONE_STREAM:
            event_log = self.standalone.log
        else:
            found = self.logs.get(stream_id)
            if found is None:
                return None
            event_log = found
        try:
            return event_log, int(seq)
        except ValueError:
            return None

    def touch(self) -> None:
        self.last_active = time.monotonic()

    def idle_for(self, now: float) -> float:
        return 0.0 if self.open_streams else now - self.last_active


class SessionLimitReached(Exception):
    pass


class SessionManager:
    def __init__(self, *, max_sessions: int = 1000, idle_s: float = 1800.0) -> None:
        self.max_sessions = max_sessions
        self.idle_s = idle_s
        self.sessions: dict[str, HttpSession] = {}

    def create(self, principal: str = "") -> HttpSession:
        self.sweep()
        if len(self.sessions) >= self.max_sessions:
            raise SessionLimitReached
        session = HttpSession(secrets.token_urlsafe(24), principal)
        self.sessions[session.id] = session
        return session

    def get(self, session_id: str, principal: str = "") -> HttpSession | None:
        """The live session `session_id` opened by `principal` (another principal's session
        is None, exactly like a missing one)."""
        session = self.sessions.get(session_id)
        if session is None or session.principal != principal:
            return None
        if session.idle_for(time.monotonic()) > self.idle_s:
            self.close(session_id)
            return None
        session.touch()
        return session

    def close(self, session_id: str) -> bool:
        session = self.sessions.pop(session_id, None)
        if session is None:
            return False
        session.connection.close()
        session.standalone.log.finish()
        return True

    def sweep(self) -> None:
        now = time.monotonic()
        for session_id, session in list(self.sessions.items()):
            if session.idle_for(now) > self.idle_s:
                self.close(session_id)

    def close_all(self) -> None:
        for session_id in list(self.sessions):
            self.close(session_id)
