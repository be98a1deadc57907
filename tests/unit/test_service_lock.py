"""The service locks (shared/process/service_lock.py), the storage preflight of `serve` and
`serve --check` (shared/store/checks.py) and the ingest readiness rule (shared/config.py), on
real files under tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hookline.shared.config import Config, ingest_not_ready_reason
from hookline.shared.db_url import StorageRefused
from hookline.shared.errors import ConfigError
from hookline.shared.process.service_lock import (
    ServiceLock,
    ServiceLocked,
    held_service_locks,
    hold_database,
    service_lock_paths,
)
from hookline.shared.store.checks import check_database_folder, storage_preflight


def test_sqlite_locks_the_database_and_the_runtime_folder_postgresql_only_the_folder(
        tmp_path: Path):
    sqlite = Config(db=str(tmp_path / "h.db"))
    assert [p for p, _ in service_lock_paths(sqlite)] == [
        tmp_path / "h.db.serve.lock", tmp_path / "h.db.run" / "serve.lock"]
    postgres = Config(db="postgresql://u@db.example/hookline", runtime_dir=str(tmp_path / "run"))
    assert [p for p, _ in service_lock_paths(postgres)] == [tmp_path / "run" / "serve.lock"]


def test_a_held_lock_refuses_the_next_taker_naming_the_holder(tmp_path: Path):
    """flock locks belong to an open file, so a second take in this very process is refused
    like a second `serve` would be; the refused take writes nothing, and a release frees it."""
    first = Config(db=str(tmp_path / "h.db"), listen="127.0.0.1:8111")
    other_runtime = Config(db=str(tmp_path / "h.db"), listen="127.0.0.1:8222",
                           runtime_dir=str(tmp_path / "elsewhere"))
    assert held_service_locks(first) == []
    with ServiceLock.take(first):
        record = (tmp_path / "h.db.serve.lock").read_text()
        assert f'"pid": {os.getpid()}' in record and "127.0.0.1:8111" in record
        with pytest.raises(ServiceLocked) as refused:
            ServiceLock.take(other_runtime)  # another runtime folder: the database still counts
        assert f"supervisor pid {os.getpid()}, listening on 127.0.0.1:8111" in str(refused.value)
        assert (tmp_path / "h.db.serve.lock").read_text() == record
        held = held_service_locks(first)
        assert [(path.name, holder.pid) for path, _, holder in held] == [
            ("h.db.serve.lock", os.getpid()), ("serve.lock", os.getpid())]
    assert held_service_locks(first) == []
    with ServiceLock.take(other_runtime):
        assert "127.0.0.1:8222" in (tmp_path / "h.db.serve.lock").read_text()


def test_a_command_holding_the_database_keeps_a_service_from_starting_and_back(
        tmp_path: Path):
    """`migrate-store` holds the database's lock for its whole copy: a `serve` started
    meanwhile is refused, naming the command; and a running service keeps the command out."""
    config = Config(db=str(tmp_path / "h.db"), listen="127.0.0.1:8111")
    with hold_database(str(tmp_path / "h.db"), "hookline migrate-store"):
        with pytest.raises(ServiceLocked) as refused:
            ServiceLock.take(config)
        assert refused.value.holder.describe() == f"hookline migrate-store pid {os.getpid()}"
        assert "start the service once it has ended" in str(refused.value)
        assert not (tmp_path / "h.db.run" / "serve.lock").exists()  # refused: nothing held
    with ServiceLock.take(config):
        with pytest.raises(ServiceLocked) as refused:
            hold_database(str(tmp_path / "h.db"), "hookline migrate-store")
        assert refused.value.holder.listen == "127.0.0.1:8111"
    with hold_database(str(tmp_path / "h.db"), "hookline migrate-store"):
        pass  # both released


def test_a_runtime_folder_holds_one_supervisor_whatever_the_database(tmp_path: Path):
    run = str(tmp_path / "run")
    with ServiceLock.take(Config(db=str(tmp_path / "a.db"), runtime_dir=run)), \
            pytest.raises(ServiceLocked, match="runtime folder"):
        ServiceLock.take(Config(db=str(tmp_path / "b.db"), runtime_dir=run))


def test_the_refusal_advises_what_a_second_service_needs_on_its_backend(tmp_path: Path):
    """On PostgreSQL several services share one database, so a second one from the same
    folder is told to take its own runtime_dir and pid_file, not its own db; on SQLite, whose
    database serves one service, its own db."""
    postgres = Config(db="postgresql://u@db.example/hookline", runtime_dir=str(tmp_path / "run"))
    with ServiceLock.take(postgres), pytest.raises(ServiceLocked) as refused:
        ServiceLock.take(postgres)
    assert str(refused.value).endswith(
        "stop it first, or give this service its own runtime_dir and pid_file"), refused.value
    assert "db" not in str(refused.value).rpartition(";")[2]
    sqlite = Config(db=str(tmp_path / "h.db"))
    with ServiceLock.take(sqlite), pytest.raises(ServiceLocked) as refused:
        ServiceLock.take(sqlite)
    assert str(refused.value).startswith(f"another hookline serve already runs on database "
                                         f"{tmp_path / 'h.db'}:")
    assert "give this service its own db and runtime_dir" in str(refused.value)


def test_lock_and_preflight_refuse_a_missing_folder_creating_nothing(tmp_path: Path):
    config = Config(db=str(tmp_path / "missing" / "h.db"), runtime_dir=str(tmp_path / "run"))
    for attempt in (lambda: ServiceLock.take(config),
                    lambda: storage_preflight(config.db, allow_network_filesystem=False)):
        with pytest.raises(StorageRefused, match=r"missing does not exist"):
            attempt()
    assert os.listdir(tmp_path) == []


def test_preflight_of_a_database_not_created_yet_leaves_nothing_behind(tmp_path: Path):
    storage_preflight(str(tmp_path / "h.db"), allow_network_filesystem=False)
    assert os.listdir(tmp_path) == []  # the WAL probe's scratch file and -wal/-shm are gone


def test_folder_checks(tmp_path: Path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(StorageRefused, match="world-writable"):
        check_database_folder(str(shared / "h.db"), writable=False)
    (tmp_path / "file").write_text("")
    with pytest.raises(StorageRefused, match="is not a folder"):
        check_database_folder(str(tmp_path / "file" / "h.db"), writable=False)
    check_database_folder(str(tmp_path / "h.db"), writable=True)


def test_ready_needs_an_ingest_token_or_ingest_closed():
    reason = ingest_not_ready_reason(Config())
    assert reason is not None and "ingest_token" in reason and "ingest_closed" in reason
    assert ingest_not_ready_reason(Config(ingest_token="t")) is None
    assert ingest_not_ready_reason(Config(ingest_closed=True)) is None
    with pytest.raises(ConfigError, match="both set"):
        Config(ingest_token="t", ingest_closed=True)
    assert Config.load(env={"HOOKLINE_INGEST_CLOSED": "1"}).ingest_closed is True
