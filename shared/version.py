"""hookline's version, read once: for `hookline --version`, the ingest `Server` header and
the workers' `User-Agent`.

The installed package's metadata is the source; a source checkout that was never installed
(PYTHONPATH pointing at the repository) falls back to pyproject.toml's `version`.
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

import hookline

# hookline/__init__.py is a real file (in a checkout hookline/shared is a symlink to shared/):
# the folder above its own is the checkout, or site-packages when installed.
_PYPROJECT = Path(hookline.__file__).resolve().parents[1] / "pyproject.toml"


def _read_version() -> str:
    """The version string, e.g. `0.1.0`; `0+unknown` when neither source has one."""
    # A checkout on PYTHONPATH wins over an older installed copy: its pyproject.toml
    # describes the code actually running.
    # An installed copy has no pyproject.toml beside it; a checkout's is ours, so a broken
    # one is an error to see, not to hide.
    if _PYPROJECT.is_file():
        with _PYPROJECT.open("rb") as fh:
            project = tomllib.load(fh).get("project", {})
        if project.get("name") == "hookline" and isinstance(project.get("version"), str):
            return str(project["version"])
    try:
        return metadata.version("hookline")
    except metadata.PackageNotFoundError:
        return "0+unknown"


VERSION = _read_version()
"""This hookline's version (`X.Y.Z`)."""
PRODUCT = f"hookline/{VERSION}"
"""The product token sent as ingest's `Server` header and the workers' `User-Agent`."""
