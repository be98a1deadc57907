"""`hookline send`'s note when no job was made, in-process against the real ingest app on
127.0.0.1 and a real SQLite file: the only subscriber's payload filter turned the event away,
and the note says that may be why (the answer does not tell a filter from no subscriber); a
token that is not the service's is said to be so."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from aiohttp.test_utils import TestServer

from hookline.ingest.app import build_app
from hookline.shared.config import Config
from hookline.shared.signing import generate_secret
from hookline.shared.store.sqlite import SqliteStore
from hookline.supervisor.cli.main import main as cli_main

INGEST_TOKEN = "ingest-token-for-tests"


async def test_a_filtered_send_notes_the_filter(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "hookline.db")
    store = SqliteStore(path)
    await store.open()
    try:
        await store.add_destination(name="big", url="http://127.0.0.1:9/big",
                                    secret=generate_secret(), event_types=["order.paid"],
                                    max_in_flight=4, filter={"data.amount": {"$gte": 1000}})
        server = TestServer(build_app(store, Config(ingest_token=INGEST_TOKEN)),
                            host="127.0.0.1")
        await server.start_server()
        try:
            def send(event_id: str, amount: int) -> tuple[int, str, str]:
                code = cli_main(["--db", path, "send", "order.paid", "--id", event_id,
                                 "--data", json.dumps({"amount": amount}),
                                 "--url", str(server.make_url("/")).rstrip("/"),
                                 "--token", INGEST_TOKEN])
                out, err = capsys.readouterr()
                return code, out, err

            # the blocking client runs in a thread; the server answers on this loop
            code, answer, err = await asyncio.to_thread(send, "small-1", 5)
            assert code == 0 and answer.endswith(", 0 job(s)\n"), (answer, err)
            assert "none subscribes, or their payload filters turned it away" in err, err
            code, answer, err = await asyncio.to_thread(send, "big-1", 5000)
            assert code == 0 and answer.endswith(", 1 job(s)\n"), (answer, err)
            assert "note:" not in err, err

            # A token that is not the service's: said so, and which one was sent (exit 2).
            def send_with(token_args: list[str]) -> tuple[int, str]:
                code = cli_main(["--db", path, "send", "order.paid", "--url",
                                 str(server.make_url("/")).rstrip("/"), *token_args])
                return code, capsys.readouterr().err

            code, err = await asyncio.to_thread(send_with, ["--token", "not-the-one"])
            assert code == 2 and err.rstrip().endswith(
                "; the token from --token is not the running service's ingest_token"), err
        finally:
            await server.close()
    finally:
        await store.close()
