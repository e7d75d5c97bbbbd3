"""Layering: the protocol core does no IO, the server does not depend on the client, a
stdio server does not load the HTTP stack, and the server transports sit above the server,
reaching it only through the Engine's seam (no import circle between the two)."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

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
        # mcpkit.errors, the root of the exception tree, is a leaf that imports nothing.
        ok = (top in ALLOWED_STDLIB or top == "msgspec" or module.startswith("mcpkit.protocol")
              or module == "mcpkit.errors")
        assert ok, f"{path}: imports {module}"


def test_exception_root_imports_nothing() -> None:
    """The protocol layer builds on mcpkit.errors, so it must stay a leaf."""
    assert [m for m, _ in imported_modules(SRC / "errors.py")] == ["__future__"]


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


def loaded_after(imports: str, candidates: tuple[str, ...]) -> list[str]:
    """Which of `candidates` are in sys.modules after `import <imports>` in a fresh Python."""
    code = f"import sys, {imports}; print(sorted(m for m in {candidates!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    loaded: list[str] = ast.literal_eval(out.stdout.strip())
    return loaded


def test_server_import_does_not_load_the_http_stack() -> None:
    assert loaded_after(
        "mcpkit.server.server, mcpkit.transports.server.stdio",
        ("uvicorn", "starlette", "aiohttp", "httpx", "mcpkit.client",
         "mcpkit.transports.server.http.app"),
    ) == []
    assert loaded_after("mcpkit.server.server", ("uvicorn",)) == []


def test_resource_server_token_checks_load_io_only_when_used() -> None:
    """`mcpkit.server` does not load the verifiers, and `mcpkit.auth.resource` (the types a
    handler's `ctx.auth` and the HTTP gate share) loads no JOSE library; the verifiers load
    aiohttp and anyio only when they first talk to an authorization server."""
    assert loaded_after("mcpkit.server.server, mcpkit.auth.resource",
                        ("mcpkit.server.authorization", "joserfc", "aiohttp")) == []
    assert loaded_after("mcpkit.server.authorization",
                        ("aiohttp", "authlib", "anyio", "uvicorn", "mcpkit.client")) == []


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


# --- server transports sit above the server and reach it only through the Engine's seam ---


def _code_shape() -> ModuleType:
    """scripts/code_shape.py (the import graph and its circles), loaded from its file."""
    path = SRC.parent.parent / "scripts" / "code_shape.py"
    spec = importlib.util.spec_from_file_location("code_shape", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SEAM = {
    "mcpkit.server.engine",  # Engine: admit/answer, session hooks; HasEngine
    "mcpkit.server.connection",  # Connection, Channel, LegacySession
    "mcpkit.server.call",  # Call
    "mcpkit.server.admission",  # Refusal and the request-slot limits
    "mcpkit.server.resource_auth",  # ResourceAuth, StepUpRequired (a protected server)
}
"""What of `mcpkit.server` a server transport may import (engine.py's docstring)."""
SERVER_TRANSPORT_FILES = sorted((SRC / "transports" / "server").rglob("*.py"))
SERVER_FILES = sorted((SRC / "server").rglob("*.py"))


def _absolute_imports(path: Path, tree: ast.AST | None = None) -> list[tuple[ast.stmt, str]]:
    """Each import statement of a file (TYPE_CHECKING ones included) with the absolute name
    of what it imports (`from pkg import module` → pkg.module)."""
    shape = _code_shape()
    module = shape.module_name(SRC, path)
    if tree is None:
        tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[ast.stmt, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = shape.resolve(module, path, node)
            found += [(node, f"{base}.{alias.name}") for alias in node.names]
    return found


def test_no_circle_between_server_and_transports() -> None:
    """Lazy imports count, TYPE_CHECKING ones do not; the server's run helpers' imports of
    the transports they start are the one upward reach, checked on their own below."""
    shape = _code_shape()
    run_helpers: set[tuple[str, str]] = set()
    graph = shape.import_graph(list(shape.parsed(SRC)), run_helpers)
    assert run_helpers, "the server's run helpers import no server transport: update this test"
    layered = ("mcpkit.server", "mcpkit.transports")
    for group in shape.circles(graph):
        assert not any(m.startswith(layered) for m in group), f"import circle: {group}"
    for group in shape.circles(shape.package_graph(graph)):
        assert not set(layered) & set(group), f"subpackage circle: {group}"


def test_circle_finder_sees_a_circle() -> None:
    shape = _code_shape()
    graph = {"a.x": {"b.y"}, "b.y": {"a.x"}, "c.z": {"a.x"}}
    assert shape.circles(graph) == [["a.x", "b.y"]]


@pytest.mark.parametrize("path", SERVER_FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_server_reaches_transports_only_in_its_run_helpers(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    in_run_helpers = {
        id(node)
        for function in ast.walk(tree)
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        and function.name.startswith(("run_", "asgi_app"))
        for node in ast.walk(function)
    }
    for node, target in _absolute_imports(path, tree):
        if not target.startswith("mcpkit.transports"):
            continue
        assert id(node) in in_run_helpers, f"{path}: imports {target} outside a run helper"
        assert target.startswith("mcpkit.transports.server."), f"{path}: imports {target}"


def test_server_run_helpers_import_their_transport_lazily() -> None:
    path = SRC / "server" / "server.py"
    lazy = [target for _node, target in _absolute_imports(path)
            if target.startswith("mcpkit.transports.server.")]
    assert len(lazy) == 3, lazy  # run_stdio, asgi_app, run_http


@pytest.mark.parametrize("path", SERVER_TRANSPORT_FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_server_transports_reach_the_server_only_through_the_seam(path: Path) -> None:
    for _node, target in _absolute_imports(path):
        if target == "mcpkit.server" or target.startswith("mcpkit.server."):
            seam = any(target == m or target.startswith(m + ".") for m in SEAM)
            assert seam, f"{path}: imports {target} (only the Engine's seam: {sorted(SEAM)})"


# The Server's registries and the attribute that would lead to them (`tasks` is left out: a
# transport's own set of asyncio tasks has that name too).
REGISTRIES = {"server", "notifier", "tools", "prompts", "resources", "templates",
              "legacy_versions", "modern_versions", "completions", "state_codec"}


@pytest.mark.parametrize("path", SERVER_TRANSPORT_FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_server_transports_read_no_server_registry(path: Path) -> None:
    tree = ast.parse(path.read_text(), filename=str(path))
    read = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not read & REGISTRIES, f"{path}: reads {sorted(read & REGISTRIES)}"


def test_seam_modules_do_not_load_the_server_class() -> None:
    """The seam a transport imports stays below `Server` (no import chain reaches it)."""
    code = (
        "import sys, mcpkit.server.engine, mcpkit.server.connection, mcpkit.server.call,"
        " mcpkit.server.admission;"
        "print('mcpkit.server.server' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True
    )
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    "path", sorted((SRC / "auth").rglob("*.py")), ids=lambda p: str(p.relative_to(SRC))
)
def test_auth_sits_below_client_server_and_hub(path: Path) -> None:
    """`auth` holds the OAuth pieces the client, the server and the hub share: it may use
    the protocol layer and the exception tree, never the sides that use it."""
    for module, level in imported_modules(path):
        if level:  # relative imports stay inside the package
            continue
        if module.startswith("mcpkit"):
            assert module.startswith(("mcpkit.auth", "mcpkit.protocol", "mcpkit.errors")), (
                f"{path}: imports {module}")


def test_a_client_import_loads_no_http_or_oauth_stack() -> None:
    """A stdio client pays for neither aiohttp nor Authlib: `OAuth` and the HTTP transports
    load them when used."""
    assert loaded_after(
        "mcpkit.client", ("aiohttp", "authlib", "joserfc", "mcpkit.client.oauth")
    ) == []
