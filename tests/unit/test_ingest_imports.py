"""The ingest package's modules import each other without a cycle.

Read from the source (ast), so an import hidden inside a function counts too: such a local
import is how a cycle is usually papered over, so none of an ingest module is allowed.
"""

from __future__ import annotations

import ast
import graphlib
import importlib
from pathlib import Path

import pytest

INGEST_DIR = Path(__file__).resolve().parents[2] / "ingest"


def ingest_imports(package_dir: Path, package: str = "hookline.ingest"
                   ) -> dict[str, dict[str, bool]]:
    """Which ingest modules each module of `package_dir` imports.

    Args:
        package_dir: the package's folder.
        package: the dotted name its modules are imported as.

    Returns:
        {module: {imported ingest module: True when imported at module level, False when
        only inside a function or class body}} for every `*.py` in `package_dir`.
    """
    def name(path: Path) -> str:
        return package if path.stem == "__init__" else f"{package}.{path.stem}"

    modules = {name(path) for path in package_dir.glob("*.py")}
    graph: dict[str, dict[str, bool]] = {}
    for path in sorted(package_dir.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        edges: dict[str, bool] = {}
        top_level = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: resolve against the package
                    base = f"{package}.{base}" if base else package
                # `from ingest import admin_api` names a module; `from ingest.x import y` not
                targets = [f"{base}.{alias.name}" for alias in node.names
                           if f"{base}.{alias.name}" in modules] or [base]
            for target in targets:
                if target in modules and target != name(path):
                    edges[target] = edges.get(target, False) or id(node) in top_level
        graph[name(path)] = edges
    return graph


def cycle_in(graph: dict[str, dict[str, bool]]) -> list[str] | None:
    """One import cycle of `graph` (modules, each importing the next, the first repeated
    last), or None."""
    try:
        graphlib.TopologicalSorter({m: set(edges) for m, edges in graph.items()}).prepare()
    except graphlib.CycleError as exc:
        return list(reversed(exc.args[1]))  # graphlib lists each module's importer next
    return None


def test_ingest_modules_import_each_other_without_a_cycle() -> None:
    graph = ingest_imports(INGEST_DIR)
    assert len(graph) > 10, "the ingest package was not found"
    assert cycle_in(graph) is None, f"import cycle: {' -> '.join(cycle_in(graph) or [])}"


def test_no_ingest_module_imports_another_inside_a_function() -> None:
    local = sorted(f"{module} imports {target}"
                   for module, edges in ingest_imports(INGEST_DIR).items()
                   for target, at_top in edges.items() if not at_top)
    assert local == [], "function-local imports hide a cycle; move the shared part instead"


def test_the_app_assembly_imports_every_route_module_and_none_imports_it() -> None:
    graph = ingest_imports(INGEST_DIR)
    importers = sorted(m for m, edges in graph.items() if "hookline.ingest.app" in edges)
    assert importers == ["hookline.ingest.main"]
    assert {f"hookline.ingest.{name}" for name in ("events_api", "sources_api", "admin_api",
                                                   "health")} <= set(graph["hookline.ingest.app"])


@pytest.mark.parametrize("module",
                         sorted(set(ingest_imports(INGEST_DIR)) - {"hookline.ingest.__main__"}))
def test_every_ingest_module_imports(module: str) -> None:
    importlib.import_module(module)


def test_the_checker_finds_a_cycle_hidden_in_a_function(tmp_path: Path) -> None:
    package = tmp_path / "ingest"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from ingest import b\n")
    (package / "b.py").write_text("def f():\n    from ingest.a import x\n    return x\n")
    graph = ingest_imports(package, "ingest")
    assert graph["ingest.b"] == {"ingest.a": False}
    assert cycle_in(graph) is not None
