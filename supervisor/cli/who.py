"""Who runs a CLI command, for its audit lines: the effective user, and the person who
switched to it (`sudo -u`, `su`, `runuser`) when that can be told.

The invoking user is taken, first found wins, from:

1. `SUDO_USER` (or `DOAS_USER`): set by sudo and doas to the user who ran them;
2. the login uid (`/proc/self/loginuid`): kept by the kernel from the login session across
   every user switch, when PAM set it (not in most containers);
3. the parent process, when it is `su`, `runuser`, `sudo`, `doas` or `setpriv`: these keep
   running under the invoker's real uid while the command they started runs.

None of these is proof against a determined user (the environment is theirs to set); they
name the person in the ordinary case, beside the effective user that did the work.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

_NO_LOGIN_UID = 4294967295  # (uid_t)-1: no login session recorded
_SWITCHERS = frozenset({"su", "runuser", "sudo", "doas", "setpriv"})


def user_name(uid: int) -> str:
    """The login name of `uid`, or the uid as a string when the system has no entry."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def invoking_user() -> str | None:
    """The user who switched to this process's effective user (module docstring), or None
    when nobody did or it cannot be told."""
    euid = os.geteuid()
    for variable in ("SUDO_USER", "DOAS_USER"):
        if name := os.environ.get(variable):
            return name if name != user_name(euid) else None
    for uid in (_login_uid(), _switching_parent_uid()):
        if uid is not None and uid != euid:
            return user_name(uid)
    return None


def _login_uid() -> int | None:
    try:
        uid = int(Path("/proc/self/loginuid").read_text())
    except (OSError, ValueError):
        return None
    return None if uid == _NO_LOGIN_UID else uid


def _switching_parent_uid() -> int | None:
    """The real uid of the parent process when it is a user-switching command."""
    parent = Path(f"/proc/{os.getppid()}")
    try:
        if (parent / "comm").read_text().strip() not in _SWITCHERS:
            return None
        for line in (parent / "status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])  # real, effective, saved, filesystem
    except (OSError, ValueError, IndexError):
        return None
    return None
