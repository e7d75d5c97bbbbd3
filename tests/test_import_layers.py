"""Layering: the protocol core does no IO, the server does not depend on the client, and a
stdio server does not load the HTTP stack."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "mcpkit"

ALLOWED_STDLIB = {
    "__future__",
    "base64",
    "binascii",
    "collections",
    "dataclasses",
    "enum",
    "functools",
    "hashlib",
    "hmac",
    "itertools",
    "json",
    "math",
    "re",
    "secrets",
    "string",
    "time",
    "types",
    "typing",
    "typing_extensions",
    "abc",
    "datetime",
    "decimal",
    "uuid",
    "copy",
    "operator",
    "textwrap",
    "keyword",
    "numbers",
    "contextlib",
    "warnings",
    "struct",
    "unicodedata",
}
FORBIDDEN = {
    "asyncio",
    "anyio",
    "socket",
    "subprocess",
    "httpx",
    "aiohttp",
    "starlette",
    "uvicorn",
    "uvloop",
    "trio",
    "threading",
    "selectors",
    "ssl",
    "http",
    "urllib",
    "multiprocessing",
    "signal",
    "requests",
    "websockets",
}


def imported_modules(path: Path) -> list[tuple[str, int]]:
    """(absolute module name, level) of each import in a file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.module or "", node.level))
    return found


PROTOCOL_FILES = sorted((SRC / "protocol").rglob("*.py"))


def test_protocol_has_modules() -> None:
    assert len(PROTOCOL_FILES) > 10


@pytest.mark.parametrize("path", PROTOCOL_FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_protocol_imports_only_pure_modules(path: Path) -> None:
    for module, level in imported_modules(path):
        top = module.split(".")[0]
        assert top not in FORBIDDEN, f"{path}: imports {module}"
        if level:  # relative imports stay inside the package
            continue
        ok = top in ALLOWED_STDLIB or top == "msgspec" or module.startswith("mcpkit.protocol")
        assert ok, f"{path}: imports {module}"


def test_import_checker_catches_forbidden(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import anyio\nfrom asyncio import sleep\n")
    assert imported_modules(bad) == [("anyio", 0), ("asyncio", 0)]


@pytest.mark.parametrize(
    "path", sorted((SRC / "server").rglob("*.py")), ids=lambda p: str(p.relative_to(SRC))
)
def test_server_does_not_import_client(path: Path) -> None:
    for module, level in imported_modules(path):
        assert not module.startswith("mcpkit.client"), f"{path}: imports {module}"
        assert not (level >= 2 and module.startswith("client")), f"{path}: imports ..{module}"


def test_server_import_does_not_load_the_http_stack() -> None:
    code = (
        "import mcpkit.server.server, mcpkit.transports.server.stdio, sys;"
        "print(sorted(m for m in ('uvicorn', 'starlette', 'aiohttp', 'httpx', 'mcpkit.client',"
        " 'mcpkit.transports.server.http.app') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert out.stdout.strip() == "[]"
    plain = subprocess.run(
        [sys.executable, "-c", "import mcpkit.server.server, sys; print('uvicorn' in sys.modules)"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert plain.stdout.strip() == "False"


def test_protocol_import_loads_no_io_library() -> None:
    code = (
        "import sys; before = set(sys.modules);"
        "import mcpkit.protocol.jsonrpc, mcpkit.protocol.headers, mcpkit.protocol.sse,"
        " mcpkit.protocol.request_state, mcpkit.protocol.framing, mcpkit.protocol.meta,"
        " mcpkit.protocol.pagination, mcpkit.protocol.types;"
        "new = {m.split('.')[0] for m in set(sys.modules) - before};"
        f"print(sorted(new & set({sorted(FORBIDDEN)!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout


@pytest.mark.parametrize(
    "path", sorted((SRC / "manager").rglob("*.py")), ids=lambda p: str(p.relative_to(SRC))
)
def test_manager_sits_on_the_client_not_the_server(path: Path) -> None:
    for module, _level in imported_modules(path):
        assert not module.startswith(("mcpkit.server", "mcpkit.coding")), f"{path}: {module}"
