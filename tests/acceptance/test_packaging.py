"""What installing hookline puts into a Python environment: one top-level package, `hookline`.

The wheel `pip wheel` builds from a copy of this checkout holds only `hookline/` (real files,
the symlinked folders' contents, with the SQL, the dashboard's static files, openapi.json and
the rehearsal's data) and its dist-info; the development install (`make venv`, editable)
makes `hookline` importable from anywhere and none of the repository's folder names.
"""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("supervisor", "ingest", "workers", "shared", "rehearsal")
# package data that must ship (pyproject.toml's [tool.setuptools.package-data])
DATA = ("hookline/shared/store/queries/common.sql", "hookline/ingest/openapi.json",
        "hookline/ingest/static/app.js")


def _build_wheel(tmp_path: Path) -> Path:
    """`pip wheel --no-deps` of a clean copy of the checkout (a build leaves build/ behind,
    and an old build/lib would be packed again); the wheel's path."""
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "results", "build", "*.egg-info", "__pycache__", ".*_cache", "tests",
        "*.db*"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
         "--disable-pip-version-check", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = (tmp_path / "dist").glob("hookline-*.whl")
    return wheel


def test_the_wheel_holds_only_the_hookline_package(tmp_path: Path):
    wheel = _build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        infos = archive.infolist()
        names = {info.filename for info in infos}
        dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/RECORD"))
        top_level = archive.read(f"{dist_info}/top_level.txt").decode().split()
        entry_points = archive.read(f"{dist_info}/entry_points.txt").decode()
    outside = sorted(n for n in names if n.split("/")[0] not in ("hookline", dist_info))
    assert outside == [], outside
    assert top_level == ["hookline"]
    assert "hookline = hookline.supervisor.cli:main" in entry_points, entry_points
    # the symlinked folders were copied as files, every module of them
    links = [i.filename for i in infos if stat.S_ISLNK(i.external_attr >> 16)]
    assert links == [], links
    modules = {f"hookline/{p.relative_to(ROOT).as_posix()}" for folder in FOLDERS
               for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts}
    assert sorted(modules - names) == [], "modules missing from the wheel"
    assert "hookline/__init__.py" in names
    for data in DATA:
        assert data in names, data
    assert any(n.startswith("hookline/shared/store/queries/sqlite_migrations/") for n in names)
    assert any(n.startswith("hookline/rehearsal/data/github/") for n in names)


def test_the_development_install_adds_only_hookline(tmp_path: Path):
    # `make test` installs it (make venv); a missing install is this test's failure to report.
    dist = metadata.distribution("hookline")
    [script] = [e for e in dist.entry_points if e.group == "console_scripts"]
    assert (script.name, script.value) == ("hookline", "hookline.supervisor.cli:main")
    # from an empty folder, with no PYTHONPATH: only what the install itself provides
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    probe = ("import importlib.util as u, hookline.supervisor.cli, hookline.shared.config\n"
             f"print([n for n in {FOLDERS!r} if u.find_spec(n) is not None])\n")
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           cwd=tmp_path, env=env, timeout=60, check=False)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "[]", found.stdout


def test_nothing_is_imported_under_a_folder_name_in_a_checkout():
    # With the checkout on the import path (the working directory, as tests and
    # `python -m` from it have), the folders are importable by their bare names too: nothing
    # the CLI (every command module), ingest or the workers import may reach them that way.
    probe = ("import sys\nfrom hookline.supervisor.cli.main import build_parser\n"
             "import hookline.ingest.main, hookline.workers.main\nbuild_parser()\n"
             f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FOLDERS!r}))\n")
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           cwd=ROOT, timeout=60, check=False)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "[]", found.stdout
