"""What pyproject.toml cannot say: the service's version, written once in
shared/client/hookline_client/_version.py (hookline-client's own build reads it there too),
and its runtime dependencies, which include `hookline-client` at exactly that version (a
TOML list cannot read it). Everything else about the build is in pyproject.toml; a release
never edits this file. MANIFEST.in puts the version file into the sdist, whose package is
`hookline/` only.
"""

import ast
from pathlib import Path

from setuptools import setup

_VERSION_FILE = Path(__file__).parent / "shared/client/hookline_client/_version.py"


def _version() -> str:
    """`__version__` from the version file, read without importing it."""
    for node in ast.parse(_VERSION_FILE.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "__version__"):
            return str(ast.literal_eval(node.value))
    raise SystemExit(f"{_VERSION_FILE}: no `__version__ = \"X.Y.Z\"` line")


VERSION = _version()

setup(version=VERSION, install_requires=[
    # the publishing client and the receiver kit (`hookline send`), built from shared/client/
    f"hookline-client=={VERSION}",
    "aiohttp>=3.9,<4",
    # hookline runs each whole transaction as one call on aiosqlite's thread
    # (shared/store/sqlite.py); the range is pinned because that hook is private.
    "aiosqlite>=0.20,<0.23",
    # the PostgreSQL store (shared/store/postgres.py), for many hosts
    # 0.30: Connection.get_reset_query, which the pool's reset (shared/store/postgres.py) runs
    "asyncpg>=0.30,<1",
    "uvloop>=0.19; sys_platform != 'win32'",
    "structlog>=24.1",
    # GET /metrics: Prometheus text, from a custom collector reading the store
    "prometheus_client>=0.20,<1",
    # the event-type catalogue's JSON Schemas (draft 2020-12), compiled once per version
    # and checked at publish (shared/catalogue.py); measured faster than fastjsonschema,
    # which does not know draft 2020-12 (docs/benchmarks.md)
    "jsonschema-rs>=0.29,<1",
])
