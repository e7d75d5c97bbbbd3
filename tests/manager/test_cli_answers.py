"""`mcpkit call` answers what a server asks, driven as a person types it: a subprocess per
command, against a real stdio server (`asking_server.py`) in both eras. On a terminal (a
real pseudo-terminal) the user fills the form or confirms the link; off one the command says
what was asked and how to answer it with flags; a server cannot reach the terminal with
escape sequences; tools that require task execution are followed in both eras."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.interop.client_peers import EVERYTHING, needs_node_package, node_peer

HERE = Path(__file__).parent
SRC = HERE.parent.parent / "src"
ASKING = str(HERE / "asking_server.py")
PY = sys.executable
RUN_TIMEOUT_S = 30
EXPECT_TIMEOUT_S = 15.0


@dataclass
class Done:
    code: int
    out: str
    err: str


class Person:
    """A HOME with the asking server configured as `new` (modern) and `old` (2025-11-25)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {"HOME": str(home), "PATH": os.environ["PATH"], "PYTHONPATH": str(SRC),
                    "BROWSER": ""}
        self.terminals: list[Terminal] = []
        for name, extra in (("new", []), ("old", ["--legacy"])):
            self.run("mcp", "add", name, "--", PY, ASKING, *extra)

    def run(self, *argv: str, **env: str) -> Done:
        """Off a terminal: stdin, stdout and stderr are pipes."""
        proc = subprocess.run([PY, "-m", "mcpkit", *argv], cwd=self.home,
                              env={**self.env, **env}, capture_output=True,
                              stdin=subprocess.DEVNULL,
                              encoding="utf-8", timeout=RUN_TIMEOUT_S, check=False)
        assert "Traceback" not in proc.stderr, proc.stderr
        return Done(proc.returncode, proc.stdout, proc.stderr)

    def at_terminal(self, *argv: str, **env: str) -> Terminal:
        term = Terminal([PY, "-m", "mcpkit", *argv], {**self.env, **env}, self.home)
        self.terminals.append(term)
        return term


