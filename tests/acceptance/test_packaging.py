"""What installing hookline puts into a Python environment: the service's wheel holds one
top-level package, `hookline`; hookline-client's wheel holds `hookline_client` alone, and
imports nothing of the service.

Both wheels are built once for the module (`pip wheel --no-deps` of a clean copy of the
checkout, as `make dist` builds them but without the sdist step), then installed as users
install them, each into a fresh venv: the service's with pip `--find-links` at the built
client wheel (its other dependencies come from the package index, or pip's cache), the
client's with its `aio` extra. README's publishing and receiving snippets run in the client's
venv against `hookline serve` from the service's venv; `hookline --version`, /metrics' build
info, both wheels and `hookline_client.__version__` name the one version. The development
install (`make venv`, editable) makes `hookline` and `hookline_client` importable from
anywhere and none of the repository's folder names.
"""

from __future__ import annotations

import re
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import urllib.request
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.parser import Parser
from importlib import metadata
from pathlib import Path

import pytest
from procs import get_json, wait_until

from hookline.rehearsal.harness import free_port

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("supervisor", "ingest", "workers", "shared", "rehearsal")
CLIENT = ROOT / "shared" / "client"
# package data that must ship (pyproject.toml's [tool.setuptools.package-data])
DATA = ("hookline/shared/store/queries/common.sql", "hookline/ingest/openapi.json",
        "hookline/ingest/static/app.js")
VERSION_RE = re.compile(r'^__version__ = "([^"]+)"$', re.MULTILINE)
VERSION = VERSION_RE.findall((CLIENT / "hookline_client" / "_version.py").read_text())[0]
TOKEN = "packaging-test-ingest-token-0123456789"
ADMIN = "packaging-test-admin-token-0123456789"


@dataclass(frozen=True)
class Wheels:
    service: Path
    client: Path

    @property
    def folder(self) -> Path:
        return self.client.parent


def _pip(*args: str, timeout_s: float = 300) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *args, "--quiet",
                           "--disable-pip-version-check"],
                          capture_output=True, text=True, timeout=timeout_s, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    """Both wheels, built from a clean copy of the checkout (a build leaves build/ behind,
    and an old build/lib would be packed again)."""
    tmp = tmp_path_factory.mktemp("wheels")
    source = tmp / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "results", "build", "dist", "*.egg-info", "__pycache__", ".*_cache",
        "tests", "*.db*"))
    dist = tmp / "dist"
    # Two `pip wheel` runs side by side (each builds in its own isolated environment; one
    # run would build them one after the other).
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda project: _pip("wheel", "--no-deps", "-w", str(dist), str(project)),
                      (source / "shared" / "client", source)))
    [service] = dist.glob("hookline-*.whl")
    [client] = dist.glob("hookline_client-*.whl")
    return Wheels(service, client)


