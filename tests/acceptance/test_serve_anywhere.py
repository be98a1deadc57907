"""`hookline serve` started from a folder that holds packages named like hookline's own
(`hookline`, as another checkout does, and `shared`, `ingest`, `workers`, as an application's
repository may): its children still import this hookline's modules, become ready and deliver,
with no child ever crash-looping."""

from __future__ import annotations

from pathlib import Path

from procs import wait_until
from test_serve_production import Service


def clashing_folder(tmp: Path) -> Path:
    """A folder with `hookline`, `shared`, `ingest` and `workers` packages of its own; its
    `hookline` refuses to be imported (an empty one would not show: the development
    install's import hook still finds `hookline.ingest` in the checkout behind it)."""
    folder = tmp / "app"
    for name in ("hookline", "shared", "ingest", "workers"):
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text('"""The application\'s own package."""\n')
    (folder / "hookline" / "__init__.py").write_text(
        'raise ImportError("the folder\'s own hookline package was imported")\n')
    return folder


def test_serve_from_a_folder_with_clashing_packages_delivers(tmp_path: Path):
    """Ingest and both workers start once each from such a folder and an event is delivered;
    before children started with -P, each crash-looped on `No module named 'shared.config'`."""
    svc = Service(tmp_path, "ok", cwd=clashing_folder(tmp_path))
    try:
        wait_until(svc.ready, 20, "/readyz to answer 200")
        svc.post_event("anywhere-1")
        wait_until(lambda: [j["status"] for j in svc.jobs()] == ["done"], 20,
                   "the event to be delivered")
        assert not svc.log("child_exited"), svc.log("child_exited")
        assert sorted(r["slot"] for r in svc.log("child_started")) == [
            "ingest", "worker-1", "worker-2"]
    finally:
        svc.close()
