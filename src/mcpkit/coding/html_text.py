"""HTML turned into readable text, or simple Markdown, for the `fetch` tool: headings,
paragraphs, links, images, lists, code, emphasis, quotes and tables. Scripts, styles and the
head are left out. Built on the standard library's tolerant `HTMLParser` (unclosed tags are
fine); it does no IO."""

from __future__ import annotations

import re
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urljoin

_Attrs = dict[str, str | None]
"""A tag's attributes by name."""

SKIP_TAGS = frozenset({"script", "style", "noscript", "template", "title", "svg", "iframe",
                       "object", "canvas", "select", "button"})
BLOCK_TAGS = frozenset({
    "p", "div", "section", "article", "header", "footer", "nav", "main", "aside", "form",
    "fieldset", "figure", "figcaption", "address", "details", "summary", "table", "thead",
    "tbody", "tfoot", "caption", "dl", "dt", "dd", "center", "body", "html",
})
HEADINGS = {f"h{n}": n for n in range(1, 7)}
VOID_TAGS = frozenset({"br", "hr", "img", "input", "meta", "link", "area", "base", "col",
                       "embed", "source", "track", "wbr"})
SPACES = re.compile(r"[ \t\r\n\f\v]+")


class HtmlConverter(HTMLParser):
    """HTML to readable text (`markdown=False`) or simple Markdown: headings, paragraphs,
    links, images, lists, code, emphasis, quotes and tables. Scripts, styles and the head
    are left out; tolerant of unclosed tags, as the stdlib parser is."""

    def __init__(self, *, markdown: bool, base_url: str = "") -> None:
        super().__init__(convert_charrefs=True)
        self.md = markdown
        self.base_url = base_url
        self.parts: list[str] = []
        self.pending = 0  # newlines owed before the next text
        self.trailing_newlines = 0  # newlines at the end of what is written
        self.at_line_start = True
        self.space = False  # whitespace seen since the last text
        self.skip: list[str] = []
        self.pre = 0
        self.lists: list[list[Any]] = []  # [kind ("ul"/"ol"), next number]
        self.quote = 0
        self.links: list[str | None] = []
        self.row_cells = 0
        self.rows = 0
        self.header_done = False
        self.title_seen = False

    # -- output --

    def prefix(self) -> str:
        indent = "  " * max(0, len(self.lists) - 1) if self.lists else ""
        quote = "> " * self.quote if self.md else "  " * self.quote
        return quote + indent

    def block(self, newlines: int = 2) -> None:
        if self.parts:
            self.pending = max(self.pending, newlines)
        self.space = False

    def emit(self, text: str, *, raw: bool = False) -> None:
        """Write `text`: collapsed inline text, or `raw` (pre blocks, markup)."""
        if not text:
            return
        self.emit_pending()
        if self.at_line_start:
            self.write(self.prefix())
            self.at_line_start = False
        elif self.space and not raw:
            self.write(" ")
        self.space = False
        self.write(text)

    def emit_pending(self) -> None:
        if self.pending:
            self.write("\n" * max(0, self.pending - self.trailing_newlines))
            self.pending = 0
            self.at_line_start = True
            self.space = False

    def write(self, text: str) -> None:
        if not text:
            return
        self.parts.append(text)
        stripped = text.rstrip("\n")
        if stripped:
            self.trailing_newlines = len(text) - len(stripped)
        else:
            self.trailing_newlines += len(text)

    def emit_markup(self, text: str) -> None:
        """Inline markup like `**` or `[`: keeps a space seen before it outside it."""
        if self.space and not self.at_line_start and not self.pending:
            self.write(" ")
            self.space = False
        self.emit(text, raw=True)

    # -- parser callbacks --

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.skip:
            if tag == self.skip[-1]:
                self.skip.append(tag)
            return
        if tag in SKIP_TAGS:
            self.skip.append(tag)
            return
        if tag in HEADINGS:
            self.block()
            if self.md:
                self.emit("#" * HEADINGS[tag] + " ", raw=True)
        elif tag in BLOCK_TAGS:
            self.block()
        else:
            start = _START_TAGS.get(tag)
            if start is not None:
                start(self, tag, dict(attrs))

    # -- one opening tag each (see `_START_TAGS`) --

    def start_br(self, tag: str, attr: _Attrs) -> None:
        if self.parts:
            self.write("\n")
            self.at_line_start = True
        self.space = False

    def start_hr(self, tag: str, attr: _Attrs) -> None:
        self.block()
        self.emit("---" if self.md else "-" * 20, raw=True)
        self.block()

    def start_pre(self, tag: str, attr: _Attrs) -> None:
        self.block()
        if self.md:
            lang = ""
            for cls in (attr.get("class") or "").split():
                if cls.startswith(("language-", "lang-")):
                    lang = cls.split("-", 1)[1]
            self.emit(f"```{lang}", raw=True)
            self.block(1)
        self.pre += 1

    def start_code(self, tag: str, attr: _Attrs) -> None:
        if not self.pre and self.md:
            self.emit_markup("`")

    def start_list(self, tag: str, attr: _Attrs) -> None:
        self.block(1 if self.lists else 2)
        self.lists.append(["ol" if tag == "ol" else "ul", 1])

    def start_li(self, tag: str, attr: _Attrs) -> None:
        self.block(1)
        if not self.lists:
            self.lists.append(["ul", 1])
        kind = self.lists[-1]
        if kind[0] == "ol":
            marker = f"{kind[1]}. "
            kind[1] += 1
        else:
            marker = "- " if self.md else "• "
        self.emit(marker, raw=True)

    def start_blockquote(self, tag: str, attr: _Attrs) -> None:
        self.block()
        self.quote += 1

    def start_strong(self, tag: str, attr: _Attrs) -> None:
        if self.md:
            self.emit_markup("**")

    def start_em(self, tag: str, attr: _Attrs) -> None:
        if self.md:
            self.emit_markup("*")

    def start_a(self, tag: str, attr: _Attrs) -> None:
        href = attr.get("href")
        if self.md and href and not href.lower().startswith(("javascript:", "data:")):
            self.links.append(urljoin(self.base_url, href))
            self.emit_markup("[")
        else:
            self.links.append(None)

    def start_img(self, tag: str, attr: _Attrs) -> None:
        src = attr.get("src")
        if self.md and src and not src.lower().startswith("data:"):
            alt = SPACES.sub(" ", attr.get("alt") or "").strip()
            self.emit_markup(f"![{alt}]({urljoin(self.base_url, src)})")

    def start_tr(self, tag: str, attr: _Attrs) -> None:
        self.block(1)
        self.row_cells = 0

    def start_cell(self, tag: str, attr: _Attrs) -> None:
        if self.row_cells:
            self.emit(" | ", raw=True)
        elif self.md:
            self.emit("| ", raw=True)
        self.row_cells += 1
        self.space = False

    # -- the other parser callbacks --

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID_TAGS:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if self.skip:
            if tag == self.skip[-1]:
                self.skip.pop()
            return
        if tag in HEADINGS or tag in BLOCK_TAGS:
            self.block()
        elif tag == "pre":
            if self.pre:
                self.pre -= 1
                if self.md:
                    self.block(1)
                    self.emit("```", raw=True)
                self.block()
        elif tag == "code" and not self.pre:
            if self.md:
                self.emit("`", raw=True)
        elif tag in ("ul", "ol", "menu"):
            if self.lists:
                self.lists.pop()
            self.block(1 if self.lists else 2)
        elif tag == "li":
            self.block(1)
        elif tag == "blockquote":
            self.quote = max(0, self.quote - 1)
            self.block()
        elif tag in ("strong", "b") and self.md:
            self.emit("**", raw=True)
        elif tag in ("em", "i") and self.md:
            self.emit("*", raw=True)
        elif tag == "a":
            href = self.links.pop() if self.links else None
            if href is not None:
                self.emit(f"]({href})", raw=True)
        elif tag == "tr":
            if self.md and self.row_cells:
                self.emit(" |", raw=True)
                if not self.header_done:
                    self.header_done = True
                    self.block(1)
                    self.emit("|" + " --- |" * self.row_cells, raw=True)
            self.block(1)
        elif tag == "table":
            self.header_done = False
            self.block()

    def handle_data(self, data: str) -> None:
        if self.skip:
            return
        if self.pre:
            lines = data.split("\n")
            for i, line in enumerate(lines):
                if i:
                    if self.pending:  # the newline right after <pre> (or ```) is owed
                        self.emit_pending()
                    else:
                        self.write("\n")
                    self.at_line_start = True
                if line:
                    self.emit(line, raw=True)
            return
        if not data:
            return
        collapsed = SPACES.sub(" ", data)
        if collapsed[0] == " ":
            self.space = True
        words = collapsed.strip(" ")
        if words:
            self.emit(words)
            self.space = collapsed[-1] == " "

    def result(self) -> str:
        self.close()
        lines = [line.rstrip() for line in "".join(self.parts).split("\n")]
        text = "\n".join(lines)
        return re.sub(r"\n{3,}", "\n\n", text).strip("\n")


_START_TAGS: dict[str, Callable[[HtmlConverter, str, _Attrs], None]] = {
    "br": HtmlConverter.start_br, "hr": HtmlConverter.start_hr, "pre": HtmlConverter.start_pre,
    "code": HtmlConverter.start_code, "ul": HtmlConverter.start_list,
    "ol": HtmlConverter.start_list, "menu": HtmlConverter.start_list,
    "li": HtmlConverter.start_li, "blockquote": HtmlConverter.start_blockquote,
    "strong": HtmlConverter.start_strong, "b": HtmlConverter.start_strong,
    "em": HtmlConverter.start_em, "i": HtmlConverter.start_em, "a": HtmlConverter.start_a,
    "img": HtmlConverter.start_img, "tr": HtmlConverter.start_tr,
    "td": HtmlConverter.start_cell, "th": HtmlConverter.start_cell,
}
"""What an opening tag does, past the skipped ones, the headings and the plain blocks."""


def html_to_text(html: str, *, markdown: bool = False, base_url: str = "") -> str:
    converter = HtmlConverter(markdown=markdown, base_url=base_url)
    converter.feed(html)
    return converter.result()
