"""Patches: parsing unified diffs and Codex-style ('*** Begin Patch') patches into
`FilePatch`es of `Hunk`s, locating each hunk in a file's lines and applying them, plus the
text helpers they share with the file tools. Pure text functions: no IO.

`FileToolError` (the file tools' refusal, with a message for the model) is defined here, as
the lowest module of the file tools, so that `files` and `reading` can import it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mcpkit.errors import UsageError

PATCH_DRIFT = 100
"""How far (in lines) a unified-diff hunk is looked for around its stated line first."""


class FileToolError(UsageError):
    """A refusal or failure of a file tool (the message is meant for the model). A usage
    error: the call asked for something the tool refuses (a stale read, an ambiguous edit, a
    malformed patch); the few OS failures it carries are said in its message."""


# --- text helpers ----------------------------------------------------------------------------


def normalize(text: str) -> str:
    return text.replace("\r\n", "\n")


def split_lines(text: str) -> tuple[list[str], bool]:
    """(lines without their newlines, whether the text ended with a newline)."""
    if text == "":
        return [], False
    trailing = text.endswith("\n")
    return (text[:-1] if trailing else text).split("\n"), trailing


def _short(line: str, limit: int = 120) -> str:
    return line if len(line) <= limit else line[:limit] + "…"


def closest_lines(lines: Sequence[str], wanted: Sequence[str], *, start: int = 0) -> str | None:
    """'closest match at line N:' and the numbered lines most like `wanted`, or None."""
    if not lines or not wanted:
        return None
    size = max(1, len(wanted))
    target = "\n".join(w.strip() for w in wanted)
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(target)
    best, best_at = 0.0, -1
    last = max(start, len(lines) - size)
    step = 1 if last - start < 20000 else (last - start) // 20000 + 1
    first_wanted = wanted[0].strip()
    for at in range(start, last + 1, step):
        window = "\n".join(x.strip() for x in lines[at:at + size])
        matcher.set_seq1(window)
        if matcher.real_quick_ratio() <= best or matcher.quick_ratio() <= best:
            continue
        ratio = matcher.ratio()
        if ratio > best or (ratio == best and lines[at].strip() == first_wanted):
            best, best_at = ratio, at
    if best_at < 0 or best < 0.5:
        return None
    shown = lines[best_at:best_at + min(size, 6)]
    numbered = "\n".join(f"{best_at + 1 + k:>6}\t{_short(x)}" for k, x in enumerate(shown))
    return f"closest match at line {best_at + 1} ({best:.0%} similar):\n{numbered}"


# --- patch parsing ---------------------------------------------------------------------------

HUNK_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Hunk:
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    start: int | None = None
    """0-based index in the old file where `old` begins, when the diff says."""
    anchor: str | None = None
    eof: bool = False
    old_no_eol: bool = False
    new_no_eol: bool = False
    plus: int = 0
    minus: int = 0
    blank_tail: int = 0
    """Context lines at the end that came from empty diff lines (trimmed: editors add them)."""


@dataclass
class FilePatch:
    path: str
    action: str  # "update" | "add" | "delete"
    hunks: list[Hunk] = field(default_factory=list)
    move_to: str | None = None


def _diff_path(raw: str) -> str | None:
    name = raw.split("\t", 1)[0].strip()
    if name.startswith('"') and name.endswith('"') and len(name) >= 2:
        name = name[1:-1]
    if name == "/dev/null":
        return None
    if name[:2] in ("a/", "b/"):
        name = name[2:]
    return name


def parse_patch(diff: str, file_path: str | None) -> list[FilePatch]:
    text = normalize(diff)
    stripped = text.lstrip()
    if stripped.startswith("*** Begin Patch"):
        return _parse_codex(stripped.split("\n"))
    return _parse_unified(text.split("\n"), file_path)


def _hunk_line(hunk: Hunk, line: str) -> bool:
    """Add one body line to `hunk`; False when `line` is not a hunk body line."""
    if line == "":
        hunk.old.append("")
        hunk.new.append("")
        hunk.blank_tail += 1
        return True
    kind, rest = line[0], line[1:]
    if kind == "\\":
        return True
    if kind == " ":
        hunk.old.append(rest)
        hunk.new.append(rest)
    elif kind == "-":
        hunk.old.append(rest)
        hunk.minus += 1
    elif kind == "+":
        hunk.new.append(rest)
        hunk.plus += 1
    else:
        return False
    hunk.blank_tail = 0
    return True


def _finish(hunk: Hunk) -> None:
    if hunk.blank_tail:
        del hunk.old[-hunk.blank_tail:]
        del hunk.new[-hunk.blank_tail:]
        hunk.blank_tail = 0


def _parse_unified(lines: list[str], file_path: str | None) -> list[FilePatch]:
    files: list[FilePatch] = []
    current: FilePatch | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = _diff_path(line[4:]), _diff_path(lines[i + 1][4:])
            if old is None and new is None:
                raise FileToolError("a diff header names /dev/null on both sides")
            if old is None:
                current = FilePatch(str(new), "add")
            elif new is None:
                current = FilePatch(old, "delete")
            else:
                current = FilePatch(old, "update", move_to=new if new != old else None)
            files.append(current)
            i += 2
            continue
        if line.startswith("@@"):
            if current is None:
                if not file_path:
                    raise FileToolError("the diff has hunks but no '--- a/x' / '+++ b/x' "
                                        "headers; pass file_path")
                current = FilePatch(file_path, "update")
                files.append(current)
            hunk = Hunk()
            match = HUNK_HEADER.match(line)
            if match:
                old_start, old_count = int(match.group(1)), match.group(2)
                hunk.start = old_start if old_count == "0" else max(0, old_start - 1)
            i += 1
            last_kind = ""
            while i < len(lines):
                body = lines[i]
                header = (body.startswith("--- ") and i + 1 < len(lines)
                          and lines[i + 1].startswith("+++ "))
                if header or body.startswith(("@@", "diff --git ")):
                    break
                if body.startswith("\\"):
                    if last_kind in ("-", " "):
                        hunk.old_no_eol = True
                    if last_kind in ("+", " "):
                        hunk.new_no_eol = True
                elif not _hunk_line(hunk, body):
                    break
                last_kind = body[:1] or " "
                i += 1
            _finish(hunk)
            current.hunks.append(hunk)
            continue
        i += 1
    if not files:
        raise FileToolError("no hunks found in the diff (expected '@@ -a,b +c,d @@' lines or "
                            "the '*** Begin Patch' format)")
    return files


_CODEX_FILE_HEADERS = (("*** Update File:", "update"), ("*** Add File:", "add"),
                       ("*** Delete File:", "delete"))


class _CodexParser:
    """The '*** Begin Patch' format, one line at a time: the files, the one being read and
    its open hunk."""

    def __init__(self) -> None:
        self.files: list[FilePatch] = []
        self.current: FilePatch | None = None
        self.hunk: Hunk | None = None

    def close_hunk(self) -> None:
        if self.hunk is not None:
            _finish(self.hunk)
        self.hunk = None

    def marker(self, number: int, line: str) -> None:
        """A `*** ` line: a new file, a move, the end of a file."""
        self.close_hunk()
        for prefix, action in _CODEX_FILE_HEADERS:
            if line.startswith(prefix):
                path = line[len(prefix):].strip()
                if not path:
                    raise FileToolError(f"line {number}: a file path is missing")
                self.current = FilePatch(path, action)
                self.files.append(self.current)
                if action == "add":
                    self.hunk = Hunk(start=0)
                    self.current.hunks.append(self.hunk)
                return
        current = self.current
        if line.startswith("*** Move to:") and current is not None:
            if current.action != "update":
                raise FileToolError(f"line {number}: '*** Move to:' follows '*** Update File:' "
                                    f"only, not a file to {current.action}")
            current.move_to = line[len("*** Move to:"):].strip()
        elif line.startswith("*** End of File") and current is not None:
            if current.hunks:
                current.hunks[-1].eof = True
        else:
            raise FileToolError(f"line {number}: unknown patch line {_short(line)!r}")

    def body(self, number: int, line: str) -> None:
        """Any other line: part of the current file's hunks."""
        current = self.current
        if current is None:
            if line.strip() == "":
                return
            raise FileToolError(f"line {number}: expected '*** Update File:', '*** Add File:' "
                                "or '*** Delete File:'")
        if current.action == "delete":
            if line.strip():
                raise FileToolError(f"line {number}: a deleted file takes no lines")
            return
        if current.action == "add":
            if self.hunk is None:  # after the added file's '*** End of File'
                raise FileToolError(f"line {number}: the added file ended at "
                                    "'*** End of File'; its lines come before it")
            if line.startswith("+"):
                self.hunk.new.append(line[1:])
            elif line.strip():
                raise FileToolError(f"line {number}: lines of an added file start with '+'")
            return
        if line.startswith("@@"):
            self.close_hunk()
            anchor = line[2:].strip()
            self.hunk = Hunk(anchor=anchor or None)
            current.hunks.append(self.hunk)
            return
        if self.hunk is None:
            self.hunk = Hunk()
            current.hunks.append(self.hunk)
        if not _hunk_line(self.hunk, line):
            raise FileToolError(f"line {number}: a hunk line must start with ' ', '-' or '+': "
                                f"{_short(line)!r}")


