"""Any text given as a patch is parsed or refused with a FileToolError, nothing else: the
apply_patch tool answers a bad patch with an isError result naming the line."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.coding.patches import FileToolError, parse_patch

CODEX_LINES = st.sampled_from([
    "*** Add File: a.py", "*** Update File: b.py", "*** Delete File: c.py", "*** Move to: d.py",
    "*** End of File", "*** Add File:", "@@", "@@ def f():", "+new", "-old", " same", "", "junk",
    "*** unknown",
])
UNIFIED_LINES = st.sampled_from([
    "--- a/x.py", "+++ b/x.py", "@@ -1,2 +1,2 @@", "@@ -0,0 +1 @@", "@@ bad @@", "+a", "-b",
    " c", "\\ No newline at end of file", "", "diff --git a/x.py b/x.py",
])


def parsed_or_refused(text: str, file_path: str | None) -> None:
    try:
        parse_patch(text, file_path)
    except FileToolError:
        pass


@settings(max_examples=400, deadline=None)
@given(st.lists(CODEX_LINES, max_size=12))
def test_codex_patches_are_parsed_or_refused(lines: list[str]) -> None:
    parsed_or_refused("\n".join(["*** Begin Patch", *lines, "*** End Patch"]), None)


@settings(max_examples=400, deadline=None)
@given(st.lists(UNIFIED_LINES, max_size=12), st.sampled_from([None, "x.py"]))
def test_unified_diffs_are_parsed_or_refused(lines: list[str], file_path: str | None) -> None:
    parsed_or_refused("\n".join(lines), file_path)


@pytest.mark.parametrize(("body", "says"), [
    (["*** Add File: b.py", "*** Move to: x", "+new"], "follows '*** Update File:' only"),
    (["*** Add File: b.py", "+a", "*** End of File", "+b"], "its lines come before it"),
])
def test_lines_after_an_added_file_closes_are_refused(body: list[str], says: str) -> None:
    with pytest.raises(FileToolError, match="line 3" if "Move" in body[1] else "line 5") as err:
        parse_patch("\n".join(["*** Begin Patch", *body, "*** End Patch"]), None)
    assert says in str(err.value)
