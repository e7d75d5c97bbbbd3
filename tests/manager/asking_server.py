"""A stdio server whose tools ask the user, for the `mcpkit call` answering tests.

    python tests/manager/asking_server.py [--legacy] [--http PORT]

- `profile`: a form (text with bounds, integer with bounds, a titled choice, a yes/no with a
  default, an optional email); returns the ElicitResult as JSON;
- `login`: URL mode, to http://127.0.0.1:9/login (never opened in the tests: --no-browser or a
  browser-less environment);
- `hostile`: a form whose message and texts carry terminal escape sequences;
- `report`: requires task execution (`execution.taskSupport: "required"`);
- `haiku`: asks the client's model (sampling).

`--legacy` offers only the session versions (the client falls back to 2025-11-25).
"""

from __future__ import annotations

import json
import sys

import anyio

from mcpkit import Context, Server
from mcpkit.server import tasks

ESC = "\x1b"
PROFILE = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "description": "As on your badge",
                 "minLength": 2, "maxLength": 40},
        "age": {"type": "integer", "title": "Age", "minimum": 0, "maximum": 150},
        "color": {"type": "string", "title": "Favourite colour",
                  "oneOf": [{"const": "r", "title": "Red"}, {"const": "g", "title": "Green"}]},
        "subscribe": {"type": "boolean", "title": "Subscribe", "default": False},
        "email": {"type": "string", "format": "email", "title": "Email"},
    },
    "required": ["name", "age", "color"],
}
HOSTILE = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "title": f"Code{ESC}]0;pwned{ESC}\\",
                 "description": f"{ESC}[2J{ESC}[31mred alert{ESC}[0m\u202eevil"},
    },
    "required": ["code"],
}


def build(legacy: bool) -> Server:
    server = Server("asking", "1.0.0")
    server.extensions[tasks.EXTENSION] = {}
    if legacy:
        # Probed with server/discover, it answers that it speaks only 2025-11-25 (as an
        # older server would): the client falls back to a 2025-11-25 session.
        server.modern_versions = ("2025-11-25",)

    async def profile(ctx: Context) -> str:
        """Asks for a profile."""
        return json.dumps(await ctx.elicit("Tell us about you", PROFILE), sort_keys=True)

    async def login(ctx: Context) -> str:
        """Sends the user to a login page."""
        answer = await ctx.elicit_url("Sign in to continue", "http://127.0.0.1:9/login",
                                      "login-1")
        return json.dumps(answer, sort_keys=True)

    async def hostile(ctx: Context) -> str:
        """A form with escape sequences."""
        message = (f"{ESC}[31mURGENT{ESC}[0m {ESC}]8;;http://evil{ESC}\\click{ESC}]8;;{ESC}\\"
                   " \x07now")
        return json.dumps(await ctx.elicit(message, HOSTILE), sort_keys=True)

    async def report(topic: str, seconds: float = 0.3) -> str:
        """A long job: must run as a task."""
        await anyio.sleep(seconds)
        return f"report on {topic}"

    async def haiku(ctx: Context) -> str:
        """Asks the client's model."""
        answer = await ctx.sample(["a haiku"], max_tokens=50)
        return json.dumps(answer)

    for fn in (profile, login, hostile, haiku):
        server.add_tool(fn)
    server.add_tool(report, task_support="required")
    return server


if __name__ == "__main__":
    built = build("--legacy" in sys.argv)
    if "--http" in sys.argv:
        built.run_http(port=int(sys.argv[sys.argv.index("--http") + 1]))
    else:
        built.run_stdio()
