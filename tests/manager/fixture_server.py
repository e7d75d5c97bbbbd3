"""A small MCP server for the manager's tests, run as a real process:

    python tests/manager/fixture_server.py --name NAME [--delay S] [--fail] [--state DIR]
                                           [--http PORT] [--tools a,b,c]

- `--delay S` sleeps before serving (a slow server); `--fail` writes to stderr and exits 3;
- tools: `echo` (read-only), `write_note` (not read-only), `env` (read-only, returns an
  environment variable), `crash` (exits the process), `flaky_read` / `flaky_write` (exit the
  process on their first call — recorded in `--state DIR` — and answer afterwards),
  `add_tool` (registers `extra` and says the list changed), `big` (a long text);
- `--tools` keeps only the named tools; `--http PORT` serves Streamable HTTP instead of stdio.
Every start appends a line to `DIR/starts` so tests can count restarts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from mcpkit import Server


def build(name: str, state: Path | None, keep: set[str] | None) -> Server:
    server = Server(f"fixture-{name}", "1.0.0")
    read_only = {"readOnlyHint": True}

    def first_time(marker: str) -> bool:
        if state is None:
            return False
        path = state / marker
        if path.exists():
            return False
        path.write_text("x")
        return True

    async def echo(text: str) -> str:
        """Echo the text back."""
        return f"{name}: {text}"

    async def write_note(text: str) -> str:
        """Pretend to write a note."""
        return f"noted {text}"

    async def env(variable: str) -> str:
        """One environment variable of the server process ('<unset>' when unset)."""
        return os.environ.get(variable, "<unset>")

    async def crash() -> str:
        """Exit the server process."""
        os._exit(7)

    async def flaky_read(text: str) -> str:
        """Exits the process the first time, echoes afterwards."""
        if first_time("flaky_read"):
            os._exit(7)
        return f"read {text}"

    async def flaky_write(text: str) -> str:
        """Exits the process the first time, echoes afterwards."""
        if first_time("flaky_write"):
            os._exit(7)
        return f"wrote {text}"

    async def add_tool() -> str:
        """Register the tool `extra` and tell the client the list changed."""

        async def extra() -> str:
            return "extra!"

        server.add_tool(extra, name="extra", annotations=read_only)
        await server.notify_list_changed("tools")
        return "added"

    async def big(size: int) -> str:
        """A text of `size` characters, numbered lines."""
        lines = [f"line {i:06d}" for i in range(size // 12 + 1)]
        return "\n".join(lines)[:size]

    tools = [(echo, True), (write_note, False), (env, True), (crash, False),
             (flaky_read, True), (flaky_write, False), (add_tool, False), (big, True)]
    for fn, is_read_only in tools:
        if keep is None or fn.__name__ in keep:
            server.add_tool(fn, annotations=read_only if is_read_only else None)

    @server.prompt()
    def greeting(who: str) -> str:
        """Say hello."""
        return f"Hello {who} from {name}"

    @server.resource(f"fixture://{name}/about")
    def about() -> str:
        return f"about {name}"

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", default="fx")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--fail", action="store_true")
    parser.add_argument("--state", type=Path, default=None)
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--tools", default=None)
    args = parser.parse_args()
    if args.state is not None:
        args.state.mkdir(parents=True, exist_ok=True)
        with open(args.state / "starts", "a") as f:
            f.write(f"{os.getpid()}\n")
    if args.delay:
        time.sleep(args.delay)
    if args.fail:
        print(f"fixture {args.name}: cannot start (asked to fail)", file=sys.stderr)
        sys.exit(3)
    keep = set(args.tools.split(",")) if args.tools else None
    server = build(args.name, args.state, keep)
    if args.http is not None:
        server.run_http(port=args.http, log_level="warning")
    else:
        server.run_stdio()


if __name__ == "__main__":
    main()