def _parse_codex(lines: list[str]) -> list[FilePatch]:
    parser = _CodexParser()
    for number, line in enumerate(lines[1:], start=2):
        if line.startswith("*** End Patch"):
            break
        if line.startswith("*** "):
            parser.marker(number, line)
        else:
            parser.body(number, line)
    else:
        parser.close_hunk()
        raise FileToolError("the patch has no '*** End Patch' line")
    parser.close_hunk()
    if not parser.files:
        raise FileToolError("the patch names no files")
    return parser.files


_COMPARE: tuple[Callable[[str], str], ...] = (lambda s: s, str.rstrip, str.strip)


def _matches_at(lines: list[str], old: list[str], at: int, norm: Callable[[str], str]) -> bool:
    if at < 0 or at + len(old) > len(lines):
        return False
    return all(norm(lines[at + k]) == norm(old[k]) for k in range(len(old)))


def locate(lines: list[str], hunk: Hunk, floor: int) -> int | None:
    """Where `hunk.old` starts in `lines` (at or after `floor`), or None."""
    old = hunk.old
    if hunk.anchor is not None:
        found = None
        for norm in _COMPARE:
            want = norm(hunk.anchor)
            found = next((k for k in range(floor, len(lines)) if norm(lines[k]) == want), None)
            if found is not None:
                break
        if found is None:
            return None
        if not old:
            return found + 1
        floor = found if _matches_at(lines, old, found, str.strip) else found + 1
    if not old:
        if hunk.start is not None:
            return min(max(hunk.start, floor), len(lines))
        return len(lines)
    if hunk.eof:
        for norm in _COMPARE:
            if _matches_at(lines, old, len(lines) - len(old), norm):
                return len(lines) - len(old)
    for norm in _COMPARE:
        if hunk.start is not None:
            for delta in range(PATCH_DRIFT + 1):
                for at in (hunk.start + delta, hunk.start - delta):
                    if at >= floor and _matches_at(lines, old, at, norm):
                        return at
            found_all = [k for k in range(floor, len(lines) - len(old) + 1)
                         if _matches_at(lines, old, k, norm)]
            if len(found_all) == 1:
                return found_all[0]
        else:
            for k in range(floor, len(lines) - len(old) + 1):
                if _matches_at(lines, old, k, norm):
                    return k
    return None


