"""Run the README's fenced snippets as a newcomer types them (used by tests/test_readme.py).

`extract(text)` finds every fenced block and the `<!-- readme-test: ... -->` directives on the
lines just above it; `Session` runs them in order in one temp directory, as one terminal would:
bash variables carry over from one bash snippet to the next, servers a snippet starts keep
running for the snippets after it. The convention is documented in tests/test_readme.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JS = ROOT / "tests" / "js"

RUN_TIMEOUT_S = 30.0
"""One snippet (not a server) must finish within this."""
SERVER_START_S = 20.0
"""A server snippet must listen on its port within this."""
SERVER_STOP_S = 10.0
"""After Ctrl-C (SIGINT to its process group) a server gets this long, then SIGTERM/SIGKILL."""
OUTPUT_TAIL = 3000
"""Characters of a failing snippet's output quoted in the failure."""

FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[ \t]*$")
DIRECTIVE = re.compile(r"^\s*<!--\s*readme-test:(?P<body>.*?)-->\s*$")
KNOWN_LANGS = {"python", "bash", "json", "text"}
KEYS = {"skip", "reason", "server", "port", "stop", "installed", "synopsis", "same-as", "expect",
        "file", "needs"}
INSTALL_COMMAND = re.compile(
    r"^(python3? -m venv \S+|\. \S+/bin/activate|source \S+/bin/activate|pip install .+)$")


class SnippetError(AssertionError):
    """A snippet did not run as written, or its directives are wrong."""


@dataclass
class Snippet:
    line: int
    """1-based line of the opening fence."""
    lang: str
    code: str
    directives: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ident(self) -> str:
        return f"L{self.line}-{self.lang or 'unlabelled'}"

    def one(self, key: str) -> str | None:
        values = self.directives.get(key)
        return values[-1] if values else None

    def has(self, key: str) -> bool:
        return key in self.directives


def parse_directives(body: str, line: int) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for token in shlex.split(body):
        key, _, value = token.partition("=")
        if key not in KEYS:
            raise SnippetError(f"README.md:{line}: unknown readme-test directive {key!r} "
                               f"(known: {', '.join(sorted(KEYS))})")
        found.setdefault(key, []).append(value)
    return found


def extract(text: str) -> list[Snippet]:
    """Every fenced block, in order, with the directives of the comment lines right above it.
    A directive comment followed by a blank line and no fence (e.g. `stop=NAME`) attaches to
    the next fence too."""
    snippets: list[Snippet] = []
    lines = text.splitlines()
    pending: dict[str, list[str]] = {}
    i = 0
    while i < len(lines):
        match = DIRECTIVE.match(lines[i])
        if match:
            for key, values in parse_directives(match["body"], i + 1).items():
                pending.setdefault(key, []).extend(values)
            i += 1
            continue
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        indent, start = fence["indent"], i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        if i == len(lines):
            raise SnippetError(f"README.md:{start + 1}: fence never closed")
        snippets.append(Snippet(start + 1, fence["lang"], "\n".join(body) + "\n", pending))
        pending = {}
        i += 1
    return snippets


def drop_install(code: str, line: int) -> str:
    """The snippet without its leading install commands (`python3 -m venv`, `activate`,
    `pip install`), which the test environment is: split on `&&` and on lines."""
    commands = [c.strip() for ln in code.splitlines() for c in ln.split("&&") if c.strip()]
    kept = list(commands)
    while kept and INSTALL_COMMAND.match(kept[0].split("  #")[0].strip()):
        kept.pop(0)
    if len(kept) == len(commands):
        raise SnippetError(f"README.md:{line}: `installed` but the snippet starts with no "
                           "install command (python3 -m venv / activate / pip install)")
    return "\n".join(kept) + "\n"


def port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def tail(text: str) -> str:
    return text if len(text) <= OUTPUT_TAIL else "…" + text[-OUTPUT_TAIL:]


@dataclass
class Server:
    name: str
    port: int
    proc: subprocess.Popen[bytes]
    log: Path
    stopped_by: str | None = None
    """The signal that ended it: "SIGINT" when Ctrl-C sufficed."""

    def stop(self) -> None:
        """Ctrl-C, as the reader would, to the whole process group; then SIGTERM, SIGKILL."""
        for sig, wait_s in ((signal.SIGINT, SERVER_STOP_S), (signal.SIGTERM, 5.0),
                            (signal.SIGKILL, 5.0)):
            if self.proc.poll() is not None:
                break
            self.stopped_by = sig.name
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=wait_s)
        with contextlib.suppress(ProcessLookupError):  # what the shell left in its group
            os.killpg(self.proc.pid, signal.SIGKILL)


