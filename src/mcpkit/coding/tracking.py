"""Every process a shell command starts, wherever it goes: found, and killed, as one.

A process group is not enough: `setsid`, double forks and daemons leave it. Each command
gets a `CommandTracker`, which finds its members two ways, together:

- **cgroup v2**, where the server can make one (a writable cgroup2 mount: root, or a
  delegated subtree): the command's shell moves itself into a cgroup of its own before it
  runs the command (`wrap`), so everything it ever starts is in it, whatever it does with
  sessions, groups or its environment. Stopping writes `cgroup.kill`.
- **the process table** (always; the only way without a cgroup): the processes in the
  command's session or process group, those whose environment carries the command's marker
  variable (`MARKER`, inherited by every descendant unless it clears its environment), and
  all their descendants. The server is a child subreaper (Linux), so orphans are re-parented
  to it instead of to PID 1 and stay findable (and get reaped here: the sandbox's PID 1 may
  not reap).

Only processes started after the command's shell count (start time in /proc), so PIDs of
older processes are never taken for members. Without the cgroup, a process that both clears
its environment and leaves the session, and whose parent has exited, carries nothing of its
command: when this process is wholly the server (`claim_process`, as `mcpkit serve` does),
such an adopted orphan (a child of ours that we did not spawn: every spawn is registered,
`spawning`) is attributed to the one running command that started before it; when several
could own it, it is left to the last of them or to the server's exit (`stop_all` with
`everything=True`), which stops every descendant.

The stopping code is synchronous and takes no locks: it runs in worker threads and in the
server's SIGTERM handler.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from mcpkit.protocol import errors

MARKER = "MCPKIT_COMMAND"
"""The environment variable (a random value per command) that marks its processes."""
KILL_ROUNDS_S = 3.0
"""How long SIGKILL rounds go on while members keep appearing (forks racing the kill)."""
POLL_S = 0.02
SHELL = "/bin/sh"
ENTER_CGROUP = 'echo $$ > "$1" 2>/dev/null; shift; exec "$@"'
"""Run by `sh -c` before the command: move this process into the cgroup, then become the
command (same pid, so nothing runs outside the cgroup). Failing to move is not fatal: the
process-table tracking still holds."""


class Tracking(StrEnum):
    AUTO = "auto"
    """cgroup v2 where one can be made, else the process table alone."""
    CGROUP = "cgroup"
    """Require a cgroup (an error at start-up when none can be made)."""
    PROCESS_TABLE = "process-table"
    """The process table (session, group, marker, descendants) with the server a subreaper."""


class TrackingError(errors.LocalError):
    """`--process-tracking cgroup` where no cgroup can be made."""

    def __init__(self, message: str) -> None:
        super().__init__(errors.INTERNAL_ERROR, message)


# --- the process table --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProcInfo:
    pid: int
    ppid: int
    pgid: int
    sid: int
    zombie: bool
    start: int
    """Start time, clock ticks after boot."""


def read_proc(pid: int) -> ProcInfo | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    try:
        return ProcInfo(pid, int(fields[1]), int(fields[2]), int(fields[3]),
                        fields[0] in (b"Z", b"X"), int(fields[19]))
    except (IndexError, ValueError):
        return None


def process_table() -> dict[int, ProcInfo]:
    table: dict[int, ProcInfo] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if entry.isdigit():
            info = read_proc(int(entry))
            if info is not None:
                table[info.pid] = info
    return table


def has_marker(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False


def _descendants(table: dict[int, ProcInfo], roots: Iterable[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    found = set(roots)
    stack = list(found)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _reap(pid: int) -> None:
    """Collect an adopted zombie (never the shell: its `Popen`/anyio owner waits for it)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


# --- the subreaper ------------------------------------------------------------------------

_subreaper = False


def become_subreaper() -> bool:
    """Linux: orphans of our commands are re-parented to this process. Idempotent."""
    global _subreaper
    if _subreaper:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        _subreaper = bool(libc.prctl(36, 1, 0, 0, 0) == 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False
    return _subreaper


# --- cgroups ------------------------------------------------------------------------------


def _cgroup2_mount() -> Path | None:
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] == "cgroup2":
            return Path(left.split()[4])
    return None


def _own_cgroup() -> str | None:
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None


