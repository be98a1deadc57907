"""How the supervisor starts a child so that it imports hookline's own modules.

`python -m hookline.ingest` puts the working directory first on the import path, so a service
started from a folder holding a package named `hookline` (another checkout, say) would run that
one instead. Children therefore start with `-P` (Python 3.11+: prepend nothing unsafe to the
import path) and with the folder that holds this copy of hookline first on PYTHONPATH, ahead of
whatever the caller's PYTHONPATH holds.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import hookline

# hookline/__init__.py is a real file in a checkout (where hookline/shared and its siblings are
# symlinks to the top-level folders) and in site-packages alike: its folder's parent is the
# import root either way, which this module's own resolved path would not be in a checkout.
CODE_ROOT = Path(hookline.__file__).resolve().parents[1]
"""The folder that holds the running `hookline` package (a checkout, or site-packages)."""


def child_argv(module: str, *args: str) -> tuple[str, ...]:
    """The command line running `python -m module ARGS` with this interpreter, the working
    directory kept off the import path (`-P`)."""
    return (sys.executable, "-P", "-m", module, *args)


def child_import_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The PYTHONPATH a child needs: :data:`CODE_ROOT` first, then `environ`'s own entries."""
    existing = environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(CODE_ROOT), existing) if p)}
