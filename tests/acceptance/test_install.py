"""The production install documented in OPERATIONS.md ("Installing"), run into a temporary
prefix: a venv at PREFIX/opt/hookline with only the runtime dependencies, the console script
linked as PREFIX/usr/local/bin/hookline, deploy/hookline.toml as PREFIX/etc/hookline/
hookline.toml with its paths moved under PREFIX, then the installed command's `--version`,
`serve --check`, `init` and a command that refuses a missing database. Then OPERATIONS.md's
"A first delivery on the installed service" on that install: `hookline serve` started by
hand with the installed file (as the unit would), a destination pointing at the docs'
aiohttp receiver example, one event published with the README's Python snippet and one with
`hookline send`, each verified and applied by the receiver, the operator views of it, and a
clean stop.

The venv gets its runtime dependencies from this test environment without the network: only
the distributions that pyproject.toml's `dependencies` need (followed through their own
requirements) are linked into a folder the venv reads through a .pth file, so a module that
serve or the CLI imports from the test or bench extras fails here. Building the package uses
pip's ordinary isolated build (setuptools from the package index or pip's cache).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import sysconfig
import tomllib
import urllib.request
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from procs import wait_until

ROOT = Path(__file__).resolve().parents[2]
# What the documented steps create, relative to the prefix (OPERATIONS.md, "Installing").
VENV, LINK, ETC = "opt/hookline", "usr/local/bin/hookline", "etc/hookline/hookline.toml"
SYSTEM_DIRS = ("/var/lib/hookline", "/run/hookline", "/var/log/hookline")


def _runtime_closure() -> list[metadata.Distribution]:
    """The installed distributions hookline's runtime dependencies need, transitively
    (markers evaluated for this interpreter, extras not followed), but hookline-client:
    the test installs that from the checkout like the service."""
    todo = [Requirement(r) for r in metadata.requires("hookline") or []]
    seen: dict[str, metadata.Distribution] = {}
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if req.name == "hookline-client":
            continue
        dist = metadata.distribution(req.name)
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in seen:
            continue
        seen[key] = dist
        todo.extend(Requirement(r) for r in dist.requires or [])
    return list(seen.values())


def _link_runtime_site(folder: Path) -> None:
    """Symlink the top-level modules and metadata of the runtime closure into `folder`."""
    folder.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for dist in _runtime_closure():
        for file in dist.files or []:
            top = file.parts[0]
            if top == ".." or top.endswith(".pth") or (folder / top).exists():
                continue
            if (site / top).exists():
                (folder / top).symlink_to(site / top)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_documented_install_into_a_prefix(tmp_path: Path):
    prefix = tmp_path / "prefix"
    venv = prefix / VENV
    # python3 -m venv /opt/hookline (without its own pip: this test's pip installs into it)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=60)
    venv_python = venv / "bin" / "python"
    venv_site = Path(subprocess.run(
        [str(venv_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, timeout=60).stdout.strip())
    _link_runtime_site(tmp_path / "runtime-deps")
    (venv_site / "runtime-deps.pth").write_text(f"{tmp_path / 'runtime-deps'}\n")
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "results", "build", "*.egg-info", "__pycache__", ".*_cache", "tests",
        "*.db*"))
    # /opt/hookline/bin/pip install ./hookline/shared/client ./hookline   (copies: a build
    # writes into its tree)
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv_python), "install", "--quiet",
         "--no-deps", "--disable-pip-version-check", str(source / "shared" / "client"),
         str(source)],
        capture_output=True, text=True, timeout=300, check=False)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    # ln -s /opt/hookline/bin/hookline /usr/local/bin/hookline
    link = prefix / LINK
    link.parent.mkdir(parents=True)
    link.symlink_to(venv / "bin" / "hookline")
    # install deploy/hookline.toml as /etc/hookline/hookline.toml, tokens appended; systemd
    # creates /var/lib/hookline, /run/hookline and /var/log/hookline for the unit.
    config = prefix / ETC
    config.parent.mkdir(parents=True)
    text = (ROOT / "deploy" / "hookline.toml").read_text()
    for folder in SYSTEM_DIRS:
        text = text.replace(f'"{folder}', f'"{prefix}{folder}')
        (prefix / folder.lstrip("/")).mkdir(parents=True, mode=0o750)
    listen = f"127.0.0.1:{_free_port()}"
    text = text.replace('listen = "127.0.0.1:8080"', f'listen = "{listen}"')
    config.write_text(text + "".join(f'{name} = "{secrets.token_hex(32)}"\n'
                                     for name in ("admin_token", "ingest_token")))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HOOKLINE_", "PYTHON", "VIRTUAL_ENV"))}

    def hookline(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(link), *args], capture_output=True, text=True, env=env,
                              cwd="/", timeout=120, check=False)

    version = metadata.version("hookline-client")  # the one version of both (make venv)
    assert list(venv_site.glob("hookline-*.dist-info/**/LICENSE")), "LICENSE not shipped"
    shown = hookline("--version")
    assert shown.returncode == 0 and shown.stdout.strip() == f"hookline {version}", shown
    # The installed code, not this checkout, answers under its one import name; neither the
    # repository's folder names nor the test extras are importable.
    where = subprocess.run([str(venv_python), "-c", "import hookline, importlib.util as u; "
                            "print(hookline.__file__, [n for n in ('shared', 'ingest', "
                            "'workers', 'supervisor', 'rehearsal') if u.find_spec(n)], "
                            "u.find_spec('pytest'))"],
                           capture_output=True, text=True, env=env, cwd="/", timeout=60)
    assert str(venv_site) in where.stdout and where.stdout.strip().endswith("[] None"), where

    db = prefix / "var/lib/hookline/hookline.db"
    refused = hookline("--config", str(config), "stats")
    assert refused.returncode == 2 and f"no database at {db}" in refused.stderr, refused
    assert f"hookline --db {db} init" in refused.stderr and not db.exists()

    checked = hookline("--config", str(config), "serve", "--check")
    assert checked.returncode == 0, checked.stderr
    assert "does not exist yet" in checked.stderr and not db.exists()

    created = hookline("--config", str(config), "init")
    assert created.returncode == 0, created.stderr
    assert f"created database {db}" in created.stdout and db.stat().st_mode & 0o777 == 0o600
    again = hookline("--config", str(config), "init")
    assert again.returncode == 0 and "already existed" in again.stdout, again

    checked = hookline("--config", str(config), "serve", "--check")
    assert checked.returncode == 0 and "PRAGMA quick_check ok" in checked.stderr
    stats = hookline("--config", str(config), "stats")
    assert stats.returncode == 0, stats.stderr
    # What serve's children import loads from the runtime dependencies alone.
    children = subprocess.run([str(venv_python), "-c",
                               "import hookline.ingest.main, hookline.workers.main"],
                              capture_output=True, text=True, env=env, cwd="/", timeout=60)
    assert children.returncode == 0, children.stderr
    # The demo's receiver verifies with a test-extra package: a one-line pointer, exit 2.
    demo = hookline("demo", "--out", str(tmp_path / "demo"))
    assert demo.returncode == 2 and "hookline[test,bench]" in demo.stderr, demo.stderr
    # The runtime paths of the shipped config are under the relocated /run/hookline.
    assert re.search(rf'runtime_dir = "{re.escape(str(prefix))}/run/hookline"',
                     config.read_text())
    _first_delivery(prefix, link, config, venv_python, source, env, tmp_path)


def _first_delivery(prefix: Path, link: Path, config: Path, venv_python: Path, source: Path,
                    env: dict[str, str], tmp_path: Path) -> None:
    """OPERATIONS.md's "A first delivery on the installed service", on the install above."""
    # echo 'allow_networks = "127.0.0.0/8"' >> /etc/hookline/hookline.toml
    with config.open("a") as file:
        file.write('allow_networks = "127.0.0.0/8"\n')
    settings = tomllib.loads(config.read_text())
    base, admin = f"http://{settings['listen']}", settings["admin_token"]
    env = {**env, "HOOKLINE_CONFIG": str(config)}  # export HOOKLINE_CONFIG=...

    def hookline(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(link), *args], capture_output=True, text=True, env=env,
                              cwd="/", timeout=120, check=False)

    def answers(path: str, token: str | None = None) -> tuple[int, str]:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(base + path, headers=headers),
                                        timeout=2) as resp:
                return resp.status, resp.read().decode()
        except OSError:
            return 0, ""

    # The service as the unit runs it (ExecStart=/usr/local/bin/hookline serve, working
    # directory /, the file through HOOKLINE_CONFIG), started by hand.
    serve_log = (tmp_path / "serve.out").open("wb")
    serve = subprocess.Popen([str(link), "serve"], stdout=serve_log, stderr=subprocess.STDOUT,
                             env=env, cwd="/")
    receiver: subprocess.Popen[bytes] | None = None
    try:
        wait_until(lambda: answers("/readyz")[0] == 200, 30, "the installed service to be ready")
        port = _free_port()
        added = hookline("destinations", "add", "mine", f"http://127.0.0.1:{port}/webhooks",
                         "--event-type", "invoice.*")
        assert added.returncode == 0, added.stderr
        [secret] = re.findall(r"signing secret \(shown once\): (whsec_\S+)", added.stdout)
        # WEBHOOK_SECRET=whsec_... /opt/hookline/bin/python hookline/docs/examples/... &
        received = tmp_path / "receiver.out"
        with received.open("wb") as out:
            receiver = subprocess.Popen(
                [str(venv_python), str(source / "docs/examples/receiver_aiohttp.py"),
                 "--port", str(port), "--db", str(tmp_path / "receiver.sqlite3")],
                stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path,
                env={**env, "WEBHOOK_SECRET": secret})
        wait_until(lambda: "receiving on" in received.read_text(), 30, "the receiver")

        # README, "Publishing events": the snippet as printed, given the URL and the token.
        readme = (ROOT / "README.md").read_text().split("## Publishing events", 1)[1]
        snippet = readme.split("```python\n", 1)[1].split("```", 1)[0]
        snippet = snippet.replace("http://127.0.0.1:8080", base)
        published = subprocess.run(
            [str(venv_python), "-c", f"token = {settings['ingest_token']!r}\n{snippet}"
             "print(result.outcome, result.message_id)"],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60, check=False)
        assert published.returncode == 0, published.stderr
        outcome, snippet_message = published.stdout.split()
        assert outcome == "accepted", published.stdout
        sent = hookline("send", "invoice.paid", "--data", '{"amount": 42}', "--id", "evt_1")
        assert sent.returncode == 0 and sent.stdout.startswith("accepted: id evt_1"), sent
        [sent_message] = re.findall(r"message (msg_\w+)", sent.stdout)

        # The receiver verified each signature before applying it (an unverified request is
        # answered 401 and recorded nowhere), once per webhook-id.
        def applied() -> dict[str, int]:
            with sqlite3.connect(tmp_path / "receiver.sqlite3") as db:
                return dict(db.execute("SELECT webhook_id, count(*) FROM effects "
                                       "GROUP BY webhook_id").fetchall())

        wait_until(lambda: len(applied()) == 2, 30, "both deliveries at the receiver")
        assert applied() == {snippet_message: 1, sent_message: 1}
        lines = received.read_text()
        for message in (snippet_message, sent_message):
            assert f"processed {message} invoice.paid" in lines, lines

        # What the operator sees of it.
        event = hookline("event", "evt_1")
        assert event.returncode == 0 and re.search(r"\bmine\s+done\s+1\b", event.stdout), event
        logs = hookline("logs", "--event", "evt_1")
        assert logs.returncode == 0 and "job_done" in logs.stdout, logs
        assert answers("/")[0] == 200  # the dashboard's page
        status, metrics = answers("/metrics", admin)
        assert status == 200 and 'hookline_jobs{destination="mine",status="done"} 2' in metrics

        # systemctl stop: SIGTERM to the supervisor, a clean stop.
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
    log_file = Path(settings["log_file"])
    assert '"event": "supervisor_stopped"' in log_file.read_text()


