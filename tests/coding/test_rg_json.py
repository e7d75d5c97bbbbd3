"""`RgJsonParser` on its own: it does no IO, so it is fed bytes here and its `GrepOutcome`
checked - ripgrep's events as real ripgrep prints them (non-UTF-8 paths and lines come as
base64 `bytes`), the Python worker's extras (`chars`, `timeout`), and hostile input: lines
that are not JSON or not events, invalid base64, huge lines, numbers out of range, events
out of order, and more files and lines than the limits keep (they are counted, not kept).
The grep tool's end-to-end tests (test_search.py, test_search_attacks.py) run the same
parser behind real engines."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.coding.child_lines import OVERSIZED_PREFIX, LineSplitter
from mcpkit.coding.search import grep_engines
from mcpkit.coding.search.rg_json import OVERSIZED_LINE_TEXT, GrepOutcome, RgJsonParser

ROOT = PurePosixPath("/ws")


def parser(mode: str = "content", **limits: Any) -> RgJsonParser:
    return RgJsonParser(engine="ripgrep", mode=mode, walk_root=ROOT, workspace_root=ROOT,
                        base=ROOT, **limits)


def event(kind: str, **data: Any) -> bytes:
    return json.dumps({"type": kind, "data": data}, separators=(",", ":")).encode()  # as rg


def text(value: str) -> dict[str, str]:
    return {"text": value}


def raw(value: bytes) -> dict[str, str]:
    return {"bytes": base64.b64encode(value).decode()}


def one_file(path: dict[str, str], *lines: tuple[str, int, dict[str, str]]) -> list[bytes]:
    events = [event("begin", path=path)]
    events += [event(kind, path=path, lines=line, line_number=number)
               for kind, number, line in lines]
    return [*events, event("end", path=path)]


def feed_all(p: RgJsonParser, lines: list[bytes]) -> GrepOutcome:
    for line in lines:
        p.feed(line)
    return p.outcome


def test_matches_and_context_become_file_hits() -> None:
    outcome = feed_all(parser(), one_file(
        text("./src/a.py"), ("context", 1, text("before\n")), ("match", 2, text("hit\r\n")),
        ("match", 3, text("again\n"))))
    [hits] = outcome.files
    assert (hits.path, hits.abs_path, hits.matches) == ("src/a.py", "/ws/src/a.py", 2)
    assert hits.lines == [(1, "before", False), (2, "hit", True), (3, "again", True)]
    assert outcome.stored == 3 and not outcome.timed_out and outcome.engine == "ripgrep"


def test_lines_are_kept_in_content_mode_only() -> None:
    outcome = feed_all(parser("count"), one_file(text("a"), ("match", 1, text("x\n"))))
    assert outcome.files[0].matches == 1 and outcome.files[0].lines == []


def test_non_utf8_paths_and_lines_arrive_as_bytes() -> None:
    """ripgrep writes what is not valid UTF-8 as base64 `bytes`; shown with U+FFFD."""
    outcome = feed_all(parser(), one_file(raw(b"caf\xe9.txt"),
                                          ("match", 7, raw(b"na\xefve \xff needle\n"))))
    [hits] = outcome.files
    assert hits.path == "caf\ufffd.txt"
    assert hits.lines == [(7, "na\ufffdve \ufffd needle", True)]


def test_a_path_outside_the_workspace_root_is_shown_absolute() -> None:
    p = RgJsonParser(engine="ripgrep", mode="content", walk_root=PurePosixPath("/extra"),
                     workspace_root=ROOT, base=PurePosixPath("/extra"))
    outcome = feed_all(p, one_file(text("/extra/d/f.txt"), ("match", 1, text("x"))))
    assert [(h.path, h.abs_path) for h in outcome.files] == [("/extra/d/f.txt",
                                                              "/extra/d/f.txt")]


def test_the_include_filter_sees_the_path_below_the_searched_directory() -> None:
    seen: list[tuple[str, str]] = []

    def accept(name: str, rel: str) -> bool:
        seen.append((name, rel))
        return rel.startswith("keep/")

    p = RgJsonParser(engine="ripgrep", mode="content", walk_root=ROOT, workspace_root=ROOT,
                     base=ROOT / "src", accept=accept)
    lines = [*one_file(text("src/keep/a.txt"), ("match", 1, text("x"))),
             *one_file(text("src/drop/b.txt"), ("match", 1, text("x")))]
    outcome = feed_all(p, lines)
    assert seen == [("a.txt", "keep/a.txt"), ("b.txt", "drop/b.txt")]
    assert [h.path for h in outcome.files] == ["src/keep/a.txt"]


def test_the_workers_cut_lines_and_timeout_event() -> None:
    outcome = feed_all(parser(max_line=5), [
        event("begin", path=text("a")),
        event("match", line_number=1, lines=text("abcde"), chars=9000),
        event("match", line_number=2, lines=text("abcdefgh")),
        event("end"), event("timeout")])
    assert outcome.files[0].lines == [(1, "abcde … [line cut, 9000 chars]", True),
                                      (2, "abcde … [line cut, 8 chars]", True)]
    assert outcome.timed_out


@pytest.mark.parametrize("line", [
    b"", b"not json", b"{", b"[]", b"null", b'{"type": "match"}', b'{"data": {}}',
    b'{"type": 5, "data": {}}', b'{"type": "match", "data": 5}',
    b'{"type": "match", "data": {"line_number": "one"}}',
    b'{"type": "match", "data": {"line_number": 99999999999999999999999999}}',
    b'{"type": "begin", "data": {"path": {"bytes": "***not base64***"}}}',
    b'{"type": "match", "data": {"lines": {"bytes": "%%%"}}}',
    b'{"type": "begin", "data": {"path": {"text": "/elsewhere/x"}}}',
    b"\xff\xfe\x00garbage", b'{"type": "match", "data": {"lines": {"text": "\\ud800"}}}',
])
def test_a_line_that_is_no_well_formed_event_is_skipped(line: bytes) -> None:
    p = parser()
    lines = [event("begin", path=text("a")), line, event("match", line_number=1,
                                                         lines=text("x")), event("end")]
    outcome = feed_all(p, lines)
    assert [h.path for h in outcome.files] == ["a"]
    assert outcome.files[0].lines[-1] == (1, "x", True)


def test_matches_without_a_begin_count_for_nothing() -> None:
    outcome = feed_all(parser(), [event("match", line_number=1, lines=text("x")),
                                  event("end"), event("summary", elapsed_total={})])
    assert outcome.files == [] and outcome.stored == 0


def test_a_huge_line_through_the_splitter_is_counted_not_kept() -> None:
    """A matched line past the splitter's limit: one oversized prefix, counted as a match
    with a note; the stream goes on after it."""
    p = parser()
    splitter = LineSplitter(p.feed, p.feed_oversized, max_line_bytes=1000)
    huge = event("match", line_number=2, lines=text("y" * 5000))
    stream = b"\n".join([event("begin", path=text("big.txt")), huge,
                         event("match", line_number=3, lines=text("small")), event("end")])
    for start in range(0, len(stream), 777):  # in chunks, the way a pipe delivers them
        splitter.feed(stream[start:start + 777])
    splitter.feed(b"\n")
    [hits] = p.outcome.files
    assert hits.matches == 2
    assert hits.lines == [(0, OVERSIZED_LINE_TEXT, True), (3, "small", True)]


def test_an_oversized_line_that_is_no_match_or_context_is_ignored() -> None:
    p = parser()
    p.feed(event("begin", path=text("a")))
    p.feed_oversized(b'{"type":"begin","data":' + b"x" * 100)
    p.feed_oversized(b"\xff" * 100)
    p.feed(event("end"))
    assert p.outcome.files == []


def test_files_past_max_files_are_counted_not_kept() -> None:
    lines: list[bytes] = []
    for i in range(7):
        lines += one_file(text(f"f{i}"), ("match", 1, text("x")), ("match", 2, text("y")))
    outcome = feed_all(parser(max_files=3), lines)
    assert [h.path for h in outcome.files] == ["f0", "f1", "f2"]
    assert (outcome.files_dropped, outcome.matches_dropped) == (4, 8)


def test_lines_past_store_lines_are_counted_not_kept() -> None:
    lines: list[bytes] = []
    for i in range(4):
        lines += one_file(text(f"f{i}"), *[("match", n, text("x")) for n in range(1, 4)])
    outcome = feed_all(parser(store_lines=5), lines)
    assert [h.matches for h in outcome.files] == [3, 3, 3, 3]
    assert [len(h.lines) for h in outcome.files] == [3, 2, 0, 0]
    assert outcome.stored == 5


def test_the_limits_default_to_the_named_constants(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpkit.coding.search import rg_json

    monkeypatch.setattr(rg_json, "MAX_FILES_KEPT", 1)
    lines = [*one_file(text("a"), ("match", 1, text("x"))),
             *one_file(text("b"), ("match", 1, text("x")))]
    outcome = feed_all(parser(), lines)
    assert outcome.max_files == 1 and outcome.files_dropped == 1


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(
    st.binary(max_size=200),
    st.sampled_from([event("begin", path=text("a")), event("begin", path=raw(b"\xff")),
                     event("end"), event("timeout"), event("context", line_number=2,
                                                           lines=text("c"))]),
    st.builds(lambda n, s: event("match", line_number=n, lines=text(s)),
              st.integers(-(2**70), 2**70), st.text(max_size=50)),
), max_size=80), st.integers(0, 3), st.integers(0, 5))
def test_any_bytes_leave_a_bounded_outcome(lines: list[bytes], max_files: int,
                                           store_lines: int) -> None:
    """Whatever it is fed, the parser raises nothing and keeps within its limits."""
    p = parser(max_files=max_files, store_lines=store_lines, max_line=10)
    for line in lines:
        p.feed(line)
        p.feed_oversized(line[:OVERSIZED_PREFIX])
    outcome = p.outcome
    assert len(outcome.files) <= max_files
    assert sum(len(h.lines) for h in outcome.files) <= store_lines
    assert all(h.matches > 0 for h in outcome.files)
    longest = len("x" * 10 + f" … [line cut, {2**70} chars]")
    assert all(len(line) <= longest for h in outcome.files for _, line, _ in h.lines)


# --- real ripgrep output, fed by hand ----------------------------------------------------------


def test_real_ripgrep_output_with_non_utf8_names_and_text(tmp_path: Path) -> None:
    rg = grep_engines.find_ripgrep()
    if rg is None:
        pytest.skip("ripgrep is not installed")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "plain.txt").write_bytes(b"one needle\nnothing\n")
    (tmp_path / "sub" / b"lat\xe9.txt".decode("utf-8", "surrogateescape")).write_bytes(
        b"caf\xe9 needle\n")
    done = subprocess.run([rg, "--json", "--no-config", "--sort", "path", "needle", "."],
                          cwd=tmp_path, capture_output=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    root = PurePosixPath(tmp_path)
    p = RgJsonParser(engine="ripgrep", mode="content", walk_root=root, workspace_root=root,
                     base=root)
    for line in done.stdout.splitlines():
        p.feed(line)
    found = {h.path: (h.matches, h.lines) for h in p.outcome.files}
    assert found == {"sub/lat\ufffd.txt": (1, [(1, "caf\ufffd needle", True)]),
                     "sub/plain.txt": (1, [(1, "one needle", True)])}
