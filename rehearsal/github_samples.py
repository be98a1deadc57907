"""The GitHub webhook payload examples in `rehearsal/data/github/` (octokit/webhooks, MIT
licence), turned into hookline events for the demo and the tests.

They are part of the source repository, not of the installed package (273 files, 3.7 MB that
the service never reads): `hookline demo` finds them in a checkout (`make demo`), and an
installed hookline is pointed at a copy with `hookline demo --data DIR`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from hookline.shared.errors import ConfigError

DATA_FOLDER = "rehearsal/data/github"
"""Where the examples are in hookline's source repository."""


class DemoDataMissing(ConfigError):
    """The payload examples are not where the demo looks (an installed hookline, without a
    source checkout): a usage error naming where to get them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """One example: `github_event` is the X-GitHub-Event header value, `body` the raw file."""

    file_name: str
    github_event: str
    event_type: str
    delivery_id: str
    body: bytes


def samples_dir() -> Path:
    """The folder holding the payload examples in a checkout (`rehearsal/data/github/`, reached
    through the `hookline/rehearsal` symlink); absent from an installed wheel."""
    return Path(str(resources.files("hookline.rehearsal").joinpath("data", "github")))


def load_samples(folder: Path | None = None) -> list[Sample]:
    """Every example, sorted by file name.

    The event type is `<X-GitHub-Event>.<action>` when the payload has an action, else the
    header value alone (e.g. `pull_request.opened`, `push`). The delivery id is derived from
    the file name, so it is stable across runs (dedupe by it is meaningful).

    Args:
        folder: where the `*.json` examples are; None: :func:`samples_dir`.

    Raises:
        DemoDataMissing: the folder holds no `*.json` file.
    """
    folder = samples_dir() if folder is None else folder
    paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not paths:
        raise DemoDataMissing(
            f"no GitHub payload examples (*.json) in {folder}: they ship with hookline's "
            f"source repository ({DATA_FOLDER}/), not with the installed package; run the "
            f"demo from a checkout (`make demo`), or copy that folder and pass "
            f"`hookline demo --data DIR`")
    out = []
    for path in paths:
        body = path.read_bytes()
        github_event = path.name.split("__", 1)[0].split(".", 1)[0]
        action = json.loads(body).get("action")
        event_type = f"{github_event}.{action}" if isinstance(action, str) else github_event
        delivery_id = "gh-" + hashlib.sha256(path.name.encode()).hexdigest()[:24]
        out.append(Sample(file_name=path.name, github_event=github_event,
                          event_type=event_type, delivery_id=delivery_id, body=body))
    return out


def as_event_body(sample: Sample) -> bytes:
    """The `POST /v1/events` body for a sample: {"id", "type", "source", "data"}."""
    envelope = {"id": sample.delivery_id, "type": sample.event_type, "source": "github",
                "data": json.loads(sample.body)}
    return json.dumps(envelope, ensure_ascii=False).encode()
