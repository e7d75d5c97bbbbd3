"""The one exception tree (drawn in src/mcpkit/errors.py): every public exception class of
mcpkit derives from `mcpkit.McpkitError` and from one of its four branches, the root and the
errors a Client user catches are exported from `mcpkit`, and a Client's failures over real
processes and sockets are caught as `McpkitError` with the foreign cause kept."""

from __future__ import annotations

import ast
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


# --- no bare builtin raise: each one left states why --------------------------------------

BUILTIN_RAISES = frozenset({
    "ValueError", "TypeError", "RuntimeError", "KeyError", "LookupError", "Exception",
    "OSError", "ConnectionError", "TimeoutError",
})
"""The builtins mcpkit raises its own subclass of instead (`InvalidArgument` for ValueError,
`InvalidArgumentType` for TypeError, `InvalidState` for RuntimeError, …)."""
ALLOW_MARKER = "# builtin:"
"""On the raise's line or the line above, followed by the reason: a library's contract wants
the builtin, or it is caught at once in the same module, or it is an assert-like invariant."""


def unexplained_builtin_raises(source: str) -> list[tuple[int, str]]:
    """(line, exception name) of every `raise <builtin>` / `raise <builtin>(…)` in `source`
    without `ALLOW_MARKER` on its line or the line above."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Raise) or node.exc is None:
            continue
        raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if not isinstance(raised, ast.Name) or raised.id not in BUILTIN_RAISES:
            continue
        nearby = lines[max(0, node.lineno - 2) : node.lineno]
        if not any(ALLOW_MARKER in line for line in nearby):
            found.append((node.lineno, raised.id))
    return sorted(found)


def test_the_scan_finds_a_builtin_raise_and_honours_the_marker() -> None:
    source = (
        "def f(x):\n"
        "    if x:\n"
        "        raise ValueError('bad')\n"
        "    # builtin: caught just below\n"
        "    raise TypeError\n"
        "def g():\n"
        "    raise RuntimeError('x')  # builtin: a library wants it\n"
        "def h():\n"
        "    raise KeyError(\n"
        "        'multi-line')\n"
        "def i():\n"
        "    raise InvalidArgument('ours')\n"
    )
    assert unexplained_builtin_raises(source) == [(3, "ValueError"), (9, "KeyError")]


def test_every_builtin_raise_in_mcpkit_states_its_reason() -> None:
    """mcpkit raises the tree's classes (which keep the builtin as a base where callers catch
    it); a builtin raise needs `# builtin: <reason>` so a new one is a decision, not a slip."""
    unexplained = []
    allowed = 0
    for path in sorted(SRC.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        found = unexplained_builtin_raises(source)
        unexplained += [f"{path.relative_to(SRC.parent)}:{line}: raise {name}"
                        for line, name in found]
        allowed += source.count(ALLOW_MARKER)
    assert not unexplained, (
        "raise mcpkit's own exception (mcpkit.errors: InvalidArgument, InvalidArgumentType, "
        "InvalidState, …) or say why the builtin is needed with "
        f"'{ALLOW_MARKER} <reason>':\n" + "\n".join(unexplained))
    assert allowed > 0  # the scan reads the real sources (the few kept ones are marked)


def test_usage_branches_keep_their_builtin_bases() -> None:
    assert issubclass(mcpkit.InvalidArgument, mcpkit.UsageError)
    assert issubclass(mcpkit.InvalidArgument, ValueError)
    assert issubclass(mcpkit.InvalidArgumentType, mcpkit.UsageError)
    assert issubclass(mcpkit.InvalidArgumentType, TypeError)
    assert issubclass(mcpkit.InvalidState, mcpkit.UsageError)
    assert issubclass(mcpkit.InvalidState, RuntimeError)


# --- behaviour: a bad argument at each public boundary is a UsageError -----------------------


def test_client_with_a_url_urlsplit_cannot_split_keeps_the_cause() -> None:
    with pytest.raises(mcpkit.UsageError) as caught:
        mcpkit.Client("http://[::1/mcp")
    assert isinstance(caught.value, mcpkit.InvalidArgument)
    assert isinstance(caught.value, ValueError)  # what callers caught before the tree
    assert "http://[::1/mcp" in str(caught.value) and "IPv6" in str(caught.value)
    cause = caught.value.__cause__
    assert isinstance(cause, ValueError) and not isinstance(cause, mcpkit.McpkitError)


@pytest.mark.parametrize(("target", "kwargs", "kind", "builtin"), [
    ("server.py", {}, mcpkit.InvalidArgument, ValueError),            # a command as a string
    ("ftp://127.0.0.1/mcp", {}, mcpkit.InvalidArgument, ValueError),  # a scheme it cannot speak
    (42, {}, mcpkit.InvalidArgumentType, TypeError),                   # neither URL nor command
    ("http://127.0.0.1:1/mcp", {"era": "1999-01-01"}, mcpkit.InvalidArgument, ValueError),
    ("http://127.0.0.1:1/mcp", {"no_such_option": 1}, mcpkit.InvalidArgumentType, TypeError),
])
def test_client_arguments_are_usage_errors(target: object, kwargs: dict[str, object],
                                           kind: type[Exception],
                                           builtin: type[Exception]) -> None:
    with pytest.raises(kind) as caught:
        mcpkit.Client(target, **kwargs)  # type: ignore[arg-type]
    assert isinstance(caught.value, mcpkit.UsageError) and isinstance(caught.value, builtin)


@pytest.mark.anyio
async def test_client_url_with_a_port_out_of_range_fails_as_a_usage_error() -> None:
    """The port is read when the transport opens (as before); no connection is attempted."""
    with anyio.fail_after(LIMIT_S), pytest.raises(mcpkit.InvalidArgument) as caught:
        async with mcpkit.Client("http://127.0.0.1:99999/mcp"):
            pass
    assert "99999" in str(caught.value)
    assert isinstance(caught.value.__cause__, ValueError)


class Opaque:
    """A parameter type msgspec has no JSON Schema for (module level: the hints of a tool are
    resolved in its module)."""


def test_server_decorators_refuse_what_they_cannot_describe() -> None:
    server = mcpkit.Server("exception-tree")

    def variadic(*names: str) -> str:
        return ""

    def opaque(value: Opaque) -> str:
        return ""

    with pytest.raises(mcpkit.InvalidArgumentType, match=r"\*args/\*\*kwargs"):
        server.tool()(variadic)
    with pytest.raises(mcpkit.InvalidArgumentType, match="opaque") as caught:
        server.tool()(opaque)
    assert isinstance(caught.value, TypeError)
    assert isinstance(caught.value.__cause__, TypeError)  # msgspec's
    assert not isinstance(caught.value.__cause__, mcpkit.McpkitError)
    with pytest.raises(mcpkit.InvalidArgumentType, match="no parameter for city"):
        server.resource("weather://{city}")(lambda: "sunny")
    with pytest.raises(mcpkit.InvalidArgument, match="invalid JSON Schema") as bad_schema:
        server.add_tool(lambda: "", name="bad", input_schema={"type": 5})
    assert bad_schema.value.__cause__ is not None

    def unresolved(city: Nowhere) -> str:  # type: ignore[name-defined]  # noqa: F821
        return ""

    for register in (server.tool(), server.prompt()):
        with pytest.raises(mcpkit.InvalidArgumentType, match="Nowhere") as unknown:
            register(unresolved)
        assert isinstance(unknown.value.__cause__, NameError)
    assert not server.tools and not server.prompts  # nothing half-registered


def test_manager_config_errors_are_usage_errors(tmp_path: Path) -> None:
    from mcpkit.manager.config import ConfigError, ServerConfig
    from mcpkit.manager.configfile import read_servers

    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {"bad": {"type": "http", "url": "http://[::1/mcp"}}}')
    with pytest.raises(mcpkit.UsageError) as caught:
        read_servers(config, {}, "project")
    assert isinstance(caught.value, ConfigError) and isinstance(caught.value, ValueError)
    assert "bad" in str(caught.value) and "http://[::1/mcp" in str(caught.value)
    assert isinstance(caught.value.__cause__, ValueError)
    twice = [ServerConfig("same", "stdio", command="true")] * 2
    with pytest.raises(mcpkit.UsageError, match="duplicate server name"):
        mcpkit.ServerManager(twice)


def test_limits_out_of_range_are_invalid_arguments() -> None:
    from mcpkit.client.listing import ListLimits
    from mcpkit.client.session import InboundLimits
    from mcpkit.manager.budget import cut_text
    from mcpkit.transports.server.http.replay import ReplayLimits

    for build in (lambda: ListLimits(pages=0), lambda: InboundLimits(requests=0),
                  lambda: ReplayLimits(total=0), lambda: cut_text("text", 1)):
        with pytest.raises(mcpkit.InvalidArgument):
            build()