class Cgroups:
    """The server's own cgroup directory (`mcpkit-<pid>`, under the server's cgroup); one
    child cgroup per command."""

    _names = itertools.count(1)

    def __init__(self, base: Path) -> None:
        self.base = base

    @classmethod
    def make(cls) -> Cgroups | None:
        """A usable cgroup v2 directory, or None (no cgroup2 mount, not writable, not Linux)."""
        mount, own = _cgroup2_mount(), _own_cgroup()
        if mount is None or own is None:
            return None
        parent = mount / own.lstrip("/")
        base = parent / f"mcpkit-{os.getpid()}"
        try:
            base.mkdir(exist_ok=True)
        except OSError:
            return None
        # Moving a process needs write access to the common ancestor's cgroup.procs too.
        if not (os.access(base / "cgroup.procs", os.W_OK)
                and os.access(parent / "cgroup.procs", os.W_OK)):
            with contextlib.suppress(OSError):
                base.rmdir()
            return None
        made = cls(base)
        atexit.register(made.close)  # an empty cgroup directory is not left behind
        return made

    def new(self) -> Path | None:
        path = self.base / f"c{next(self._names)}"
        try:
            path.mkdir()
        except OSError:
            return None
        return path

    def close(self) -> None:
        with contextlib.suppress(OSError):
            for child in self.base.iterdir():
                if child.is_dir():
                    with contextlib.suppress(OSError):
                        child.rmdir()
            self.base.rmdir()


