"""Shell tools: `bash`, and `bash_output` / `bash_kill` for background jobs.

Every command runs as `bash -c COMMAND` (`sh` when bash is missing) in a process group of
its own (a new session), with stdin from /dev/null, in the workspace (or `workdir` inside
it). Its environment is deny-by-default: a short allow-list of harmless variables
(`SAFE_VARIABLES`: PATH, HOME, locale, terminal, toolchain locations), plus only what the
operator passes (`CodingEnv.pass_env` / `set_env`, `--pass-env` / `--env`). stdout and
stderr are merged; ANSI escape sequences are stripped.

Output: the whole of it streams to a file in the task scope's output directory; the model
gets the head and the tail (`OutputSink`), with a marker saying how much was cut and where
the whole is. Only those bounded parts are kept in memory, so a command printing 100 MB
costs what writing the file costs.

Stopping: every process a command starts is tracked, including those that leave its
process group (`setsid`, double forks, daemons): a cgroup per command where one can be
made, else the process table (session, group, a marker variable, descendants), with the
server a child subreaper (see `tracking.py`). On timeout or cancellation all of them get
SIGTERM, then SIGKILL ~2 s later (exit code 124, `timed_out`). When the shell itself exits,
whatever it left running is stopped the same way: a foreground command leaves nothing
behind (long-running services belong in `run_in_background`). Background jobs are owned by
their task scope; `kill_now()` (server exit) SIGKILLs them synchronously.

The sandbox around the server is the real boundary for what commands can do: the workspace
is only their starting directory.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Annotated, Any

import anyio
from anyio.abc import Process

from mcpkit.coding.env import CodingEnv
from mcpkit.coding.processes import open_in_group
from mcpkit.coding.scope import TaskScope
from mcpkit.coding.tracking import CommandTracker, spawning
from mcpkit.coding.workspace import WorkspaceError
from mcpkit.server.context import Context
from mcpkit.server.server import Server
from mcpkit.server.tools import ToolResult
from mcpkit.sizes import for_people

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
HEAD_LINES = TAIL_LINES = 200
HEAD_BYTES = TAIL_BYTES = 16 * 1024
READ_CHUNK = 64 * 1024
TERM_GRACE_S = 2.0
"""SIGTERM first; SIGKILL for what is still alive this long after."""
KILL_WAIT_S = 3.0
DRAIN_GRACE_S = 1.0
"""After the shell exits, how long to keep reading output its leftovers still write."""
PROGRESS_EVERY_S = 1.0
OUTPUT_CHECK_S = 0.5
"""How often a background job's output file is measured against the output cap."""
MAX_COMMAND_BYTES = 100_000
"""A longer command is refused (Linux refuses one argument over 128 KiB anyway)."""

SAFE_VARIABLES = frozenset({
    # who and where
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "HOSTNAME", "TMPDIR", "TEMP", "TMP", "TZ",
    # language and terminal
    "LANG", "LANGUAGE", "TERM", "COLORTERM", "NO_COLOR",
    # where toolchains and their caches live (paths, never credentials)
    "VIRTUAL_ENV", "CONDA_PREFIX", "PYENV_ROOT", "GOPATH", "GOROOT", "GOCACHE", "GOMODCACHE",
    "CARGO_HOME", "RUSTUP_HOME", "JAVA_HOME", "NVM_DIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
    "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR",
    # certificate bundles (sandboxes behind a TLS-inspecting proxy need them)
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
})
"""The server's variables every command gets. Anything else (tokens, keys, database URLs,
webhooks, proxies that may carry a password) only when the operator passes it."""
SAFE_PREFIXES = ("LC_",)
NEVER_PASSED = frozenset({"MCPKIT_SERVE_TOKEN"})
"""Not even through a `--pass-env` pattern (a `--env` value is the operator's own)."""
COMMAND_DEFAULTS = {"GIT_TERMINAL_PROMPT": "0"}

ANSI = re.compile(
    rb"\x1b(?:\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor movement, erase
    rb"|\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: titles, hyperlinks
    rb"|[PX^_][^\x1b]*\x1b\\"  # DCS, SOS, PM, APC strings
    rb"|[ -/]*(?![\[\]PX^_])[0-~])"  # two- and three-byte escapes
)
ANSI_LOOKBACK = 256
"""An escape sequence split across reads is carried over when its ESC is this close to the end."""

_ids = itertools.count(1)