def apply_hunks(display: str, text: str, hunks: list[Hunk]) -> tuple[str, int, int, list[str]]:
    """(new text, lines added, lines removed, problems); problems non-empty: not applied."""
    lines, trailing = split_lines(text)
    problems: list[str] = []
    pieces: list[tuple[int, int, list[str]]] = []
    floor = 0
    added = removed = 0
    for number, hunk in enumerate(hunks, start=1):
        at = locate(lines, hunk, floor)
        if at is None:
            where = f" near line {hunk.start + 1}" if hunk.start is not None else ""
            first = next((x for x in hunk.old if x.strip()), hunk.old[0] if hunk.old else "")
            problem = (f"{display}: hunk {number} does not apply (context not found{where}; "
                       f"first line {_short(first)!r})")
            hint = closest_lines(lines, hunk.old)
            if hint:
                problem += "; " + hint.replace("\n", "\n    ")
            problems.append(problem)
            continue
        pieces.append((at, at + len(hunk.old), hunk.new))
        floor = at + len(hunk.old)
        if floor >= len(lines):
            if hunk.new_no_eol:
                trailing = False
            elif hunk.old_no_eol:
                trailing = True
        added += hunk.plus
        removed += hunk.minus
    if problems:
        return text, 0, 0, problems
    out: list[str] = []
    cursor = 0
    for start, end, new in pieces:
        out.extend(lines[cursor:start])
        out.extend(new)
        cursor = end
    out.extend(lines[cursor:])
    result = "\n".join(out)
    if out and (trailing or not lines):
        result += "\n"
    return result, added, removed, []
