"""Every fenced snippet of README.md runs as written, in order, as a newcomer types them.

How a snippet is run
--------------------
All snippets share one session (tests/readme_snippets.py): a fresh temp working directory,
HOME and XDG_* dirs in a temp dir too, this Python's venv first on PATH (so `mcpkit` and
`python` are the project's), then tests/js/node_modules/.bin (Node 22 and the test-only JS
peers; `npx` runs them offline). Like one terminal:

- ```` ```python ````: written to a file and run with this Python; must exit 0.
- ```` ```bash ````: run by `bash` with `set -eo pipefail`; must exit 0. Variables a bash
  snippet sets carry over to the next bash snippets (`TOKEN=$(...)`, then `$TOKEN`).
- ```` ```json ````: must parse.
- ```` ```text ````: not code (a layout, an output); not run. A fence with no language is
  refused: label it.
Each runs in its own process group, which is killed after it (at most 30 s).

Directives
----------
An invisible HTML comment on the line(s) right above a fence says what a snippet needs:

    <!-- readme-test: server=example port=8000 -->

- `server=NAME port=N`: the snippet starts a long-running server with its LAST command line
  (lines before it run first, as a normal snippet). It is started in its own process group
  and waited for until 127.0.0.1:N accepts connections; it keeps running for the snippets
  after it, until `stop=NAME` (on a later snippet's comment) or the end, when it gets Ctrl-C
  (SIGINT to its group), then SIGTERM and SIGKILL. The README's own port is used: when it is
  taken on the machine the snippet fails and says so (nothing is substituted).
- `installed`: the snippet begins with install commands (`python3 -m venv`, `activate`,
  `pip install`, joined by `&&` or on lines of their own); the test environment is that
  installation, so they are dropped and the rest runs.
- `synopsis`: a usage synopsis (`mcpkit serve [--workspace DIR] ...`): not run; every
  `--option` it names must appear in the command's `--help`.
- `expect="TEXT"` (repeatable): the snippet's output must contain TEXT. Whatever the
  directives, no snippet may print `UNSET` (msgspec's marker of an absent field).
- `same-as=PATH`: the snippet must be a verbatim part of that file (the README's example
  server is `src/mcpkit/examples/demo.py`, which `mcpkit example` serves).
- `file=PATH` (json): also written to PATH under the working directory, for later snippets.
- `needs=node`: needs tests/js/node_modules (`bash scripts/install_js_peers.sh`); skipped,
  saying that command, without it.
- `skip reason="WHY"`: not run. Only for what cannot run here (e.g. the install-and-test
  command, which runs this suite, or a snippet that needs the network and someone's token);
  the reason is required and shows in pytest's skip summary, and the skips are counted.

A snippet with no directive must run as it is: an unmarked snippet that fails fails the test.
Snippets are test cases in README order (`-k L123` picks one; the ones before it run first,
unchecked, to set up its session).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from tests import readme_snippets as rs

from mcpkit import Client
from mcpkit.client import ConnectOptions

README = rs.ROOT / "README.md"
SNIPPETS = rs.extract(README.read_text("utf-8"))
RUNNABLE = [s for s in SNIPPETS if s.lang != "text"]
MAX_SKIPS = 6
"""The skips the README may have at most (each with its reason); a new one must be argued."""


class Progress:
    """The shared session and how far through the README it got."""

    def __init__(self, session: rs.Session) -> None:
        self.session = session
        self.done: dict[int, str | BaseException] = {}

    def run_up_to(self, snippet: rs.Snippet) -> str:
        for earlier in RUNNABLE:
            if earlier.line >= snippet.line:
                break
            if earlier.line not in self.done and not earlier.has("skip") and \
                    not (earlier.one("needs") == "node" and not node_peers()):
                self.done[earlier.line] = self._attempt(earlier)
        result = self.done.get(snippet.line)
        if result is None:
            result = self.done[snippet.line] = self._attempt(snippet)
        if isinstance(result, BaseException):
            raise result
        return result

    def _attempt(self, snippet: rs.Snippet) -> str | BaseException:
        try:
            return self.session.run(snippet)
        except rs.SnippetError as exc:
            return exc


def node_peers() -> bool:
    return (rs.JS / "node_modules" / ".bin" / "mcp-inspector").exists()


@pytest.fixture(scope="module")
def progress(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Progress]:
    with rs.session(tmp_path_factory.mktemp("readme")) as session:
        yield Progress(session)


def test_every_fence_is_labelled_and_known() -> None:
    assert len(SNIPPETS) >= 10  # the README has its snippets (the extractor found them)
    bad = [f"README.md:{s.line}: ```{s.lang}" for s in SNIPPETS if s.lang not in rs.KNOWN_LANGS]
    assert not bad, f"label each fence with one of {sorted(rs.KNOWN_LANGS)}: {bad}"


def test_skips_have_reasons_and_are_few() -> None:
    skipped = [s for s in SNIPPETS if s.has("skip")]
    no_reason = [s.ident for s in skipped if not (s.one("reason") or "").strip()]
    assert not no_reason, f"a skip needs reason=\"...\": {no_reason}"
    assert len(skipped) <= MAX_SKIPS, [f"{s.ident}: {s.one('reason')}" for s in skipped]


@pytest.mark.parametrize("snippet", RUNNABLE, ids=[s.ident for s in RUNNABLE])
def test_snippet_runs_as_written(snippet: rs.Snippet, progress: Progress) -> None:
    if snippet.has("skip"):
        pytest.skip(f"README.md:{snippet.line}: {snippet.one('reason')}")
    if snippet.one("needs") == "node" and not node_peers():
        pytest.skip("tests/js/node_modules is missing: run `bash scripts/install_js_peers.sh`")
    progress.run_up_to(snippet)


def test_servers_stop_on_ctrl_c_without_a_traceback(progress: Progress) -> None:
    """Runs after the snippets: each server the README started stops on Ctrl-C alone, and
    says nothing a newcomer would take for a crash."""
    if RUNNABLE:
        progress.run_up_to(RUNNABLE[-1])
    session = progress.session
    assert session.servers, "the README starts servers; none is running"
    session.close()
    noisy = {s.name: s.log.read_text(errors="replace")[-1500:] for s in session.stopped
             if s.stopped_by != "SIGINT" or "Traceback" in s.log.read_text(errors="replace")}
    assert not noisy, noisy


@pytest.mark.anyio
async def test_mcpkit_example_serves_the_readme_code() -> None:
    """`mcpkit example` (here over stdio) serves what the README's "Writing a server" defines:
    that snippet is src/mcpkit/examples/demo.py (`same-as`), and this is what runs."""
    marked = [s for s in SNIPPETS
              if "src/mcpkit/examples/demo.py" in s.directives.get("same-as", [])]
    assert len(marked) == 1
    code = marked[0].code
    command = [sys.executable, "-m", "mcpkit", "example", "--transport", "stdio"]
    with anyio.fail_after(30):
        async with Client(
            command,
            connect=ConnectOptions(env=dict(os.environ)),
        ) as client:  # PYTHONPATH: this tree
            assert client.server_info is not None
            assert f'Server("{client.server_info.name}", "{client.server_info.version}"' in code
            tools = {tool.name for tool in await client.list_tools()}
            prompts = {prompt.name for prompt in await client.list_prompts()}
            uris = {r.uri for r in await client.list_resources()} | {
                t.uri_template for t in await client.list_resource_templates()}
            added = await client.call_tool("add", {"a": 2, "b": 3})
    assert tools == set(re.findall(r"@server\.tool\([^)]*\)\s*\nasync def (\w+)", code))
    assert prompts == set(re.findall(r"@server\.prompt\(\)\s*\ndef (\w+)", code))
    assert uris == set(re.findall(r'@server\.resource\("([^"]+)"\)', code))
    assert added.structured_content == {"result": 5}


def test_extract_reads_directives_and_indented_fences(tmp_path: Path) -> None:
    text = ("intro\n<!-- readme-test: server=x port=1 expect=\"a b\" -->\n```bash\nrun\n```\n"
            "- item\n\n  ```python\n  print(1)\n  ```\n")
    first, second = rs.extract(text)
    assert (first.line, first.lang, first.code) == (3, "bash", "run\n")
    assert first.directives == {"server": ["x"], "port": ["1"], "expect": ["a b"]}
    assert (second.lang, second.code, second.directives) == ("python", "print(1)\n", {})
    with pytest.raises(rs.SnippetError, match="unknown readme-test directive"):
        rs.extract("<!-- readme-test: srever=x -->\n```bash\nx\n```\n")
    assert rs.drop_install("python3 -m venv .venv && . .venv/bin/activate && "
                           "pip install -e . && mcpkit serve\n", 1) == "mcpkit serve\n"
    with pytest.raises(rs.SnippetError, match="no install command"):
        rs.drop_install("mcpkit serve\n", 1)
