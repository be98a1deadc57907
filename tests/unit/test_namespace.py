"""hookline's code is imported under one name, `hookline.*`: the repository keeps the folders
supervisor/, ingest/, workers/, shared/ and rehearsal/, and hookline/ holds a symlink to each.

Read from the source (ast), so a module that reached one of them by its folder's name
(`from shared.x import y`, `python -m ingest`, `resources.files("rehearsal")`, a string naming
a module for importlib such as "supervisor.cli.service") is found before it runs twice under
two names in a checkout and fails to import once installed.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("supervisor", "ingest", "workers", "shared", "rehearsal")
# calls whose first argument is a module or package name
MODULE_CALLS = {"child_argv", "files", "import_module", "find_spec", "run_module"}


def _old_name(name: object) -> bool:
    """Whether `name` is a dotted module name starting with a folder's bare name."""
    return isinstance(name, str) and name.split(".")[0] in FOLDERS


def _names_a_module(text: str) -> bool:
    """Whether `text` is exactly the dotted name of one of the repository's modules by its
    folder's name ("supervisor.cli.service"; not a file name such as "ingest.log")."""
    parts = text.split(".")
    if len(parts) < 2 or not _old_name(text) or not all(p.isidentifier() for p in parts):
        return False
    path = ROOT.joinpath(*parts)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _called(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def old_style_references(source: str) -> list[str]:
    """The places in `source` (Python) that name a product module by its folder's name.

    Returns:
        One `line N: what` entry per import statement, `-m MODULE` argument pair,
        module-naming call (MODULE_CALLS) and string that is a module's dotted name that does.
    """
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names
                      if _old_name(a.name)]
        elif isinstance(node, ast.ImportFrom) and not node.level and _old_name(node.module):
            found.append(f"line {node.lineno}: from {node.module} import")
        elif isinstance(node, (ast.List, ast.Tuple)):
            values = [getattr(e, "value", None) for e in node.elts]
            found += [f"line {node.lineno}: -m {after}"
                      for flag, after in itertools.pairwise(values)
                      if flag == "-m" and _old_name(after)]
        elif (isinstance(node, ast.Call) and _called(node.func) in MODULE_CALLS and node.args
              and _old_name(getattr(node.args[0], "value", None))):
            found.append(f"line {node.lineno}: {_called(node.func)}"
                         f"({getattr(node.args[0], 'value', '')!r})")
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and _names_a_module(node.value)):
            found.append(f"line {node.lineno}: {node.value!r}")
    return found


def test_no_module_is_reached_by_its_folder_name() -> None:
    files = [path for folder in (*FOLDERS, "tests", "docs")
             for path in sorted((ROOT / folder).rglob("*.py"))]
    assert len(files) > 200, "the product's modules were not found"
    found = [f"{path.relative_to(ROOT)} {where}" for path in files
             for where in old_style_references(path.read_text(encoding="utf-8"))]
    assert found == [], "name these modules hookline.<folder>...:\n" + "\n".join(found)


def test_the_namespace_links_every_folder() -> None:
    package = ROOT / "hookline"
    assert (package / "__init__.py").is_file() and not (package / "__init__.py").is_symlink()
    for folder in FOLDERS:
        link = package / folder
        assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), link


def test_the_checker_finds_each_kind_of_reference() -> None:
    source = ("import shared.config\nfrom ingest import app\nfrom hookline.shared import x\n"
              "argv = [python, '-m', 'workers', '--slot', 'w']\n"
              "ok = [python, '-m', 'hookline.workers']\n"
              "files('rehearsal')\nfiles('hookline.rehearsal')\n"
              "COMMANDS = ('supervisor.cli.service', 'hookline.supervisor.cli.send')\n"
              "LOG = 'ingest.log'\n")
    assert sorted(old_style_references(source)) == [
        "line 1: import shared.config", "line 2: from ingest import", "line 4: -m workers",
        "line 6: files('rehearsal')", "line 8: 'supervisor.cli.service'"]