class Terminal:
    """`mcpkit` with stdin and stderr on a pseudo-terminal (stdout a pipe, as `| jq` would)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.leader, follower = pty.openpty()
        self.proc = subprocess.Popen(argv, stdin=follower, stderr=follower,
                                     stdout=subprocess.PIPE, env=env, cwd=cwd)
        os.close(follower)
        self.seen = b""
        self.pos = 0

    def expect(self, text: str) -> str:
        """Read the terminal until `text` shows up after the previous match (bounded); what
        was shown since that match, up to this one's end."""
        wanted = text.encode()
        deadline = time.monotonic() + EXPECT_TIMEOUT_S
        while wanted not in self.seen[self.pos:]:
            left = deadline - time.monotonic()
            assert left > 0, f"no {text!r} on the terminal; it shows:\n{self.seen.decode()!r}"
            ready, _, _ = select.select([self.leader], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.leader, 4096)
                except OSError:
                    chunk = b""
                assert chunk, f"the terminal closed before {text!r}:\n{self.seen.decode()!r}"
                self.seen += chunk
        start, end = self.pos, self.seen.index(wanted, self.pos) + len(wanted)
        self.pos = end
        return self.seen[start:end].decode("utf-8", "replace")

    def type(self, line: str) -> None:
        os.write(self.leader, line.encode() + b"\n")

    def finish(self) -> tuple[int, str]:
        out, _ = self.proc.communicate(timeout=RUN_TIMEOUT_S)
        while select.select([self.leader], [], [], 0)[0]:  # the rest of what it showed
            try:
                chunk = os.read(self.leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            self.seen += chunk
        return self.proc.returncode, out.decode()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate(timeout=RUN_TIMEOUT_S)
        os.close(self.leader)


@pytest.fixture
def person(tmp_path: Path) -> Iterator[Person]:
    someone = Person(tmp_path)
    try:
        yield someone
    finally:
        for term in someone.terminals:
            term.close()


def _error(done: Done) -> str:
    return done.err.splitlines()[0]


def _hint(done: Done) -> str:
    return next(line for line in done.err.splitlines() if line.startswith("hint: "))


# --- at a terminal ---------------------------------------------------------------------------


@pytest.mark.parametrize("server", ["new", "old"])
def test_the_form_is_filled_at_the_terminal(person: Person, server: str) -> None:
    term = person.at_terminal("call", server, "profile")
    term.expect("Tell us about you")
    term.expect("answer it? [Y]es / [d]ecline / [c]ancel: ")
    term.type("")
    term.expect("Your name (name) *required")
    term.expect("As on your badge")
    term.type("A")  # under minLength: asked again
    term.expect("at least 2 characters")
    term.type("Ada")
    term.expect("integer 0..150")
    term.type("old")
    term.expect("enter a whole number")
    term.type("200")
    term.expect("at most 150")
    term.type("36")
    term.expect("2) Green [g]")
    term.type("2")
    term.expect("yes/no [default: no]")
    term.type("")  # the default
    term.expect("email: ")
    term.type("not-an-address")
    term.expect("expected an email address")
    term.type("")  # optional: left out
    shown = term.expect("? [Y]es / [d]ecline / [c]ancel: ")
    assert '"name": "Ada"' in shown
    term.type("y")
    code, out = term.finish()
    assert code == 0
    assert json.loads(out) == {"action": "accept", "content": {
        "name": "Ada", "age": 36, "color": "g", "subscribe": False}}


def test_the_form_is_declined_or_cancelled_at_the_terminal(person: Person) -> None:
    term = person.at_terminal("call", "new", "profile")
    term.expect("answer it?")
    term.type("d")
    assert term.finish() == (0, '{"action": "decline"}\n')
    # Pre-answered fields are not asked again; Ctrl-D (end of input) cancels.
    term = person.at_terminal("call", "old", "profile", "--answer", "name=Ada")
    term.expect("answer it?")
    term.type("")
    shown = term.expect("Age (age)")
    assert "Your name" not in shown
    os.write(term.leader, b"\x04")
    assert term.finish() == (0, '{"action": "cancel"}\n')


def test_a_link_is_opened_in_the_browser_and_confirmed(person: Person, tmp_path: Path) -> None:
    opened = tmp_path / "opened.txt"
    browser = f"{PY} -c \"import sys; open({str(opened)!r}, 'w').write(sys.argv[1])\" %s"
    term = person.at_terminal("call", "new", "login", BROWSER=browser)
    term.expect("Sign in to continue")
    term.expect("http://127.0.0.1:9/login")
    term.expect("press Enter to open it in your browser")
    term.type("")
    term.expect("when you are done there")
    term.type("y")
    assert term.finish() == (0, '{"action": "accept"}\n')
    assert opened.read_text() == "http://127.0.0.1:9/login"
    # --no-browser: the link is only printed.
    opened.unlink()
    term = person.at_terminal("call", "old", "login", "--no-browser", BROWSER=browser)
    shown = term.expect("when you are done there")
    assert "http://127.0.0.1:9/login" in shown and "press Enter to open" not in shown
    term.type("d")
    assert term.finish() == (0, '{"action": "decline"}\n')
    assert not opened.exists()


def test_a_server_cannot_write_escape_sequences_to_the_terminal(person: Person) -> None:
    term = person.at_terminal("call", "new", "hostile")
    term.expect("answer it?")
    term.type("")
    term.expect("text: ")
    term.type("42")
    term.expect("? [Y]es")
    term.type("y")
    code, out = term.finish()
    shown = term.seen.decode()  # everything the terminal got
    assert code == 0 and json.loads(out)["content"] == {"code": "42"}
    assert "URGENT click now" in shown and "red alertevil" in shown
    for planted in ("\x1b[31m", "\x1b[2J", "\x1b]0;", "\x1b]8;", "\x07", "\u202e", "pwned\x1b"):
        assert planted not in shown, planted
    # Our own only: wiping the progress line before asking.
    assert shown.replace("\r\x1b[K", "").count("\x1b") == 0


# --- off a terminal --------------------------------------------------------------------------


@pytest.mark.parametrize("server", ["new", "old"])
def test_off_a_terminal_it_says_what_was_asked_and_how_to_answer(person: Person,
                                                                  server: str) -> None:
    asked = person.run("call", server, "profile")
    assert asked.code == 2 and asked.out == ""
    assert _error(asked) == (
        "mcpkit: error: the server asked for input: 'Tell us about you' (fields: name "
        "(string, required): As on your badge; age (integer, 0..150, required): Age; color "
        "(one of r|g, required): Favourite colour); it cannot be asked here (not a terminal)")
    assert "--answer name=VALUE --answer age=VALUE --answer color=VALUE" in _hint(asked)
    assert "--answers JSON" in _hint(asked) and "--decline" in _hint(asked)

    typed = person.run("call", server, "profile", "--answer", "name=Ada", "--answer", "age=36",
                       "--answer", "color=Green", "--answer", "subscribe=yes")
    assert typed.code == 0, typed
    assert json.loads(typed.out) == {"action": "accept", "content": {
        "name": "Ada", "age": 36, "color": "g", "subscribe": True}}
    if server == "old":
        return  # the rest is the same code in both eras: checked once (each run costs ~1 s)
    given = person.run("call", server, "profile", "--answers",
                       '{"name": "Bo", "age": 7, "color": "r", "email": "bo@example.org"}')
    assert json.loads(given.out)["content"] == {"name": "Bo", "age": 7, "color": "r",
                                                "email": "bo@example.org"}
    assert json.loads(person.run("call", server, "profile", "--decline").out) == {
        "action": "decline"}

    wrong = person.run("call", server, "profile", "--answer", "name=Ada", "--answer",
                       "age=999", "--answer", "color=r")
    assert wrong.code == 2
    assert _error(wrong) == ("mcpkit: error: the answer given for 'age' does not fit the "
                             "server's form: at most 150")
    link = person.run("call", server, "login")
    assert link.code == 2
    assert _error(link) == (
        "mcpkit: error: the server asks you to open a URL: 'Sign in to continue' "
        "(http://127.0.0.1:9/login); it cannot be asked here (not a terminal)")


def test_answer_flags_are_checked(person: Person) -> None:
    both = person.run("call", "new", "profile", "--decline", "--answer", "name=x")
    assert both.code == 2
    assert _error(both) == "mcpkit: error: --decline cannot be combined with --answer/--answers"
    for flags, error in (
            (["--answers", "[1]"], "--answers must be a JSON object of field names to values"),
            (["--answers", "{"], "--answers is not valid JSON"),
            (["--answer", "name"], "--answer expects FIELD=VALUE, not 'name'")):
        bad = person.run("call", "new", "profile", *flags)
        assert bad.code == 2 and error in _error(bad), bad
    misspelt = person.run("call", "new", "profile", "--answer", "nmae=Ada", "--answer", "age=3",
                          "--answer", "color=r")
    assert misspelt.code == 2
    assert _error(misspelt).endswith(
        "(fields: name (string, required): As on your badge; answers given for fields it "
        "does not have: nmae); it cannot be asked here (not a terminal)")
    # The hostile form off a terminal: its texts arrive in the error without their escapes.
    hostile = person.run("call", "new", "hostile")
    assert "URGENT click now" in hostile.err and "\x1b" not in hostile.err


def test_sampling_is_refused_plainly(person: Person) -> None:
    sampled = person.run("call", "new", "haiku")
    assert sampled.code == 1
    assert _error(sampled) == ("mcpkit: error: the tool asks the client's model for a "
                               "completion (sampling), and mcpkit call has no model to offer")


# --- tasks -----------------------------------------------------------------------------------


def test_a_tool_that_requires_a_task_is_followed_in_the_modern_era(person: Person) -> None:
    done = person.run("call", "new", "report", "topic=moths")
    assert (done.code, done.out) == (0, "report on moths\n"), done


@needs_node_package(EVERYTHING)
def test_a_task_of_a_2025_11_25_server_is_followed_and_its_question_answered(
        person: Person) -> None:
    """server-everything (the official TypeScript SDK): `simulate-research-query` requires
    task augmentation (-32601 without it) and, when ambiguous, asks through `tasks/result`."""
    person.run("mcp", "add", "everything", "--", *node_peer(EVERYTHING, "stdio"))
    done = person.run("call", "everything", "simulate-research-query", "topic=python",
                      "ambiguous=true", "--answer", "interpretation=snake")
    assert done.code == 0, done
    assert "# Research Report: python (snake)" in done.out
