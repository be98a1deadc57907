"""The GitHub webhook payload examples shipped in `rehearsal/data/github/` (octokit/webhooks,
MIT licence), turned into hookline events for the demo, tests and benchmarks."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """One example: `github_event` is the X-GitHub-Event header value, `body` the raw file."""

    file_name: str
    github_event: str
    event_type: str
    delivery_id: str
    body: bytes


def samples_dir() -> Path:
    """The folder holding the payload examples."""
    return Path(str(resources.files("hookline.rehearsal").joinpath("data", "github")))


def load_samples() -> list[Sample]:
    """Every example, sorted by file name.

    The event type is `<X-GitHub-Event>.<action>` when the payload has an action, else the
    header value alone (e.g. `pull_request.opened`, `push`). The delivery id is derived from
    the file name, so it is stable across runs (dedupe by it is meaningful).
    """
    out = []
    for path in sorted(samples_dir().glob("*.json")):
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
