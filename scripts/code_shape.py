"""Figures of the code's shape, to compare a change before and after:

    python scripts/code_shape.py [SRC_DIR]      # default: src/mcpkit next to this script

Prints, for the package:
- function length (lines from `def` to the body's end): median, p90, maximum, and how many
  exceed 100 lines;
- import circles: strongly connected groups of modules that import each other (any import,
  lazy ones included), and the same between subpackages (mcpkit.server, mcpkit.transports, …).
  One import is left out, and counted apart: a `Server`'s `run_*` / `asgi_app` helper
  importing, in its body, the server transport it starts - the one sanctioned reach of the
  server up to the transports that sit above it (as an ASGI app's `run()` importing uvicorn);
- exception classes defined in mcpkit and their roots (classes none of whose bases is mcpkit's);
- `Client`: lines of client/client.py, constructor parameters, instance attributes.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path

DEFAULT_SRC = Path(__file__).resolve().parent.parent / "src" / "mcpkit"


def module_name(src: Path, path: Path) -> str:
    parts = ("mcpkit", *path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def parsed(src: Path) -> Iterator[tuple[str, Path, ast.Module]]:
    for path in sorted(src.rglob("*.py")):
        yield module_name(src, path), path, ast.parse(path.read_text(), filename=str(path))


def function_lengths(trees: list[tuple[str, Path, ast.Module]]) -> list[int]:
    return [
        (node.end_lineno or node.lineno) - node.lineno + 1
        for _name, _path, tree in trees
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def resolve(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except those under `if TYPE_CHECKING:` (imports for the type checker only)."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            yield from (node for orelse in child.orelse for node in ast.walk(orelse))
            continue
        yield child
        yield from runtime_nodes(child)


RUN_HELPERS = ("run_", "asgi_app")
"""The server's helpers that start a server transport (lazily, in their body)."""
SERVER_TRANSPORTS = "mcpkit.transports.server"


def run_helper_imports(module: str, tree: ast.AST) -> set[int]:
    """The ids of the import nodes in the body of a `mcpkit.server` module's run helpers."""
    if not module.startswith("mcpkit.server."):
        return set()
    return {
        id(node)
        for function in ast.walk(tree)
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        and function.name.startswith(RUN_HELPERS)
        for node in ast.walk(function)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    }


def import_graph(
    trees: list[tuple[str, Path, ast.Module]], run_helpers: set[tuple[str, str]] | None = None
) -> dict[str, set[str]]:
    """Runtime imports (lazy ones included) between mcpkit's modules. The package root
    `mcpkit` is a lazy facade over the public API, so its own imports are left out, and so
    are the server's run helpers' imports of server transports (added to `run_helpers`,
    when given, as (module, imported module))."""
    known = {name for name, _path, _tree in trees}
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path, tree in trees:
        if name == "mcpkit":
            continue
        upward = run_helper_imports(name, tree)
        for node in runtime_nodes(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = resolve(name, path, node)
                # `from pkg import module` depends on that module, not on pkg's __init__
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                    for alias in node.names
                ]
            for target in targets:
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if id(node) in upward and target.startswith(SERVER_TRANSPORTS):
                    if run_helpers is not None:
                        run_helpers.add((name, target))
                elif target and target != name:
                    graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def subpackage(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        edges = packages.setdefault(subpackage(module), set())
        edges.update(subpackage(t) for t in targets if subpackage(t) != subpackage(module))
    for targets in list(packages.values()):
        for target in targets:
            packages.setdefault(target, set())
    return packages


def module_names(src: Path) -> Iterator[str]:
    """Every module under `src`, found by its file: `pkgutil.walk_packages` skips folders
    without an `__init__.py` (namespace packages such as transports/client). Not the
    entry point, nor the alembic migrations (scripts alembic runs, not modules)."""
    for path in sorted(src.rglob("*.py")):
        parts = path.relative_to(src.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if ".db.migrations" not in name and name != "mcpkit.__main__":
            yield name


def exception_classes(src: Path) -> list[type[BaseException]]:
    sys.path.insert(0, str(src.parent))
    for name in module_names(src):
        try:
            importlib.import_module(name)
        except Exception as exc:  # an optional extra missing: say so, keep counting
            print(f"  (not imported: {name}: {type(exc).__name__})")
    found = []
    for module in list(sys.modules.values()):
        if not getattr(module, "__name__", "").startswith("mcpkit"):
            continue
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                found.append(value)
    return sorted(set(found), key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


def is_root(cls: type[BaseException]) -> bool:
    return not any(base.__module__.startswith("mcpkit") for base in cls.__bases__)


def client_figures(src: Path) -> tuple[int, int, int]:
    path = src / "client" / "client.py"
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Client":
            init = next(
                f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"
            )
            args = init.args
            params = len(args.args) - 1 + len(args.kwonlyargs) + bool(args.vararg)
            params += bool(args.kwarg)
            attributes = {
                target.attr
                for sub in ast.walk(node)
                for target in _assigned(sub)
                if isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
            }
            return len(path.read_text().splitlines()), params, len(attributes)
    raise SystemExit("no class Client in client/client.py")


def _assigned(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):  # `self.a, self.b = …` assigns two attributes
        return [element for target in node.targets
                for element in (target.elts if isinstance(target, ast.Tuple) else [target])]
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return [node.target]
    return []


def main() -> None:
    src = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else DEFAULT_SRC
    trees = list(parsed(src))
    lengths = sorted(function_lengths(trees))
    p90 = lengths[int(0.9 * (len(lengths) - 1))]
    print(f"functions: {len(lengths)}; length median {statistics.median(lengths):g}, "
          f"p90 {p90}, max {lengths[-1]}, over 100 lines: {sum(n > 100 for n in lengths)}")
    run_helpers: set[tuple[str, str]] = set()
    graph = import_graph(trees, run_helpers)
    print(f"server run helpers' lazy imports of server transports (left out): "
          f"{len(run_helpers)}")
    module_circles = circles(graph)
    print(f"module circles: {len(module_circles)}")
    for group in module_circles:
        print(f"  {len(group)} modules: {', '.join(group)}")
    package_circles = circles(package_graph(graph))
    print(f"subpackage circles: {len(package_circles)}")
    for group in package_circles:
        print(f"  {', '.join(group)}")
    lines, params, attributes = client_figures(src)
    print(f"client.py: {lines} lines; Client: {params} constructor parameters, "
          f"{attributes} attributes")
    classes = exception_classes(src)
    roots = [cls for cls in classes if is_root(cls)]
    print(f"exception classes: {len(classes)}, roots: {len(roots)}")
    for cls in roots:
        bases = ", ".join(base.__name__ for base in cls.__bases__)
        print(f"  {cls.__module__}.{cls.__qualname__}({bases})")


if __name__ == "__main__":
    main()
