"""`hookline bench` refuses what it would run wrongly or ignore, with exit 2 and a message,
before it starts anything (in-process CLI calls; nothing is started, so nothing is left)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from hookline.rehearsal.loadgen import ARRIVALS
from hookline.supervisor.cli import main as cli_main


@pytest.mark.parametrize("extra", [[], ["--rate", "50", "--scenario", "everyday"],
                                   ["--rate", "50", "--compare"]],
                         ids=["flat-out", "scenario", "compare"])
def test_poisson_arrivals_it_would_not_use_are_refused(tmp_path: Path, capsys, extra):
    """`--arrivals poisson` paces a plain steady run only: flat out, in a scenario or with
    --compare it would be ignored."""
    out = tmp_path / "out"
    assert cli_main(["bench", "--arrivals", "poisson", "--out", str(out), *extra]) == 2
    assert "--arrivals poisson applies to a plain `hookline bench` run with --rate" in (
        capsys.readouterr().err)
    assert not out.exists()


@pytest.mark.parametrize("rate", ["0", "-5"])
def test_a_rate_not_above_zero_is_refused(tmp_path: Path, capsys, rate):
    """`--rate 0` or below is no steady rate (it used to run flat out, or fail in the load
    generator after the service had started)."""
    out = tmp_path / "out"
    assert cli_main(["bench", "--rate", rate, "--out", str(out)]) == 2
    assert "--rate must be above 0" in capsys.readouterr().err
    assert not out.exists()


def test_the_cli_offers_the_load_generators_arrivals():
    """The choices `hookline bench --arrivals` offers are the load generator's (the CLI
    names them itself, so as not to import the rehearsal code at start)."""
    parser_help = _help(["bench", "--help"])
    assert "{" + ",".join(ARRIVALS) + "}" in parser_help


def _help(argv: list[str]) -> str:
    """What the CLI prints for `argv` before it exits (a --help)."""
    text = io.StringIO()
    with contextlib.redirect_stdout(text), pytest.raises(SystemExit):
        cli_main(argv)
    return text.getvalue()
