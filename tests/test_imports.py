"""The package's import graph: no circle between modules (lazy imports and
type-checking imports count), and no package imports one above it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mneme_cc"

#: Floors, top first: a package imports its own floor's and lower floors'
#: packages only.  Modules at the package's root (errors, fileio, ...) are
#: the ground floor.
FLOORS = [{"cli"}, {"tune"}, {"triage", "deploy"}, {"replay"}, {"record"}, {"drivers"}]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The package's modules that `path` imports, wherever the import stands."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            # `from pkg import module` imports the module; `from pkg import name`, the package.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                       for alias in node.names]
        for target in targets:
            while target and target not in modules:  # `from pkg import name`: the package
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {name: imports_of(path, modules) for name, path in paths.items()}


def floor(module: str) -> int:
    parts = module.split(".")
    package = parts[1] if len(parts) > 1 else ""
    package = {"build": "drivers"}.get(package, package)  # the old name of drivers
    for level, packages in enumerate(FLOORS):
        if package in packages:
            return level
    return len(FLOORS)  # the ground floor


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_through_others():
    edges = graph()
    # A package's __init__ re-exports its modules and the modules import their
    # package's siblings, not the package: the face is not part of a circle.
    assert cycles(edges) == []


def test_no_package_imports_one_above_it():
    upward = sorted((module, target) for module, targets in graph().items()
                    for target in targets if floor(target) < floor(module))
    assert upward == []