def _venv(folder: Path, *requirements: str, find_links: Path | None = None) -> Path:
    """A fresh venv (without its own pip: this test's pip installs into it) holding
    `requirements`; its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True,
                   timeout=60)
    python = folder / "bin" / "python"
    links = ("--find-links", str(find_links)) if find_links else ()
    _pip("--python", str(python), "install", *links, *requirements)
    return python


def _wheel_names(wheel: Path) -> tuple[list[zipfile.ZipInfo], str]:
    with zipfile.ZipFile(wheel) as archive:
        infos = archive.infolist()
    dist_info = next(i.filename.split("/")[0] for i in infos
                     if i.filename.endswith(".dist-info/RECORD"))
    return infos, dist_info


def _wheel_metadata(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(f"{_wheel_names(wheel)[1]}/{name}").decode()


def test_the_wheel_holds_only_the_hookline_package(wheels: Wheels):
    infos, dist_info = _wheel_names(wheels.service)
    names = {info.filename for info in infos}
    outside = sorted(n for n in names if n.split("/")[0] not in ("hookline", dist_info))
    assert outside == [], outside
    assert _wheel_metadata(wheels.service, "top_level.txt").split() == ["hookline"]
    entry_points = _wheel_metadata(wheels.service, "entry_points.txt")
    assert "hookline = hookline.supervisor.cli:main" in entry_points, entry_points
    # the symlinked folders were copied as files, every module of them but the client's,
    # which is hookline-client's and a dependency, pinned to the same version
    links = [i.filename for i in infos if stat.S_ISLNK(i.external_attr >> 16)]
    assert links == [], links
    modules = {f"hookline/{p.relative_to(ROOT).as_posix()}" for folder in FOLDERS
               for p in (ROOT / folder).rglob("*.py")
               if "__pycache__" not in p.parts and CLIENT not in p.parents}
    assert sorted(modules - names) == [], "modules missing from the wheel"
    assert [n for n in names if "client" in n.split("/")[:-1] or "hookline_client" in n] == []
    assert "hookline/__init__.py" in names
    for data in DATA:
        assert data in names, data
    assert any(n.startswith("hookline/shared/store/queries/sqlite_migrations/") for n in names)
    # the demo's payload examples stay in the repository (rehearsal/github_samples.py)
    assert not [n for n in names if n.startswith("hookline/rehearsal/data/")]
    requires = Parser().parsestr(_wheel_metadata(wheels.service, "METADATA"))
    assert f"hookline-client=={VERSION}" in requires.get_all("Requires-Dist", [])


def test_the_client_wheel_holds_hookline_client_alone_and_imports_nothing_of_the_service(
        wheels: Wheels, tmp_path: Path):
    infos, dist_info = _wheel_names(wheels.client)
    outside = sorted(i.filename for i in infos
                     if i.filename.split("/")[0] not in ("hookline_client", dist_info))
    assert outside == [], outside
    assert _wheel_metadata(wheels.client, "top_level.txt").split() == ["hookline_client"]
    requires = Parser().parsestr(_wheel_metadata(wheels.client, "METADATA"))
    # the standard library only; aiohttp for the asyncio client, as the `aio` extra
    assert [r.replace(" ", "") for r in requires.get_all("Requires-Dist", [])] == [
        'aiohttp<4,>=3.9;extra=="aio"'], requires.get_all("Requires-Dist")
    # Installed alone, without aiohttp: the blocking client and verify import, and nothing of
    # the service (there is none to import, so a hookline import would fail outright); the
    # asyncio client says which extra it needs.
    python = _venv(tmp_path / "venv", "--no-deps", str(wheels.client))
    probe = ("import sys, hookline_client\n"
             "from hookline_client import HooklineClient, verify\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('hookline', 'aiohttp')))\n"
             "try:\n    hookline_client.AsyncHooklineClient\n"
             "except ModuleNotFoundError as exc:\n    print(exc)\n")
    found = subprocess.run([str(python), "-c", probe], capture_output=True, text=True,
                           cwd=tmp_path, timeout=60, check=False)
    assert found.returncode == 0, found.stderr
    assert found.stdout.splitlines() == [
        "[]", "AsyncHooklineClient needs aiohttp: pip install 'hookline-client[aio]'"]


def test_importing_the_client_and_its_asyncio_module_imports_no_hookline_module(
        tmp_path: Path):
    # In this environment the service is installed too (and the checkout is on the path):
    # so importing it by mistake would succeed here, and show in sys.modules.
    probe = ("import sys, hookline_client, hookline_client.aio\n"
             "hookline_client.AsyncHooklineClient\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'hookline'))\n")
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           cwd=ROOT, timeout=60, check=False)
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "[]", found.stdout


@dataclass(frozen=True)
class Installed:
    """The service's venv and the client's, from the wheels."""

    service: Path
    client: Path


@pytest.fixture(scope="module")
def installed(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    tmp = tmp_path_factory.mktemp("venvs")
    # The two venvs are installed side by side.
    with ThreadPoolExecutor(2) as pool:
        # pip install --find-links DIST hookline-X.whl: hookline-client==X from the built wheel
        service = pool.submit(_venv, tmp / "service", str(wheels.service),
                              find_links=wheels.folder)
        client = pool.submit(_venv, tmp / "client", f"{wheels.client}[aio]")
        return Installed(service.result(), client.result())


# README's receiving snippet runs in the client's venv inside this wrapper: a standard library
# HTTP server calling its `handle`, with the `db`, `secret` and `apply` it names.
RECEIVER = '''
import http.server, json, sqlite3, sys
secret, port, db_path, log_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
db = sqlite3.connect(db_path)
with db:
    db.execute("CREATE TABLE processed (webhook_id TEXT PRIMARY KEY)")

def apply(event):
    with open(log_path, "a") as log:
        log.write(f"{event['id']} {event['type']}\\n")

{snippet}

class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["content-length"]))
        self.send_response(handle(body, self.headers))
        self.end_headers()

server = http.server.HTTPServer(("127.0.0.1", port), Handler)
print("receiving", flush=True)
server.serve_forever()
'''


def _readme_snippets() -> tuple[str, str, str]:
    """README's blocking publishing, asyncio publishing and receiving snippets, as printed."""
    readme = (ROOT / "README.md").read_text()
    publishing = readme.split("## Publishing events", 1)[1].split("\n## ", 1)[0]
    sync, aio = (block.split("```", 1)[0] for block in publishing.split("```python\n")[1:3])
    receiving = readme.split("## Receiving webhooks", 1)[1].split("\n## ", 1)[0]
    receive = receiving.split("```python\n", 1)[1].split("```", 1)[0]
    return sync, aio, receive


