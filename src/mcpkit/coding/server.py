"""The coding tools server: an ordinary mcpkit `Server` with the tool families registered."""

from __future__ import annotations

from collections.abc import Callable

from mcpkit import __version__
from mcpkit.coding import roots
from mcpkit.coding.env import CodingEnv
from mcpkit.server.server import Server

INSTRUCTIONS = (
    "Coding tools for the workspace {root}. Paths are relative to the workspace (absolute "
    "paths must lie inside it). Read a file with `view` before you `edit` or `write` it."
)

Register = Callable[[Server, CodingEnv], None]


def tool_families() -> list[Register]:
    """The `register(server, env)` of each tool module that exists."""
    import importlib

    found: list[Register] = []
    for name in ("files", "search", "shell", "diagnostics", "fetch", "agent"):
        try:
            module = importlib.import_module(f"mcpkit.coding.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"mcpkit.coding.{name}":
                raise
            continue
        found.append(module.register)
    return found


def build_server(env: CodingEnv) -> Server:
    server = Server(
        "mcpkit-coding", __version__,
        instructions=INSTRUCTIONS.format(root=env.workspace.root),
    )
    for register in tool_families():
        register(server, env)
    roots.apply(server, env, roots.ClientRoots(env.base_workspace, env.client_roots))
    return server