def test_the_test_runs_the_documented_steps():
    """OPERATIONS.md's "Installing" shows the steps the test above runs (relocated)."""
    text = (ROOT / "OPERATIONS.md").read_text()
    section = text.split("## Installing", 1)[1].split("\n## ", 1)[0]
    for step in (f"python3 -m venv /{VENV}",
                 f"/{VENV}/bin/pip install ./hookline/shared/client ./hookline",
                 f"ln -s /{VENV}/bin/hookline /{LINK}",
                 f"install -m 0640 -o root -g hookline hookline/deploy/hookline.toml /{ETC}",
                 "secrets.token_hex(32)", f"hookline --config /{ETC} init",
                 f"hookline --config /{ETC} serve --check", " ".join(SYSTEM_DIRS),
                 f"echo 'allow_networks = \"127.0.0.0/8\"' >> /{ETC}",
                 f"export HOOKLINE_CONFIG=/{ETC}",
                 "hl destinations add mine http://127.0.0.1:8000/webhooks",
                 f"WEBHOOK_SECRET=whsec_... /{VENV}/bin/python "
                 "hookline/docs/examples/receiver_aiohttp.py",
                 "hl send invoice.paid --data '{\"amount\": 42}' --id evt_1",
                 "hl event evt_1"):
        assert step in section, step
