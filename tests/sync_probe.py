"""A worker's SQLite store in a process of its own, driven line by line over stdin, so that a
test can trace (and fail) its real fsync calls from outside with strace
(tests/unit/test_store_durable_claims.py).

`python -m tests.sync_probe DB SYNCHRONOUS` opens DB as a worker does (inline, with
`synchronous` SYNCHRONOUS), prints `{"ready": true}`, then answers each line on stdin with
one JSON line:
- `claim`: claim up to 10 jobs; `{"claimed": [event type, ...]}`, or `{"error": "Class:
  message"}`;
- `fail`: finish every claim held with an HTTP 500 (a retry in an hour; the destination's
  failure run reaches its `failing` announcement at once); `{"finished": n}`;
- `done`: finish every claim held with a 200; `{"finished": n}`;
- `quit`: exit at once, without closing the store (its WAL stays, as after a crash).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from hookline.shared.models import AttemptResult, Claim, Done, Outcome, Retry
from hookline.shared.policy.delivery import BreakerPolicy
from hookline.shared.policy.notify import NotifyPolicy
from hookline.shared.store.sqlite import SqliteStore

_NEVER_PAUSE = BreakerPolicy(failures=100, min_span_s=0.0, window_s=0.0)


async def serve(db: str, synchronous: str) -> None:
    """Open the store and answer stdin's commands (module docstring) until `quit`."""
    store = SqliteStore(db, synchronous=synchronous, inline=True)
    await store.open()
    store.notify = NotifyPolicy(failing_streak=1, failing_after_s=0.0,
                                dead_letters_step=100, dead_letters_interval_s=0.0)
    held: list[Claim] = []
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        command = line.strip()
        answer: dict[str, object]
        if command == "claim":
            try:
                claims = await store.claim("w", 10, lease_s=30, max_attempts=5)
            except Exception as exc:  # noqa: BLE001  (the test reads what was raised)
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            else:
                held += claims
                answer = {"claimed": [claim.event_type for claim in claims]}
        elif command in ("fail", "done"):
            status = 500 if command == "fail" else 200
            outcome: Outcome = Retry(delay_s=3600.0, error="HTTP 500") if status == 500 \
                else Done()
            result = AttemptResult(started_at=0.0, duration_s=0.01, status_code=status)
            await store.finish([(claim, outcome, result) for claim in held],
                               breaker=_NEVER_PAUSE)
            answer = {"finished": len(held)}
            held = []
        else:
            sys.stdout.flush()
            os._exit(0)
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1], sys.argv[2]))
