"""The one exception tree (drawn in src/mcpkit/errors.py): every public exception class of
mcpkit derives from `mcpkit.McpkitError` and from one of its four branches, the root and the
errors a Client user catches are exported from `mcpkit`, and a Client's failures over real
processes and sockets are caught as `McpkitError` with the foreign cause kept."""

from __future__ import annotations

import importlib
import inspect
import socket
import sys
from pathlib import Path

import anyio
import pytest

import mcpkit
from mcpkit import errors

SRC = Path(mcpkit.__file__).parent
SLOW_SERVER = Path(__file__).parent / "transports" / "slow_server.py"
BRANCHES = (errors.UsageError, errors.PeerError, errors.TransportError, errors.Timeout)
LIMIT_S = 20.0
"""Liveness bound of one behaviour test (each normally takes well under a second or two)."""


def module_names() -> list[str]:
    """Every module of mcpkit, found by its file (namespace packages such as
    transports/client have no `__init__.py`, which `pkgutil.walk_packages` skips), except the
    entry point and the alembic migrations (scripts alembic runs, not modules)."""
    names = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if ".db.migrations" not in name and name != "mcpkit.__main__":
            names.append(name)
    return names


def defined_exceptions() -> list[type[BaseException]]:
    """Every exception class defined in a module of mcpkit (each module imported)."""
    found: set[type[BaseException]] = set()
    for name in module_names():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (inspect.isclass(value) and issubclass(value, BaseException)
                    and value.__module__ == name):
                found.add(value)
    return sorted(found, key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


EXCEPTIONS = defined_exceptions()
PUBLIC = [cls for cls in EXCEPTIONS if not cls.__name__.startswith("_")]


def test_every_module_is_found_and_imported() -> None:
    names = module_names()
    assert "mcpkit.transports.client.h1" in names  # inside a namespace package
    assert all(name in sys.modules for name in names)
    assert len(PUBLIC) > 50


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda cls: f"{cls.__module__}.{cls.__qualname__}")
def test_public_exception_derives_from_the_root(cls: type[BaseException]) -> None:
    assert issubclass(cls, mcpkit.McpkitError), f"{cls} is not an McpkitError"


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda cls: f"{cls.__module__}.{cls.__qualname__}")
def test_public_exception_is_on_a_branch(cls: type[BaseException]) -> None:
    if cls is errors.McpkitError or cls in BRANCHES:
        return
    assert issubclass(cls, BRANCHES), f"{cls} says nobody's fault: derive it from a branch"


def test_there_is_one_root() -> None:
    """Apart from private control-flow exceptions, no class of mcpkit starts a tree of its
    own: the root is the only one none of whose bases is mcpkit's."""
    roots = [cls for cls in PUBLIC
             if not any(base.__module__.startswith("mcpkit") for base in cls.__bases__)]
    assert roots == [errors.McpkitError]
    assert errors.McpkitError.__bases__ == (Exception,)
    assert all(branch.__bases__[0] is errors.McpkitError for branch in BRANCHES)


def test_builtin_bases_are_kept_where_callers_catch_them() -> None:
    from mcpkit.client import RequestTimeout
    from mcpkit.netguard import BlockedAddress
    from mcpkit.transports.client.base import TransportError

    assert TransportError is mcpkit.TransportError  # one class, importable from both
    assert issubclass(mcpkit.TransportError, ConnectionError)
    assert issubclass(BlockedAddress, OSError)  # aiohttp's resolver wraps OSErrors only
    assert issubclass(RequestTimeout, TimeoutError)
    assert issubclass(mcpkit.Timeout, TimeoutError)