# --- environment and argv ---------------------------------------------------------------------


def is_safe_name(name: str) -> bool:
    return name in SAFE_VARIABLES or name.startswith(SAFE_PREFIXES)


def _passed(name: str, patterns: tuple[str, ...]) -> bool:
    if name in NEVER_PASSED:
        return False
    return any(name == p or (p.endswith("*") and name.startswith(p[:-1])) for p in patterns)


def scrubbed_env(base: dict[str, str] | None = None, *, pass_env: tuple[str, ...] = (),
                 set_env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment commands get: the allow-listed variables of the server's (`base`,
    default `os.environ`), those the operator passes by name, and the operator's values."""
    source = dict(os.environ) if base is None else base
    env = dict(COMMAND_DEFAULTS)
    env.update((k, v) for k, v in source.items() if is_safe_name(k) or _passed(k, pass_env))
    env.update(set_env or {})
    return env


def command_env(env: CodingEnv) -> dict[str, str]:
    return scrubbed_env(pass_env=env.pass_env, set_env=env.set_env)


def shell_argv(command: str) -> list[str]:
    shell = shutil.which("bash") or shutil.which("sh") or "/bin/sh"
    return [shell, "-c", command]


# --- output ---------------------------------------------------------------------------------


class OutputSink:
    """Strips ANSI escapes, writes everything to `file` (if any), keeps the head and the tail.

    Memory is bounded: the head (HEAD_LINES lines / HEAD_BYTES) and at most 2 x TAIL_BYTES
    of the latest output, whatever the stream's length. The file gets at most `max_bytes`;
    `over_limit` says the output went past it (the caller stops the command).
    """

    def __init__(self, file: IO[bytes] | None = None, max_bytes: int | None = None) -> None:
        self.file = file
        self.max_bytes = max_bytes
        self.over_limit = False
        self.head = bytearray()
        self.head_lines = 0
        self.head_full = False
        self.tail = bytearray()
        self.tail_start = 0  # stream offset of tail[0]
        self.total = 0
        self.lines = 0
        self._carry = b""

    def feed(self, chunk: bytes) -> None:
        data = self._carry + chunk
        self._carry = b""
        esc = data.rfind(b"\x1b", max(0, len(data) - ANSI_LOOKBACK))
        if esc >= 0 and not _complete_escape(data, esc):
            data, self._carry = data[:esc], data[esc:]
        self._add(strip_ansi(data))

    def close(self) -> None:
        if self._carry:
            carry, self._carry = self._carry, b""
            self._add(strip_ansi(carry))
        if self.file is not None:
            self.file.flush()

    def _add(self, data: bytes) -> None:
        if not data:
            return
        if self.file is not None and not self.over_limit:
            room = len(data) if self.max_bytes is None else self.max_bytes - self.total
            self.file.write(data[:max(room, 0)])
            self.over_limit = room < len(data)
        self.lines += data.count(b"\n")
        self.total += len(data)
        if not self.head_full:
            part = data[: HEAD_BYTES - len(self.head)]
            cut = _after_nth_newline(part, HEAD_LINES - self.head_lines)
            if cut is not None:
                part = part[:cut]
            self.head += part
            self.head_lines += part.count(b"\n")
            data = data[len(part):]
            if len(self.head) >= HEAD_BYTES or self.head_lines >= HEAD_LINES:
                self.head_full = True
                self.tail_start = len(self.head)
        if data:
            self.tail += data
            if len(self.tail) > 2 * TAIL_BYTES:
                drop = len(self.tail) - TAIL_BYTES
                del self.tail[:drop]
                self.tail_start += drop

    def render(self, full_path: str | None) -> tuple[str, bool]:
        """(text for the model, whether anything was cut)."""
        tail = bytes(self.tail)
        start = max(0, len(tail) - TAIL_BYTES)
        body = tail[:-1] if tail.endswith(b"\n") else tail
        newlines = 0
        pos = len(body)
        while newlines < TAIL_LINES:
            pos = body.rfind(b"\n", start, pos)
            if pos < 0:
                break
            newlines += 1
        if newlines == TAIL_LINES:
            start = pos + 1
        cut_something = self.tail_start > len(self.head) or start > 0
        if not cut_something:
            return _decode(bytes(self.head) + tail), False
        dropped = self.tail_start > len(self.head)
        if (start == 0 and dropped) or (start > 0 and tail[start - 1:start] != b"\n"):
            # the shown tail would begin mid-line: begin at the next line, if there is one
            nl = tail.find(b"\n", start, len(tail) - 1)
            if nl >= 0:
                start = nl + 1
        shown = tail[start:]
        cut_bytes = self.total - len(self.head) - len(shown)
        cut_lines = self.lines - self.head_lines - shown.count(b"\n")
        head = _decode(bytes(self.head))
        if head and not head.endswith("\n"):
            head += "\n"
        where = f"; full output in {full_path}" if full_path else ""
        marker = f"… {cut_lines} lines cut ({for_people(cut_bytes)}){where}\n"
        return head + marker + _decode(shown), True


