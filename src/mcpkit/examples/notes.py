"""An example server: a small notes store with tools, resources, a prompt and completion.

    mcpkit example --transport http --port 8000     # http://127.0.0.1:8000/mcp
    mcpkit example --transport stdio
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from mcpkit.server.context import Context
from mcpkit.server.server import Server


class Note(msgspec.Struct):
    title: str
    body: str


def build_server() -> Server:
    server = Server(
        "mcpkit-notes",
        "1.0.0",
        title="Notes",
        instructions="Keeps short notes. Use add_note, then read them as note:// resources.",
    )
    notes: dict[str, Note] = {}

    async def add_note(
        title: Annotated[str, "A short, unique title"],
        body: Annotated[str, "The text of the note"],
        ctx: Context,
    ) -> Note:
        """Add (or replace) a note."""
        notes[title] = Note(title, body)
        await ctx.info(f"saved note {title!r}")
        await ctx.server.notify_list_changed("resources")
        return notes[title]

    def list_notes() -> list[str]:
        """The titles of all notes."""
        return sorted(notes)

    def read_note(title: str) -> str:
        """The body of one note."""
        note = notes.get(title)
        return note.body if note else ""

    def summarize(style: Annotated[str, "e.g. 'bullet points' or 'one sentence'"]) -> str:
        """Ask the model to summarize every note."""
        joined = "\n".join(f"- {n.title}: {n.body}" for n in notes.values()) or "(no notes)"
        return f"Summarize these notes as {style}:\n{joined}"

    def complete_style(argument: str, value: str, context: dict[str, str]) -> list[str]:
        return [s for s in ("bullet points", "one sentence", "a haiku") if s.startswith(value)]

    server.add_tool(add_note, annotations={"destructiveHint": False, "idempotentHint": True})
    server.add_tool(list_notes, annotations={"readOnlyHint": True})
    server.add_resource_template(read_note, "note://{title}", mime_type="text/plain")
    server.add_prompt(summarize)
    server.add_completion(complete_style, prompt="summarize")
    return server