class Session:
    """One reader's terminal: a temp working directory and HOME, the project's venv and the
    test-only JS peers on PATH, bash state carried between bash snippets, servers kept."""

    def __init__(self, base: Path) -> None:
        self.cwd = base / "work"
        self.home = base / "home"
        self.state = base / "bash-state.sh"
        for d in (self.cwd, self.home):
            d.mkdir(parents=True, exist_ok=True)
        self._link_js_project(base)
        self.servers: dict[str, Server] = {}
        self.stopped: list[Server] = []
        self.env = self._environment()

    def _link_js_project(self, base: Path) -> None:
        """`npx @modelcontextprotocol/inspector` resolves from the nearest npm project above
        the working directory: make `base` one whose packages are tests/js's (offline)."""
        (base / "package.json").write_text((JS / "package.json").read_text("utf-8"), "utf-8")
        with contextlib.suppress(FileExistsError):
            (base / "node_modules").symlink_to(JS / "node_modules")

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        path = [str(Path(sys.executable).parent), str(JS / "node_modules" / ".bin"),
                env.get("PATH", "")]
        xdg = {f"XDG_{k}_HOME": str(self.home / v) for k, v in
               (("CONFIG", ".config"), ("DATA", ".local/share"), ("CACHE", ".cache"),
                ("STATE", ".local/state"))}
        env.update(xdg, HOME=str(self.home), PATH=os.pathsep.join(path),
                   npm_config_offline="true", npm_config_update_notifier="false",
                   npm_config_cache=str(self.home / ".npm"), PYTHONUNBUFFERED="1")
        return env

    # ------------------------------------------------------------------ running snippets

    def run(self, snippet: Snippet) -> str:
        """Run one snippet as its directives say; its output. Raises SnippetError."""
        stop = snippet.one("stop")
        if stop:
            self.stop(stop)
        if snippet.lang == "python":
            self._check_same_as(snippet)
            return self._run_python(snippet)
        if snippet.lang == "json":
            return self._check_json(snippet)
        if snippet.lang == "bash":
            code = drop_install(snippet.code, snippet.line) if snippet.has("installed") \
                else snippet.code
            if snippet.has("synopsis"):
                return self._check_synopsis(snippet)
            if snippet.has("server"):
                return self._start_server(snippet, code)
            return self._run_bash(snippet, code)
        raise SnippetError(f"README.md:{snippet.line}: no way to run a {snippet.lang!r} block")

    def _check(self, snippet: Snippet, done: subprocess.CompletedProcess[str]) -> str:
        output = done.stdout + done.stderr
        if done.returncode != 0:
            raise SnippetError(f"README.md:{snippet.line}: exit code {done.returncode}:\n"
                               f"{tail(output)}")
        if "UNSET" in done.stdout:  # msgspec's sentinel for an absent field: never for users
            raise SnippetError(f"README.md:{snippet.line}: prints UNSET:\n{tail(done.stdout)}")
        for wanted in snippet.directives.get("expect", []):
            if wanted not in output:
                raise SnippetError(f"README.md:{snippet.line}: output lacks {wanted!r}:\n"
                                   f"{tail(output)}")
        return output

    def _run_python(self, snippet: Snippet) -> str:
        script = self.cwd / f"snippet_{snippet.line}.py"
        script.write_text(snippet.code, "utf-8")
        # through bash, so the snippet sees what the bash snippets before it exported, as it
        # would in the reader's shell (`export MCPKIT_HUB_TOKEN=…`, then python)
        run = f"exec {shlex.quote(sys.executable)} {shlex.quote(str(script))}"
        done = self._subprocess(["bash", "-c", self._bash_script(run, save_state=False)],
                                snippet)
        return self._check(snippet, done)

    def _bash_script(self, code: str, *, save_state: bool) -> str:
        # `set -a`: every variable a snippet sets is exported, so `export -p` hands it on
        state = shlex.quote(str(self.state))
        head = f"set -a\n[ -f {state} ] && . {state}\nset -eo pipefail\n"
        save = f"\nexport -p > {state}\n" if save_state else ""
        return head + code + save

    def _run_bash(self, snippet: Snippet, code: str) -> str:
        done = self._subprocess(["bash", "-c", self._bash_script(code, save_state=True)],
                                snippet)
        return self._check(snippet, done)

    def _subprocess(self, argv: list[str], snippet: Snippet) -> subprocess.CompletedProcess[str]:
        """Run to the end in its own process group; past RUN_TIMEOUT_S the group is killed."""
        proc = subprocess.Popen(argv, cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise SnippetError(f"README.md:{snippet.line}: still running after "
                               f"{RUN_TIMEOUT_S:.0f} s (a server? mark it server=NAME "
                               f"port=N):\n{tail(out + err)}") from None
        finally:
            with contextlib.suppress(ProcessLookupError):  # nothing it started outlives it
                os.killpg(proc.pid, signal.SIGKILL)
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def _start_server(self, snippet: Snippet, code: str) -> str:
        """The last command line starts the server; the lines before it run first, as a
        normal snippet (so the variables they set carry on)."""
        name, port_text = snippet.one("server"), snippet.one("port")
        if not name or not port_text or not port_text.isdigit():
            raise SnippetError(f"README.md:{snippet.line}: server=NAME needs port=N")
        port = int(port_text)
        if name in self.servers:
            raise SnippetError(f"README.md:{snippet.line}: server {name!r} already runs")
        lines = [ln for ln in code.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        before, last = lines[:-1], lines[-1]
        if before:
            self._run_bash(snippet, "\n".join(before) + "\n")
        if port_taken(port):
            raise SnippetError(
                f"README.md:{snippet.line}: port {port} on 127.0.0.1 is taken on this machine, "
                f"and the README's {name!r} server needs it: stop what listens there")
        log = self.cwd.parent / f"server-{name}.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(["bash", "-c", self._bash_script(last, save_state=False)],
                                    cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL,
                                    stdout=sink, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        server = self.servers[name] = Server(name, port, proc, log)
        deadline = time.monotonic() + SERVER_START_S
        while not port_taken(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                server.stop()
                del self.servers[name]
                why = (f"exited with code {proc.returncode}" if proc.returncode is not None
                       else f"did not listen on port {port} within {SERVER_START_S:.0f} s")
                raise SnippetError(f"README.md:{snippet.line}: server {name!r} {why}:\n"
                                   f"{tail(log.read_text(errors='replace'))}")
            time.sleep(0.05)
        return log.read_text(errors="replace")

    def _check_same_as(self, snippet: Snippet) -> None:
        """`same-as=PATH`: the snippet is that file's code, verbatim (README and code agree)."""
        for name in snippet.directives.get("same-as", []):
            if snippet.code not in (ROOT / name).read_text("utf-8"):
                raise SnippetError(f"README.md:{snippet.line}: the snippet is not the code of "
                                   f"{name} any more: make them the same again")

    def _check_json(self, snippet: Snippet) -> str:
        """JSON must parse; `file=PATH` also writes it there (under the working directory)
        for the snippets after it."""
        try:
            json.loads(snippet.code)
        except ValueError as exc:
            raise SnippetError(f"README.md:{snippet.line}: not JSON: {exc}") from None
        for name in snippet.directives.get("file", []):
            target = self.cwd / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(snippet.code, "utf-8")
        return snippet.code

    def _check_synopsis(self, snippet: Snippet) -> str:
        """A usage synopsis is not run: each `--option` it names must be in the command's
        `--help` (the command: the words before the first `[` or option)."""
        flat = snippet.code.replace("\\\n", " ")
        words = flat.split()
        command: list[str] = []
        for word in words:
            if word.startswith(("[", "-", "<")) or word.isupper():
                break
            command.append(word)
        done = self._subprocess([*command, "--help"], snippet)
        if done.returncode != 0:
            raise SnippetError(f"README.md:{snippet.line}: `{' '.join(command)} --help` "
                               f"failed:\n{tail(done.stdout + done.stderr)}")
        named = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", flat))
        missing = sorted(o for o in named if o not in done.stdout)
        if missing:
            raise SnippetError(f"README.md:{snippet.line}: the synopsis names options "
                               f"`{' '.join(command)}` does not have: {', '.join(missing)}")
        return done.stdout

    def stop(self, name: str) -> None:
        server = self.servers.pop(name, None)
        if server is None:
            raise SnippetError(f"stop={name}: no server {name!r} is running")
        server.stop()
        self.stopped.append(server)

    def close(self) -> None:
        for name in list(self.servers):
            self.stop(name)


@contextlib.contextmanager
def session(base: Path) -> Iterator[Session]:
    run = Session(base)
    try:
        yield run
    finally:
        run.close()