def strip_ansi(data: bytes) -> bytes:
    if b"\x1b" not in data:
        return data
    return ANSI.sub(b"", data).replace(b"\x1b", b"")  # and the ESC of any unfinished one


def _complete_escape(data: bytes, esc: int) -> bool:
    return ANSI.match(data, esc) is not None


def _after_nth_newline(data: bytes, n: int) -> int | None:
    pos = -1
    for _ in range(n):
        pos = data.find(b"\n", pos + 1)
        if pos < 0:
            return None
    return pos + 1


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "replace")


# --- stopping -------------------------------------------------------------------------------


def stop_command(tracker: CommandTracker, grace: float = TERM_GRACE_S) -> None:
    """SIGTERM every process of the command, SIGKILL what is left after `grace` s."""
    tracker.stop(grace)


async def stop_command_async(tracker: CommandTracker, grace: float = TERM_GRACE_S) -> None:
    await anyio.to_thread.run_sync(stop_command, tracker, grace)


# --- background jobs ------------------------------------------------------------------------


class Job:
    """A background command: its output goes straight to a file; a thread reaps it (and
    stops it if the file grows past `max_output_bytes`)."""

    def __init__(self, job_id: str, command: str, proc: subprocess.Popen[bytes],
                 tracker: CommandTracker, output_path: Path, max_output_bytes: int) -> None:
        self.job_id = job_id
        self.command = command
        self.proc = proc
        self.tracker = tracker
        self.pgid = proc.pid
        self.output_path = output_path
        self.max_output_bytes = max_output_bytes
        self.read_offset = 0
        self.started = time.monotonic()
        self.killed = False
        self.over_limit = False
        self.finished = threading.Event()
        """Set once the shell has exited and every process of the command is gone."""
        self._reaper = threading.Thread(target=self._reap, name=f"mcpkit-{job_id}", daemon=True)
        self._reaper.start()

    def _reap(self) -> None:
        while True:
            try:
                self.proc.wait(OUTPUT_CHECK_S)
                break
            except subprocess.TimeoutExpired:
                if self._output_size() > self.max_output_bytes:
                    self.over_limit = self.killed = True
                    stop_command(self.tracker)
        stop_command(self.tracker)  # whatever the shell left behind
        self.finished.set()

    def _output_size(self) -> int:
        try:
            return self.output_path.stat().st_size
        except OSError:
            return 0

    @property
    def running(self) -> bool:
        return not self.finished.is_set()

    @property
    def exit_code(self) -> int | None:
        if not self.finished.is_set():
            return None
        code = self.proc.returncode
        if code is None:
            return None
        return 128 - code if code < 0 else code  # killed by signal N: 128+N, as shells say

    def kill_now(self) -> None:
        """SIGKILL the whole group, synchronously (server exit, task scope dropped)."""
        if self.finished.is_set():
            return
        self.killed = True
        stop_command(self.tracker, 0)
        self.finished.wait(1.0)

    async def kill(self) -> None:
        if self.finished.is_set():
            return
        self.killed = True
        await stop_command_async(self.tracker)
        await anyio.to_thread.run_sync(self.finished.wait, KILL_WAIT_S)


def _running_jobs(scope: TaskScope) -> int:
    return sum(1 for job in scope.jobs.values() if isinstance(job, Job) and job.running)


def _add_job(scope: TaskScope, job: Job, limit: int) -> None:
    """Keep the job; forget the oldest finished ones past `limit` (their files stay)."""
    scope.jobs[job.job_id] = job
    for old_id, old in list(scope.jobs.items()):
        if len(scope.jobs) <= limit:
            break
        if isinstance(old, Job) and not old.running:
            del scope.jobs[old_id]