def cgroup_members(path: Path) -> list[int]:
    try:
        with open(path / "cgroup.procs") as f:
            return [int(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return []


def _kill_cgroup(path: Path) -> None:
    try:
        with open(path / "cgroup.kill", "w") as f:
            f.write("1")
        return
    except OSError:
        pass
    # before cgroup.kill (Linux < 5.14): freeze, SIGKILL each member, thaw
    with contextlib.suppress(OSError), open(path / "cgroup.freeze", "w") as f:
        f.write("1")
    for pid in cgroup_members(path):
        _signal(pid, signal.SIGKILL)
    with contextlib.suppress(OSError), open(path / "cgroup.freeze", "w") as f:
        f.write("0")


# --- our own children ---------------------------------------------------------------------

_owns_process = False
_spawned: dict[int, tuple[int, int]] = {}
"""Children this process spawned itself (pid -> (start time, registration number)): never
taken for orphans."""
_spawning = 0
_generation = 0
"""Spawns begun so far: a scan during which it changes does not look for orphans."""
_registrations = 0


def claim_process() -> None:
    """This whole process is the server: every child of it not spawned through `spawning`
    is an adopted orphan of some command (`mcpkit serve` calls this)."""
    global _owns_process
    _owns_process = True


@contextlib.contextmanager
def spawning() -> Iterator[Callable[[int], None]]:
    """Around every spawn of a direct child (event-loop thread): yields `register(pid)`.
    A scan that overlaps a spawn does not look for orphans (the new child is not
    registered yet)."""
    global _spawning, _generation
    _spawning += 1
    _generation += 1
    try:
        yield _register
    finally:
        _spawning -= 1


def _register(pid: int) -> None:
    global _registrations
    info = read_proc(pid)
    _registrations += 1
    _spawned[pid] = (info.start if info is not None else -1, _registrations)


def _scan() -> tuple[dict[int, ProcInfo], set[int] | None]:
    """The process table, and the children of ours that we did not spawn (adopted orphans;
    None when that cannot be told: not `claim_process`ed, or a spawn overlapped the scan)."""
    generation, registered = _generation, _registrations
    table = process_table()
    if not _owns_process or _spawning or generation != _generation:
        return table, None
    me = os.getpid()
    for pid, (start, number) in list(_spawned.items()):
        info = table.get(pid)
        # gone (and registered before the scan, so it existed before it), or pid reused
        if (info is None and number <= registered) or (
                info is not None and start != -1 and info.start != start):
            _spawned.pop(pid, None)
    orphans = set()
    for pid, info in table.items():
        if info.ppid == me:
            start, _ = _spawned.get(pid, (info.start + 1, 0))
            if start not in (info.start, -1):
                orphans.add(pid)
    return table, orphans


# --- one command --------------------------------------------------------------------------

_live: dict[int, CommandTracker] = {}
"""Every tracker whose command may still have processes (for `stop_all`)."""
_ids = itertools.count(1)


class CommandTracker:
    """The processes of one shell command. `wrap`/`environ` before spawning, `attach` after."""

    def __init__(self, cgroups: Cgroups | None) -> None:
        self.id = next(_ids)
        self.token = secrets.token_hex(8)
        self.marker = f"{MARKER}={self.token}".encode()
        self.cgroup = cgroups.new() if cgroups is not None else None
        self.leader: int | None = None
        self.leader_start = 0
        self.seen: dict[int, int] = {}
        """Members seen so far: pid -> start time (so a reused pid is not taken for one)."""
        self._done = threading.Event()

    def wrap(self, argv: Sequence[str]) -> list[str]:
        if self.cgroup is None:
            return list(argv)
        return [SHELL, "-c", ENTER_CGROUP, "mcpkit-cgroup", str(self.cgroup / "cgroup.procs"),
                *argv]

    def environ(self, env: dict[str, str]) -> dict[str, str]:
        return {**env, MARKER: self.token}

    def attach(self, pid: int) -> None:
        self.leader = pid
        info = read_proc(pid)
        self.leader_start = info.start if info is not None else 0
        _live[self.id] = self

    def members(self) -> tuple[set[int], set[int]]:
        """(live members, zombie members other than the shell), from the cgroup and the
        process table."""
        table, orphans = _scan()
        leader = self.leader
        roots: set[int] = set()
        for pid in orphans or ():
            if table[pid].start >= self.leader_start and self._sole_owner(table[pid].start):
                roots.add(pid)
        if self.cgroup is not None:
            roots.update(p for p in cgroup_members(self.cgroup) if p in table)
        for info in table.values():
            if info.start < self.leader_start:
                continue  # older than the command: never one of its processes
            if info.pid == leader and info.start != self.leader_start:
                continue  # the shell was reaped and its pid reused
            if (info.pid == leader or info.sid == leader or info.pgid == leader
                    or self.seen.get(info.pid) == info.start
                    or (not info.zombie and has_marker(info.pid, self.marker))):
                roots.add(info.pid)
        found = {p for p in _descendants(table, roots) if table[p].start >= self.leader_start}
        for pid in found:
            self.seen[pid] = table[pid].start
        live = {p for p in found if not table[p].zombie}
        zombies = {p for p in found if table[p].zombie and p != leader
                   and table[p].ppid == os.getpid()}
        zombies.update(p for p in orphans or () if table[p].zombie)
        return live, zombies

    def _sole_owner(self, started: int) -> bool:
        """Whether this is the only running command that could have started a process
        that began at `started`."""
        return all(other is self or other.leader_start > started
                   for other in list(_live.values()))

    def sweep(self) -> set[int]:
        """The live members (one scan); the zombies among them are reaped on the way."""
        live, zombies = self.members()
        for pid in zombies:
            _reap(pid)
        return live

    def alive(self) -> bool:
        return bool(self.sweep())

    def stop(self, grace: float) -> None:
        """SIGTERM every member, SIGKILL what is left after `grace` s (0: SIGKILL at once);
        reap the adopted zombies and remove the cgroup. Every wait is bounded; a command
        that left nothing costs one scan."""
        live = self.sweep()
        if live and grace > 0:
            for pid in live:
                _signal(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while live and time.monotonic() < deadline:
                time.sleep(POLL_S)
                live = self.sweep()
        deadline = time.monotonic() + KILL_ROUNDS_S
        while live and time.monotonic() < deadline:
            if self.cgroup is not None:
                _kill_cgroup(self.cgroup)
            for pid in live:
                _signal(pid, signal.SIGKILL)
            time.sleep(POLL_S)
            live = self.sweep()
        if live:
            return  # unkillable (stuck in the kernel?): stays listed for stop_all
        _live.pop(self.id, None)
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                self.cgroup.rmdir()


def stop_all(everything: bool = False) -> None:
    """SIGKILL every tracked command's processes (server exit). With `everything`, also
    every other descendant of this process: what no tracker could attribute (call it only
    where the whole process is the server)."""
    for tracker in list(_live.values()):
        with contextlib.suppress(Exception):
            tracker.stop(0)
    if not everything:
        return
    me = os.getpid()
    deadline = time.monotonic() + KILL_ROUNDS_S
    while time.monotonic() < deadline:
        table = process_table()
        others = _descendants(table, [me]) - {me}
        live = [p for p in others if not table[p].zombie]
        for pid in others:
            if table[pid].zombie and table[pid].ppid == me:
                _reap(pid)
        if not live:
            return
        for pid in live:
            _signal(pid, signal.SIGKILL)
        time.sleep(POLL_S)


class Tracker:
    """Makes `CommandTracker`s for one server, in the mode asked for."""

    def __init__(self, mode: Tracking = Tracking.AUTO) -> None:
        self.mode = Tracking(mode)
        self._cgroups: Cgroups | None = None
        self._probed = False

    @property
    def cgroups(self) -> Cgroups | None:
        if not self._probed:
            self._probed = True
            if self.mode is not Tracking.PROCESS_TABLE:
                self._cgroups = Cgroups.make()
            if self._cgroups is None and self.mode is Tracking.CGROUP:
                raise TrackingError("process tracking 'cgroup' needs a writable cgroup v2 "
                                    "hierarchy (none found, or not writable)")
        return self._cgroups

    def new(self) -> CommandTracker:
        become_subreaper()
        return CommandTracker(self.cgroups)

    def close(self) -> None:
        if self._cgroups is not None:
            self._cgroups.close()
