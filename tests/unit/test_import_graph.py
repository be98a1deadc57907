"""README's import graph (which top-level folder, and which of shared's subpackages, imports
which) is derived from the code and kept true.

Read from the source (ast), so imports inside functions and under TYPE_CHECKING count too.
Regenerate README's block with `python tests/unit/test_import_graph.py`.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("supervisor", "ingest", "workers", "rehearsal", "shared")
SHARED_PACKAGES = ("store", "policy", "process", "client")
# graph nodes, in the order they are printed: shared's top-level modules are the node "shared/"
NODES = ("supervisor/", "ingest/", "workers/", "rehearsal/",
         *(f"shared/{name}/" for name in SHARED_PACKAGES), "shared/")


def _node(module: str) -> str | None:
    """The graph node of a dotted module name (`hookline.shared.store.sqlite`), or None for a
    module outside the product."""
    parts = module.split(".")
    if parts[0] == "hookline_client":  # the hookline-client distribution, in shared/client/
        return "shared/client/"
    if parts[0] != "hookline" or len(parts) < 2 or parts[1] not in FOLDERS:
        return None
    parts = parts[1:]
    if parts[0] == "shared" and len(parts) > 1 and parts[1] in SHARED_PACKAGES:
        return f"shared/{parts[1]}/"
    return f"{parts[0]}/"


def import_graph() -> dict[str, set[str]]:
    """{node: the other nodes its modules import} for every `*.py` under the product folders."""
    graph: dict[str, set[str]] = {node: set() for node in NODES}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            source = _node(".".join(("hookline", *path.relative_to(ROOT).with_suffix("").parts)))
            assert source is not None
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                targets: list[str] = []
                if isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    # `from hookline.shared import store` names a subpackage, not a shared module
                    targets = [f"{node.module}.{alias.name}" for alias in node.names]
                for target in targets:
                    imported = _node(target)
                    if imported is not None and imported != source:
                        graph[source].add(imported)
    return graph


def render(graph: dict[str, set[str]]) -> str:
    """The graph as README's fenced text block's lines: `node -> imported nodes`."""
    width = max(map(len, NODES))
    return "\n".join(
        f"{node:<{width}} -> {' '.join(n for n in NODES if n in graph[node]) or '(nothing)'}"
        for node in NODES)


def test_readme_import_graph_matches_the_code() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"```text\n{render(import_graph())}\n```" in readme, (
        "README's import graph is stale; regenerate it with "
        "`python tests/unit/test_import_graph.py`")


def test_shared_builds_on_no_folder_above_it() -> None:
    # shared/ is the bottom layer: the supervisor, ingest, workers and rehearsal build on it
    graph = import_graph()
    for node in NODES[4:]:
        assert not graph[node] & set(NODES[:4]), (node, graph[node])


def test_the_client_package_stands_alone() -> None:
    # Applications install hookline-client (shared/client/) to publish and to verify
    # deliveries: it must not drag the service (store, workers, ingest, its config) in.
    assert import_graph()["shared/client/"] == set()


if __name__ == "__main__":
    print(render(import_graph()))