def _read_new(job: Job) -> tuple[str, bool, int]:
    """(rendered new output since the last read, truncated, bytes read); moves the offset."""
    sink = OutputSink()
    try:
        with open(job.output_path, "rb") as f:
            f.seek(job.read_offset)
            while chunk := f.read(READ_CHUNK):
                sink.feed(chunk)
                job.read_offset += len(chunk)
    except OSError:
        pass
    sink.close()
    text, truncated = sink.render(str(job.output_path))
    return text, truncated, sink.total


# --- the tools ------------------------------------------------------------------------------

BASH_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "output": {"type": "string",
                   "description": "the command's output (stdout and stderr merged, ANSI "
                                  "stripped; head and tail when long, as in the text)"},
        "exit_code": {"type": ["integer", "null"],
                      "description": "the command's exit code (124 on timeout; null while a "
                                     "background job runs)"},
        "timed_out": {"type": "boolean"},
        "truncated": {"type": "boolean",
                      "description": "the text shows only the head and tail of the output"},
        "output_path": {"type": "string", "description": "the file with the whole output"},
        "job_id": {"type": "string", "description": "background jobs: the id for bash_output "
                                                    "and bash_kill"},
        "pid": {"type": "integer", "description": "background jobs: the process group id"},
    },
    "required": ["output", "exit_code", "timed_out", "truncated", "output_path"],
}

JOB_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "job_id": {"type": "string"},
        "output": {"type": "string", "description": "output since the last read (head and "
                                                    "tail when long, as in the text)"},
        "running": {"type": "boolean"},
        "exit_code": {"type": ["integer", "null"]},
        "killed": {"type": "boolean"},
        "over_limit": {"type": "boolean", "description": "stopped because its output "
                                                         "outgrew the output cap"},
        "truncated": {"type": "boolean"},
        "new_bytes": {"type": "integer", "description": "output bytes since the last read"},
        "output_path": {"type": "string"},
    },
    "required": ["job_id", "output", "running", "exit_code", "truncated", "output_path"],
}

BASH_DESCRIPTION = (
    "Run a shell command (bash -c) in the workspace, in its own process group, with stdin "
    "from /dev/null and stdout+stderr merged. `timeout` is in milliseconds (default 120000, "
    "max 600000); on timeout the command and every process it started are killed and the "
    "exit code is 124. "
    "Long output shows its head and tail; the whole is saved to the file in `output_path`. "
    "Processes the command leaves running are stopped when it exits: for servers and other "
    "long-running commands use `run_in_background`, then `bash_output` and `bash_kill`. "
    "The environment holds only harmless variables (PATH, HOME, locale, …) and those the "
    "operator passed on."
)


def _error(message: str) -> ToolResult:
    return ToolResult(content=[{"type": "text", "text": message}], is_error=True)


def _open_output(path: Path) -> IO[bytes]:
    return open(path, "wb")


def _output_path(scope: TaskScope, stem: str) -> Path:
    scope.output_dir.mkdir(parents=True, exist_ok=True)
    return scope.output_dir / f"{stem}.log"


def _checked_workdir(env: CodingEnv, command: str, timeout: int, workdir: str | None
                     ) -> Path | str:
    """The directory a `bash` call runs in, or (a string) why the call is refused."""
    if timeout > MAX_TIMEOUT_MS:
        return f"timeout {timeout} ms is over the maximum of {MAX_TIMEOUT_MS} ms"
    if timeout <= 0:
        return "timeout must be a positive number of milliseconds"
    size = len(command.encode("utf-8", "surrogatepass"))
    if size > MAX_COMMAND_BYTES:
        return (f"the command is {size} bytes, over the maximum of "
                f"{MAX_COMMAND_BYTES}; write a script file and run that")
    try:
        cwd = env.workspace.resolve(workdir)
    except WorkspaceError as exc:
        return str(exc)
    if not cwd.is_dir():
        return f"workdir {workdir} is not a directory"
    return cwd


