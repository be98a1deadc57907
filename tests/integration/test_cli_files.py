"""The files CLI options name (supervisor/cli/files.py), in-process on a real SQLite file: a
file that is missing, a directory, not UTF-8, nested past the depth limit or holding a lone
surrogate is the option's one-line error and exit 2, never a traceback, in every command
that reads or writes one."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookline.supervisor.cli.main import main as hookline_main

DEEP = b'{"data.a":' + b"[" * 3000 + b"]" * 3000 + b"}"

# (arguments, with FILE standing for the bad file; the option the message names)
READERS = [
    (["destinations", "update", "d", "--filter-file", "FILE"], "--filter-file"),
    (["destinations", "filter-test", "d", "--filter-file", "FILE"], "--filter-file"),
    (["event-types", "put", "a.b", "--schema", "FILE"], "--schema"),
    (["event-types", "put", "a.b", "--file", "FILE"], "--file"),
    (["event-types", "put", "a.b", "--schema", "GOOD", "--example", "FILE"], "--example"),
    (["event-types", "import", "FILE"], "file"),
]
BAD_FILES = {
    "latin1.json": (b'{"description": "caf\xe9"}', "not valid UTF-8"),
    "deep.json": (DEEP, "nested deeper than 64 levels"),
    "surrogate.json": (b'{"a": "\\ud800"}', "not valid Unicode"),
    "missing.json": (None, "cannot read"),
    "folder": (b"", "cannot read"),
}


@pytest.fixture
def db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """A database holding destination `d`."""
    path = str(tmp_path / "h.db")
    assert hookline_main(["--db", path, "init"]) == 0
    assert hookline_main(["--db", path, "destinations", "add", "d",
                          "https://example.com/h"]) == 0
    capsys.readouterr()
    return path


def _bad_file(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    content = BAD_FILES[name][0]
    if name == "folder":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content)
    return path


def _refused(capsys: pytest.CaptureFixture[str], code: int, option: str, text: str) -> None:
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"hookline: {option}: ") and text in err, err
    assert err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize("name", list(BAD_FILES))
@pytest.mark.parametrize(("args", "option"), READERS,
                         ids=[" ".join(a[:2]) + " " + o for a, o in READERS])
def test_a_bad_file_is_its_options_one_line_error(tmp_path: Path, db: str,
                                                  capsys: pytest.CaptureFixture[str],
                                                  args: list[str], option: str,
                                                  name: str) -> None:
    """Each reader refuses each kind of bad file with exit 2, naming the option."""
    good = tmp_path / "good.json"
    good.write_text('{"type": "object"}', encoding="utf-8")
    bad = _bad_file(tmp_path, name)
    argv = [str(bad) if a == "FILE" else str(good) if a == "GOOD" else a for a in args]
    _refused(capsys, hookline_main(["--db", db, *argv]), option, BAD_FILES[name][1])


@pytest.mark.parametrize("where", ["missing/dir/x.json", "."])
def test_export_to_a_path_it_cannot_write_exits_2(tmp_path: Path, db: str,
                                                  capsys: pytest.CaptureFixture[str],
                                                  where: str) -> None:
    """`event-types export --out` into a missing folder or onto a folder: exit 2."""
    code = hookline_main(["--db", db, "event-types", "export", "--out", str(tmp_path / where)])
    _refused(capsys, code, "--out", "cannot write")
