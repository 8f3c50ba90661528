"""The core is in one-way layers: no import circle among torchfix_core's modules (issue 49).

The graph is read from the source with :mod:`ast`, so it counts every import, wherever it is:
module level, inside functions (lazy imports), under ``if TYPE_CHECKING``, ``from . import x``,
``importlib.import_module("...")`` with a literal name, and the package facade's PEP 562 re-exports
(``torchfix_core._LAZY``: ``from torchfix_core import status`` depends on ``_registry``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import torchfix_core

PACKAGE = "torchfix_core"
ROOT = Path(torchfix_core.__file__).parent
#: modules that must import nothing from torchfix_core: every layer may use them
LEAVES = ("torchfix_core._import_hooks", "torchfix_core._states")


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join([PACKAGE, *parts])] = path
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the torchfix_core modules it imports (any import, lazy or not)."""
    files = _modules()
    facade: dict[str, str] = {}
    for node in ast.walk(ast.parse(files[PACKAGE].read_text())):
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["_LAZY"]:
            facade = ast.literal_eval(node.value)
    assert facade, "torchfix_core._LAZY not found: update this test's reading of the facade"

    def known(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {module: set() for module in files}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        if module == PACKAGE:
            graph[module] |= set(facade.values())
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                for alias in node.names:
                    if f"{base}.{alias.name}" in files:
                        names.append(f"{base}.{alias.name}")
                    elif base == PACKAGE and alias.name in facade:
                        names.append(facade[alias.name])
                    else:
                        names.append(base)
            elif isinstance(node, ast.Call) and ast.unparse(node.func).rpartition(".")[2] == "import_module":
                if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                    names = [node.args[0].value]
            for name in names:
                target = known(name)
                if target is not None and target != module:
                    graph[module].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph`` as ``[a, b, ..., a]``, or None when it is acyclic."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(module: str) -> list[str] | None:
        path.append(module)
        on_path.add(module)
        for target in sorted(graph[module]):
            if target in on_path:
                return path[path.index(target) :] + [target]
            if target not in done:
                cycle = visit(target)
                if cycle is not None:
                    return cycle
        on_path.discard(path.pop())
        done.add(module)
        return None

    for module in sorted(graph):
        if module not in done:
            cycle = visit(module)
            if cycle is not None:
                return cycle
    return None


def test_the_graph_sees_lazy_type_checking_and_facade_imports() -> None:
    graph = import_graph()
    assert "torchfix_core._registry" in graph["torchfix_core._activation"]  # lazy, in a function
    assert "torchfix_core._states" in graph["torchfix_core._registry"]  # module level
    assert "torchfix_core._registry" in graph["torchfix_core._doctor"]  # from torchfix_core import status
    assert "torchfix_core._registry" in graph[PACKAGE]  # the facade's re-exports


def test_find_cycle_names_the_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_torchfix_core_has_no_import_circle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle in torchfix_core: " + " -> ".join(cycle or [])


def test_the_leaves_import_nothing_from_torchfix_core() -> None:
    graph = import_graph()
    for leaf in LEAVES:
        assert graph[leaf] == set(), f"{leaf} must be a leaf; it imports {sorted(graph[leaf])}"


def test_the_registry_never_imports_activation() -> None:
    # activation reaches the registry through _registry.activate alone; the other way round is a circle
    graph = import_graph()
    assert "torchfix_core._activation" not in graph["torchfix_core._registry"]
    assert "torchfix_core._registry" in graph["torchfix_core._activation"]
