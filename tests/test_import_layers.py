"""The package imports in one direction (issue 22.4, issue 31): no import cycle among the
modules of the whole package (imports inside functions count: they are cycles too, only
deferred), and the checkpoint catalogue imports nothing of rexrank.

Built from the source with `ast`, so it sees every import a module can make, not only those a
given run happens to execute. `if TYPE_CHECKING:` blocks are skipped: they never run.
"""
from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
LAYERED = ("rexrank.metrics", "rexrank.models", "rexrank.llm", "rexrank.radgraph")
CATALOGUE = "rexrank.catalogue"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, modules: set[str], package: str) -> set[str]:
    """The rexrank modules `tree` imports: `from a.b import c` counts a.b.c when c is a module,
    else a.b (a package's __init__ is what `from package import name` reads only when name is
    not a sub-module of it)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            named = {f"{base}.{alias.name}" for alias in node.names}
            found.update(named & modules)
            if not named <= modules:
                found.add(base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {name for name in found if name in modules}


def import_graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in (SRC / "rexrank").rglob("*.py")}
    modules = set(paths)
    graph = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph[name] = _imports(ast.parse(path.read_text(encoding="utf-8")), modules, package) - {name}
    return graph


def cycles(graph: dict[str, set[str]], within) -> list[list[str]]:
    """Strongly connected components of more than one module among those `within` accepts (Tarjan)."""
    nodes = [n for n in graph if within(n)]
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if not within(w):
                continue
            if w not in index:
                strong(w)
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
                out.append(sorted(component))

    for v in nodes:
        if v not in index:
            strong(v)
    return out


def _layered(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in LAYERED) or name == CATALOGUE


def test_metrics_models_llm_radgraph_import_in_one_direction():
    found = cycles(import_graph(), _layered)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_import_cycle_anywhere_in_the_package():
    found = cycles(import_graph(), lambda name: name == "rexrank" or name.startswith("rexrank."))
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_from_a_package_import_a_sub_module_is_an_import_of_the_sub_module_only():
    modules = {"rexrank.store", "rexrank.store.records", "rexrank.store.store"}
    assert _imports(ast.parse("from rexrank.store import records\n"), modules, "rexrank.x") == {"rexrank.store.records"}
    assert _imports(ast.parse("from rexrank.store import open_store\n"), modules, "rexrank.x") == {"rexrank.store"}


def test_catalogue_imports_nothing_of_rexrank():
    graph = import_graph()
    assert CATALOGUE in graph, "the checkpoint catalogue module is missing"
    assert graph[CATALOGUE] == set(), f"{CATALOGUE} imports {sorted(graph[CATALOGUE])}"


def test_the_graph_sees_imports_inside_functions():
    # the cycle this issue names ran through imports inside functions: the graph must see them
    tree = ast.parse("def f():\n    from rexrank.models import weights\n")
    assert _imports(tree, {"rexrank.models", "rexrank.models.weights"}, "rexrank.x") == {"rexrank.models.weights"}


def test_the_catalogue_names_every_registered_metric():
    # `rexrank weights` reads only the catalogue: a metric missing from it would silently need nothing
    from rexrank.catalogue import METRIC_NEEDS
    from rexrank.metrics.registry import METRICS

    assert set(METRIC_NEEDS) == set(METRICS)