def test_readme_snippets_against_the_installed_service(installed: Installed, tmp_path: Path):
    sync, aio, receive = _readme_snippets()
    assert "pip install hookline-client" in (ROOT / "README.md").read_text()
    for snippet in (sync, aio, receive):
        assert "from hookline_client import" in snippet, snippet
    hookline = installed.service.parent / "hookline"
    shown = subprocess.run([str(hookline), "--version"], capture_output=True, text=True,
                           cwd=tmp_path, timeout=60, check=False)
    assert shown.stdout.strip() == f"hookline {VERSION}", shown
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    (tmp_path / "hookline.toml").write_text(
        f'db = "{tmp_path}/hookline.db"\nlisten = "127.0.0.1:{port}"\n'
        f'log_file = "{tmp_path}/hookline.log"\nallow_networks = "127.0.0.0/8"\n'
        f'ingest_token = "{TOKEN}"\nadmin_token = "{ADMIN}"\n')
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "HOOKLINE_CONFIG": str(tmp_path / "hookline.toml")}

    def run(python_or_cmd: Path, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(python_or_cmd), *args], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=60, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    run(hookline, "init")
    serve_log = (tmp_path / "serve.out").open("wb")
    serve = subprocess.Popen([str(hookline), "serve"], stdout=serve_log,
                             stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    receiver: subprocess.Popen[bytes] | None = None
    try:
        wait_until(lambda: get_json(f"{base}/readyz")[0] == 200, 30, "the service ready")
        receiver_port = free_port()
        added = run(hookline, "destinations", "add", "mine",
                    f"http://127.0.0.1:{receiver_port}/webhooks", "--event-type", "invoice.*")
        [secret] = re.findall(r"signing secret \(shown once\): (whsec_\S+)", added.stdout)
        (tmp_path / "receiver.py").write_text(RECEIVER.replace("{snippet}", receive))
        applied = tmp_path / "applied.txt"
        with (tmp_path / "receiver.out").open("wb") as received:
            receiver = subprocess.Popen(
                [str(installed.client), str(tmp_path / "receiver.py"), secret,
                 str(receiver_port), str(tmp_path / "receiver.sqlite3"), str(applied)],
                stdout=received, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
        wait_until(lambda: b"receiving" in (tmp_path / "receiver.out").read_bytes(), 30,
                   "the receiver")
        # the publishing snippets as printed, given the URL and the token
        published = run(installed.client, "-c",
                        f"token = {TOKEN!r}\n{sync.replace('http://127.0.0.1:8080', base)}"
                        "print(result.outcome)")
        assert published.stdout.split() == ["accepted"]
        wrapped = ("import asyncio\nasync def main():\n"
                   + textwrap.indent(aio.replace("http://127.0.0.1:8080", base), "    ")
                   + "    print(result.outcome)\n"
                   f"token = {TOKEN!r}\nasyncio.run(main())\n")
        again = run(installed.client, "-c", wrapped)
        assert again.stdout.split() == ["duplicate"]  # the same id as the blocking snippet
        # the receiver verified the delivery and applied it once
        wait_until(lambda: applied.exists() and applied.read_text() != "", 30, "the delivery")
        assert applied.read_text() == "invoice-in_42-paid invoice.paid\n"
        # the installed service names the wheels' version on /metrics too
        request = urllib.request.Request(f"{base}/metrics",
                                         headers={"authorization": f"Bearer {ADMIN}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            metrics = response.read().decode()
        assert re.search(rf'hookline_build_info\{{[^}}]*version="{re.escape(VERSION)}"',
                         metrics), metrics[:2000]
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(30) == 0
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
        serve_log.close()
        if receiver is not None:
            receiver.terminate()
            receiver.wait(10)


def test_the_version_is_written_once_and_everything_names_it(wheels: Wheels):
    from hookline_client import __version__

    from hookline.shared.version import VERSION as service_version

    assert (service_version, __version__) == (VERSION, VERSION)
    assert wheels.service.name == f"hookline-{VERSION}-py3-none-any.whl"
    assert wheels.client.name == f"hookline_client-{VERSION}-py3-none-any.whl"
    # no other file of the checkout writes a version down
    for path in (ROOT / "pyproject.toml", CLIENT / "pyproject.toml", ROOT / "setup.py"):
        assert re.search(r'^version\s*=\s*"', path.read_text(), re.MULTILINE) is None, path


def test_the_development_install_adds_only_hookline(tmp_path: Path):
    # `make test` installs both (make venv); a missing install is this test's failure to
    # report.
    dist = metadata.distribution("hookline")
    [script] = [e for e in dist.entry_points if e.group == "console_scripts"]
    assert (script.name, script.value) == ("hookline", "hookline.supervisor.cli:main")
    assert metadata.version("hookline-client") == VERSION
    # from an empty folder, with no PYTHONPATH: only what the install itself provides
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    probe = ("import importlib.util as u, hookline.supervisor.cli, hookline.shared.config\n"
             "import hookline_client\n"
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