def _start_job(env: CodingEnv, scope: TaskScope, command: str, cwd: Path) -> ToolResult:
    if _running_jobs(scope) >= env.max_jobs_per_task:
        return _error(f"this task already has {env.max_jobs_per_task} background jobs "
                      f"running (the maximum); stop one with bash_kill first")
    job_id = f"job{next(_ids)}"
    path = _output_path(scope, job_id)
    tracker = env.processes.new()
    try:
        with open(path, "wb") as out, spawning() as register:
            proc = subprocess.Popen(
                tracker.wrap(shell_argv(command)), stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, cwd=cwd, env=tracker.environ(command_env(env)),
                start_new_session=True)
            register(proc.pid)
    except OSError as exc:
        tracker.stop(0)
        return _error(f"could not start the command: {exc}")
    tracker.attach(proc.pid)
    job = Job(job_id, command, proc, tracker, path, env.max_output_bytes)
    _add_job(scope, job, env.max_jobs_per_task)
    text = (f"Started background job {job_id} (pid {proc.pid}); its output goes to {path}. "
            f"Read it with bash_output(job_id={job_id!r}); stop it with bash_kill.")
    return ToolResult(
        content=[{"type": "text", "text": text}],
        structured_content={"output": "", "exit_code": None, "timed_out": False,
                            "truncated": False, "output_path": str(path),
                            "job_id": job_id, "pid": proc.pid})


async def _run(env: CodingEnv, ctx: Context, scope: TaskScope, command: str, cwd: Path,
               seconds: float) -> ToolResult:
    path = _output_path(scope, f"bash{next(_ids)}")
    tracker = env.processes.new()
    try:
        proc = await open_in_group(tracker.wrap(shell_argv(command)), cwd=cwd,
                                   env=tracker.environ(command_env(env)),
                                   stderr=subprocess.STDOUT)
    except OSError as exc:
        tracker.stop(0)
        return _error(f"could not start the command: {exc}")
    tracker.attach(proc.pid)
    started = anyio.current_time()
    with _open_output(path) as out:
        sink = OutputSink(out, env.max_output_bytes)
        try:
            with anyio.move_on_after(seconds) as deadline:
                await _collect(ctx, proc, sink, started)
        finally:
            with anyio.CancelScope(shield=True):
                await _finish(proc, tracker, sink)
    timed_out = deadline.cancelled_caught and not sink.over_limit
    code = 124 if timed_out else _exit_code(proc.returncode)
    return _run_result(env, sink, path, code, timed_out, seconds)


def _run_result(env: CodingEnv, sink: OutputSink, path: Path, code: int, timed_out: bool,
                seconds: float) -> ToolResult:
    """A finished command's answer: its output, then one line saying how it ended."""
    text, truncated = sink.render(str(path))
    output = text
    if not text:
        text = "(no output)\n"
    elif not text.endswith("\n"):
        text += "\n"
    if sink.over_limit:
        text += (f"[stopped: the output passed {for_people(env.max_output_bytes)}; the "
                 f"command and everything it started were killed; exit code {code}]")
    elif timed_out:
        text += (f"[timed out after {_seconds(seconds)}; the command and everything it "
                 f"started were killed; exit code 124]")
    else:
        text += f"[exit code {code}]"
    return ToolResult(
        content=[{"type": "text", "text": text}],
        structured_content={"output": output, "exit_code": code, "timed_out": timed_out,
                            "truncated": truncated, "output_path": str(path)})


def register(server: Server, env: CodingEnv) -> None:
    async def bash(
        command: Annotated[str, "the shell command"],
        ctx: Context,
        timeout: Annotated[int, "milliseconds (default 120000, max 600000)"] = (  # noqa: ASYNC109
            DEFAULT_TIMEOUT_MS),
        workdir: Annotated[str | None, "directory to run in (inside the workspace; "
                                       "default: the workspace root)"] = None,
        run_in_background: Annotated[bool, "start the command and return its job_id at once"
                                     ] = False,
    ) -> ToolResult:
        cwd = _checked_workdir(env, command, timeout, workdir)
        if isinstance(cwd, str):
            return _error(cwd)
        scope = env.scopes.current()
        if run_in_background:
            return _start_job(env, scope, command, cwd)
        scope.commands += 1  # a task with a command running is never dropped for another
        try:
            return await _run(env, ctx, scope, command, cwd, timeout / 1000)
        finally:
            scope.commands -= 1

    async def bash_output(job_id: Annotated[str, "the id `bash` returned"]) -> ToolResult:
        job = env.scopes.current().jobs.get(job_id)
        if not isinstance(job, Job):
            return _error(f"unknown job_id {job_id!r} (jobs: {_job_list(env)})")
        return await _job_report(job)

    async def bash_kill(job_id: Annotated[str, "the id `bash` returned"]) -> ToolResult:
        job = env.scopes.current().jobs.get(job_id)
        if not isinstance(job, Job):
            return _error(f"unknown job_id {job_id!r} (jobs: {_job_list(env)})")
        await job.kill()
        return await _job_report(job)

    server.add_tool(
        bash, name="bash", title="Run a shell command", description=BASH_DESCRIPTION,
        output_schema=BASH_OUTPUT_SCHEMA,
        annotations={"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False,
                     "openWorldHint": True})
    server.add_tool(
        bash_output, name="bash_output", title="Read a background job's output",
        description="New output of a background job since the last read (head and tail when "
                    "long), whether it is still running, and its exit code once done.",
        output_schema=JOB_SCHEMA,
        annotations={"readOnlyHint": True, "destructiveHint": False, "idempotentHint": False,
                     "openWorldHint": False})
    server.add_tool(
        bash_kill, name="bash_kill", title="Stop a background job",
        description="Stop a background job: SIGTERM to every process it started, SIGKILL "
                    "after 2 s. "
                    "Returns its final state and unread output.",
        output_schema=JOB_SCHEMA,
        annotations={"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True,
                     "openWorldHint": False})


