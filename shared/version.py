"""hookline's version, read once: for `hookline --version`, /metrics' `hookline_build_info`,
the ingest `Server` header and the workers' `User-Agent`.

The version is written in one place, shared/client/hookline_client/_version.py (the service
and hookline-client are released together, at the same version). The installed package's
metadata is the source; a checkout (PYTHONPATH pointing at the repository, or the editable
install) reads that file, so a bump shows without reinstalling.
"""

from __future__ import annotations

import ast
import tomllib
from importlib import metadata
from pathlib import Path

import hookline

# hookline/__init__.py is a real file (in a checkout hookline/shared is a symlink to shared/):
# the folder above its own is the checkout, or site-packages when installed.
_CHECKOUT = Path(hookline.__file__).resolve().parents[1]
_PYPROJECT = _CHECKOUT / "pyproject.toml"
_VERSION_FILE = _CHECKOUT / "shared" / "client" / "hookline_client" / "_version.py"


def _checkout_version() -> str | None:
    """`__version__` from the checkout's version file; None when this is not a checkout."""
    # An installed copy has no pyproject.toml beside it; a checkout's is ours, so a broken
    # version file is an error to see, not to hide.
    if not _PYPROJECT.is_file():
        return None
    with _PYPROJECT.open("rb") as fh:
        if tomllib.load(fh).get("project", {}).get("name") != "hookline":
            return None
    for node in ast.parse(_VERSION_FILE.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "__version__"):
            return str(ast.literal_eval(node.value))
    raise RuntimeError(f"{_VERSION_FILE} has no `__version__ = \"X.Y.Z\"` line")


def read_version() -> str:
    """The version string, e.g. `0.1.0`, read from disk now (the checkout's version file, else
    the installed package's metadata); `0+unknown` when neither source has one. The
    supervisor reads it again before each respawn (supervisor/code_on_disk.py)."""
    # A checkout on PYTHONPATH wins over an older installed copy: its version file
    # describes the code actually running.
    version = _checkout_version()
    if version is not None:
        return version
    try:
        return metadata.version("hookline")
    except metadata.PackageNotFoundError:
        return "0+unknown"


VERSION = read_version()
"""This hookline's version (`X.Y.Z`)."""
PRODUCT = f"hookline/{VERSION}"
"""The product token sent as ingest's `Server` header and the workers' `User-Agent`."""
