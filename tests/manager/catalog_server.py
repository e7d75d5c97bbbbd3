"""A stdio server for `mcpkit resources` / `prompts` tests: a text resource, a binary one,
a resource of two parts, a template and a prompt with a required and an optional argument.

    python tests/manager/catalog_server.py
"""

from __future__ import annotations

from typing import Annotated

from mcpkit import Server

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
"""The binary resource's bytes (every byte value, so a text round trip would show)."""


def build() -> Server:
    server = Server("catalog", "3.1.4", instructions="Resources and prompts for the CLI tests.")
    server.add_resource("hello from a resource", "text://hello", name="hello",
                        mime_type="text/plain", description="A greeting.")
    server.add_resource(PNG, "bin://logo.png", name="logo", mime_type="image/png")

    def pair() -> list[dict[str, str]]:
        return [{"uri": "bin://pair/1", "text": "one"}, {"uri": "bin://pair/2", "text": "two"}]

    server.add_resource(pair, "bin://pair", name="pair")

    def echo_path(path: str) -> str:
        """Echoes its path."""
        return f"path={path}"

    server.add_resource_template(echo_path, "echo://{path}", mime_type="text/plain")

    def greet(name: Annotated[str, "who to greet"], times: str = "1") -> str:
        """Greet someone."""
        return " ".join([f"hello {name}"] * int(times))

    server.add_prompt(greet)
    return server


if __name__ == "__main__":
    build().run_stdio()
