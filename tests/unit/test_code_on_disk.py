"""The supervisor's check that the code on disk is still the one the service started with
(supervisor/code_on_disk.py): a real change is reported, a file caught half-written is not."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from hookline.supervisor import code_on_disk
from hookline.supervisor.code_on_disk import CodeWatch


@pytest.fixture(autouse=True)
def no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(code_on_disk, "REREAD_AFTER_S", 0.0)


def reads(monkeypatch: pytest.MonkeyPatch, *answers: Any) -> None:
    """read_version answers these in turn (an exception is raised), the last one for ever."""
    answers_left = itertools.chain(answers, itertools.repeat(answers[-1]))

    def read_version() -> str:
        answer = next(answers_left)
        if isinstance(answer, BaseException):
            raise answer
        return str(answer)

    monkeypatch.setattr(code_on_disk, "read_version", read_version)


def test_unchanged_code_is_no_change(monkeypatch):
    reads(monkeypatch, "1.0.0")
    assert CodeWatch().changed() is None


def test_a_new_version_is_a_change_named_with_both(monkeypatch):
    reads(monkeypatch, "1.0.0", "1.1.0")
    change = CodeWatch().changed()
    assert change is not None and "now 1.1.0 (schema sqlite" in change
    assert "started as 1.0.0 (schema sqlite" in change


def test_a_version_file_caught_half_written_is_read_again(monkeypatch):
    """Unreadable once (a half-written file), then the same as at start: no change, and no
    exception out of the supervisor's loop."""
    reads(monkeypatch, "1.0.0", SyntaxError("half a line"), "1.0.0")
    assert CodeWatch().changed() is None


def test_a_version_file_that_stays_unreadable_is_a_change(monkeypatch):
    reads(monkeypatch, "1.0.0", RuntimeError("no __version__ line"))
    change = CodeWatch().changed()
    assert change is not None and "unreadable (RuntimeError)" in change