def test_exported_members() -> None:
    """Like httpx's test_exported_members: `__all__` lists exactly the public exports, each
    importable from `mcpkit`, and `dir(mcpkit)` shows them before they are loaded."""
    assert mcpkit.__all__ == sorted(mcpkit.__all__)
    assert len(set(mcpkit.__all__)) == len(mcpkit.__all__)
    lazy = set(vars(mcpkit)["_EXPORTS"])
    assert set(mcpkit.__all__) == lazy | {"__version__"}
    assert set(mcpkit.__all__) <= set(dir(mcpkit))
    for name in mcpkit.__all__:
        assert getattr(mcpkit, name) is not None
    namespace: dict[str, object] = {}
    exec("from mcpkit import *", namespace)
    assert set(mcpkit.__all__) <= set(namespace)
    # Whatever else `import mcpkit` holds publicly is a submodule or the module's own
    # tooling, not an export left out.
    tooling = {"annotations", "importlib", "TYPE_CHECKING", "Any"}
    unlisted = {name for name in vars(mcpkit)
                if not name.startswith("_") and name not in mcpkit.__all__} - tooling
    assert all(inspect.ismodule(vars(mcpkit)[name]) for name in unlisted), unlisted


def test_tree_and_client_errors_are_exported() -> None:
    from mcpkit.client import ClientError, ConnectionClosed, RequestTimeout, ServerError
    from mcpkit.protocol.errors import McpError, ProtocolError

    assert mcpkit.McpkitError is errors.McpkitError
    assert (mcpkit.UsageError, mcpkit.PeerError, mcpkit.TransportError, mcpkit.Timeout) \
        == BRANCHES
    assert (mcpkit.McpError, mcpkit.ProtocolError, mcpkit.ServerError, mcpkit.ClientError,
            mcpkit.RequestTimeout, mcpkit.ConnectionClosed) == (
        McpError, ProtocolError, ServerError, ClientError, RequestTimeout, ConnectionClosed)


def test_root_module_imports_nothing_of_mcpkit() -> None:
    """`import mcpkit` stays cheap: the root of the tree loads no other mcpkit module."""
    code = ("import sys, mcpkit; mcpkit.McpkitError; mcpkit.Timeout; "
            "print(sorted(m for m in sys.modules if m.startswith('mcpkit')))")
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=LIMIT_S).stdout
    assert out.strip() == "['mcpkit', 'mcpkit.errors']"


# --- behaviour: what a Client user catches --------------------------------------------------


def unused_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then closed, without listen())."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.anyio
@pytest.mark.parametrize("scheme", ["http", "ws"])
async def test_refused_connection_is_an_mcpkit_error_with_its_cause(scheme: str) -> None:
    url = f"{scheme}://127.0.0.1:{unused_port()}/mcp"
    with anyio.fail_after(LIMIT_S), pytest.raises(mcpkit.McpkitError) as caught:
        async with mcpkit.Client(url):
            pass
    assert isinstance(caught.value, mcpkit.TransportError)
    assert "127.0.0.1" in str(caught.value)
    cause = caught.value.__cause__
    assert cause is not None and not isinstance(cause, mcpkit.McpkitError)  # the foreign one
    assert isinstance(cause, OSError)  # aiohttp's connector error is an OSError


@pytest.mark.anyio
async def test_server_error_reply_is_an_mcpkit_error() -> None:
    command = [sys.executable, str(SLOW_SERVER), "--transport", "stdio"]
    with anyio.fail_after(LIMIT_S):
        async with mcpkit.Client(command) as client:
            with pytest.raises(mcpkit.McpkitError) as caught:
                await client.request("no/such-method", {})
    assert isinstance(caught.value, mcpkit.ServerError)
    assert isinstance(caught.value, mcpkit.PeerError)
    assert caught.value.code == -32601  # type: ignore[attr-defined]
    assert "no/such-method" in str(caught.value)


@pytest.mark.anyio
async def test_timeout_is_an_mcpkit_error() -> None:
    command = [sys.executable, str(SLOW_SERVER), "--transport", "stdio"]
    with anyio.fail_after(LIMIT_S):
        async with mcpkit.Client(command) as client:
            with pytest.raises(mcpkit.McpkitError) as caught:
                await client.call_tool("slow", {"seconds": 10}, timeout=0.3)
    assert isinstance(caught.value, mcpkit.RequestTimeout)
    assert isinstance(caught.value, mcpkit.Timeout) and isinstance(caught.value, TimeoutError)
    assert "tools/call" in str(caught.value)