async def _collect(ctx: Context, proc: Process, sink: OutputSink, started: float) -> None:
    """Read the output until the shell exits and its output ends (or a short grace passes)."""
    assert proc.stdout is not None
    stdout = proc.stdout
    eof = anyio.Event()

    async def pump() -> None:
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError,
                                 anyio.BrokenResourceError):
            while not sink.over_limit:
                sink.feed(await stdout.receive(READ_CHUNK))
        eof.set()

    async def progress() -> None:
        if ctx.progress_token is None:
            return
        with contextlib.suppress(Exception):
            while True:
                await anyio.sleep(PROGRESS_EVERY_S)
                elapsed = anyio.current_time() - started
                await ctx.report_progress(
                    round(elapsed, 1), None, f"running {int(elapsed)} s, {sink.lines} lines")

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump)
        tg.start_soon(progress)
        async with anyio.create_task_group() as waiters:  # the shell's exit, or output cap
            async def shell_exit() -> None:
                await proc.wait()
                with anyio.move_on_after(DRAIN_GRACE_S):
                    await eof.wait()
                waiters.cancel_scope.cancel()

            async def stopped_early() -> None:
                await eof.wait()
                if sink.over_limit:
                    waiters.cancel_scope.cancel()

            waiters.start_soon(shell_exit)
            waiters.start_soon(stopped_early)
        tg.cancel_scope.cancel()


async def _finish(proc: Process, tracker: CommandTracker, sink: OutputSink) -> None:
    """Stop every process the command left, reap the shell, close the output (shielded,
    bounded)."""
    await stop_command_async(tracker)
    if proc.returncode is None:
        with anyio.move_on_after(KILL_WAIT_S):
            await proc.wait()
    if proc.stdout is not None:
        with anyio.move_on_after(0.2), contextlib.suppress(Exception):
            while True:
                sink.feed(await proc.stdout.receive(READ_CHUNK))
        with contextlib.suppress(Exception):
            await proc.stdout.aclose()
    sink.close()


async def _job_report(job: Job) -> ToolResult:
    running = job.running  # before reading: once it has ended, the file has all there is
    text, truncated, new_bytes = await anyio.to_thread.run_sync(_read_new, job)
    exit_code = None if running else job.exit_code
    if running:
        status = f"job {job.job_id}: running ({int(time.monotonic() - job.started)} s)"
    else:
        how = "killed" if job.killed else "exited"
        if job.over_limit:
            how = f"killed (its output passed {for_people(job.max_output_bytes)})"
        status = f"job {job.job_id}: {how}, exit code {exit_code}"
    body = text if new_bytes else "(no new output)\n"
    if not body.endswith("\n"):
        body += "\n"
    return ToolResult(
        content=[{"type": "text", "text": body + f"[{status}]"}],
        structured_content={"job_id": job.job_id, "output": text if new_bytes else "",
                            "running": running, "exit_code": exit_code,
                            "killed": job.killed, "over_limit": job.over_limit,
                            "truncated": truncated, "new_bytes": new_bytes,
                            "output_path": str(job.output_path)})


def _job_list(env: CodingEnv) -> str:
    ids = list(env.scopes.current().jobs)
    return ", ".join(ids) if ids else "none"


def _exit_code(code: int | None) -> int:
    if code is None:
        return -1
    return 128 - code if code < 0 else code


def _seconds(seconds: float) -> str:
    return f"{seconds:g} s"
