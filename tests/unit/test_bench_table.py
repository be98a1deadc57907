"""README.md's benchmark results block (rehearsal/bench_table.py, `hookline bench-table`),
rendered from real bench.json files of a small run (tests/unit/data/bench/: `hookline bench
--events 3000` and the same with `--rate 1000`; flat.json's load is recorded as wrk's, the
only flat-out load the table accepts)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from hookline.rehearsal import bench_table
from hookline.rehearsal.bench_sections import BenchTableError
from hookline.rehearsal.bench_table import BEGIN, END
from hookline.shared.policy.filters import check_filter
from hookline.supervisor.cli import main
from hookline.supervisor.cli.main import build_parser

DATA = Path(__file__).parent / "data" / "bench"
FLAT, STEADY = DATA / "flat.json", DATA / "steady.json"
BEFORE = "# project\n\nSome text, with a *trailing space* \n\n"
AFTER = "\n\n## Next section\nkept as it is\n"


@pytest.fixture
def readme(tmp_path: Path) -> Path:
    """A README with an old results block between other text."""
    path = tmp_path / "README.md"
    path.write_text(f"{BEFORE}{BEGIN}\n| old | table |\n{END}{AFTER}")
    return path


def test_block_is_replaced_and_the_text_outside_kept_byte_for_byte(readme):
    """Only the block changes: it starts with BEGIN, ends with END, and rewriting it again
    from the same files changes nothing."""
    bench_table.update_readme(readme, FLAT, STEADY)
    text = readme.read_text()
    assert text.startswith(BEFORE + BEGIN) and text.endswith(END + AFTER)
    assert "| old | table |" not in text
    assert text[len(BEFORE):-len(AFTER)] == bench_table.render_block(FLAT, STEADY, None, readme)
    bench_table.update_readme(readme, FLAT, STEADY)
    assert readme.read_text() == text


def test_table_gives_result_target_and_ratio_for_every_target():
    """Every target has a row; figures come from the right run, ratios are result/target."""
    block = bench_table.render_block(FLAT, STEADY)
    flat, steady = json.loads(FLAT.read_text()), json.loads(STEADY.read_text())
    for target in bench_table.TARGETS.values():
        assert f"| {target.measure} (" in block
    events_per_s = flat["ingest"]["events_per_s"]
    assert (f"| {events_per_s:,.0f} events/s | >= 15,000 events/s at 64 connections "
            f"| {events_per_s / 15_000:.2f} | no |") in block
    p99 = steady["delivery"]["latency_ms"]["p99"]
    assert f"| < 50 ms at 1,000 events/s | {p99 / 50:.2f} |" in block
    assert "| idle database writes (over 2 s) | none | none | n/a | yes |" in block


def test_block_describes_the_machine_dates_and_commands():
    """Cores, Python, fsync, backend and synchronous; each run's date; the commands that
    reproduce the runs and the table."""
    block = bench_table.render_block(FLAT, STEADY)
    assert "Machine: 2 cores, Python 3.11.7, backend sqlite (SQLite file), synchronous=FULL;" \
        in block
    assert "fsync p50 / p99 0.139 / 0.207 ms (flat-out run)" in block
    assert "flat-out run of 2026-12-01" in block and "steady run of 2026-12-01" in block
    assert ("hookline bench --events 3000 --rate 1000 --workers 2 --concurrency 64 "
            "--synchronous FULL --backend sqlite --load auto --idle-s 2 "
            "--out results/readme/rate-1000") in block
    assert f"hookline bench-table --flat {FLAT} --steady {STEADY} --readme README.md" in block


@pytest.mark.parametrize("text", [
    f"{BEFORE}{AFTER}",  # no block
    f"{BEFORE}{BEGIN}\n{AFTER}",  # no end
    f"{BEFORE}{END}\n{BEGIN}{AFTER}",  # out of order
    f"{BEGIN}{END}\n{BEGIN}{END}",  # twice
])
def test_missing_or_broken_block_is_an_error_and_the_file_is_untouched(tmp_path, text):
    """Without exactly one BEGIN then END, nothing is written and the error names them."""
    path = tmp_path / "README.md"
    path.write_text(text)
    with pytest.raises(BenchTableError, match="bench-results"):
        bench_table.update_readme(path, FLAT, STEADY)
    assert path.read_text() == text


def test_cli_exits_1_with_a_message_when_the_block_is_missing(tmp_path, capsys):
    """`hookline bench-table` on a README without the block: exit 1, one clear line."""
    path = tmp_path / "README.md"
    path.write_text(BEFORE)
    code = main(["bench-table", "--flat", str(FLAT), "--steady", str(STEADY),
                 "--readme", str(path)])
    assert code == 1
    assert f"hookline bench-table: the README needs {BEGIN}" in capsys.readouterr().err
    assert path.read_text() == BEFORE


def test_cli_rewrites_the_block(readme, capsys):
    """`hookline bench-table` exits 0 and rewrites the block."""
    code = main(["bench-table", "--flat", str(FLAT), "--steady", str(STEADY),
                 "--readme", str(readme)])
    assert code == 0 and "rewritten" in capsys.readouterr().out
    assert "| deliveries/s from a backlog (2 workers) |" in readme.read_text()


def _flat_copy(tmp_path: Path, n: int, *, vs_bare: float, rss_mib: float,
               idle_written: bool = False) -> Path:
    """FLAT with its delivery_vs_bare_client ratio, a worker's peak RSS and its idle write
    replaced, written as flat-N.json."""
    run = json.loads(FLAT.read_text())
    run["delivery_vs_bare_client"] = {"ratio": vs_bare, "target": 0.5}
    run["peak_rss_mb"]["worker-1"] = rss_mib
    run["idle"]["database_written"] = idle_written
    run["options"]["out_dir"] = f"results/readme/flat-{n}"
    path = tmp_path / f"flat-{n}.json"
    path.write_text(json.dumps(run))
    return path


def test_several_runs_are_judged_on_their_median_with_the_range_shown(tmp_path, readme):
    """Three flat-out runs: a ratio row shows the median run's figure, judged against the
    target, with the lowest and highest; worker RSS and idle writes take the worst run;
    each run's command is listed, and the CLI takes several files per option."""
    paths = [_flat_copy(tmp_path, 1, vs_bare=0.414, rss_mib=50),
             _flat_copy(tmp_path, 2, vs_bare=0.577, rss_mib=70, idle_written=True),
             _flat_copy(tmp_path, 3, vs_bare=0.487, rss_mib=55)]
    block = bench_table.render_block(paths, [STEADY])
    assert ("| 0.487 of bare clients (median of 3 runs: 0.414 to 0.577) "
            "| >= 0.5 of bare clients same concurrency, signing and receiver, same run "
            "| 0.97 | no |") in block
    assert f"| {70 * bench_table.MIB_TO_MB:.3g} MB (the largest of 4 runs) |" in block
    assert "| idle database writes (over 2 s) | written | none | n/a | no |" in block
    assert "Each result is the median of the 3 flat-out runs (the latency rows: of the 1 " \
        "steady run)" in block
    for n in (1, 2, 3):
        assert f"--out results/readme/flat-{n}\n" in block
    passing = [_flat_copy(tmp_path, 4, vs_bare=0.52, rss_mib=50),
               _flat_copy(tmp_path, 5, vs_bare=0.45, rss_mib=50),
               _flat_copy(tmp_path, 6, vs_bare=0.61, rss_mib=50)]
    assert "(median of 3 runs: 0.45 to 0.61) | >= 0.5 of bare clients same concurrency, " \
           "signing and receiver, same run | 1.04 | yes |" in bench_table.render_block(
               passing, STEADY)
    code = main(["bench-table", "--flat", *map(str, paths), "--steady", str(STEADY),
                 "--readme", str(readme)])
    assert code == 0
    assert f"--flat {paths[0]} {paths[1]} {paths[2]} --steady {STEADY}" in readme.read_text()


def test_result_files_of_the_wrong_kind_or_missing_are_errors(tmp_path):
    """A flat-out run given as the steady one (and the reverse), or a missing file, is
    refused with the file named."""
    with pytest.raises(BenchTableError, match="steady `--rate` run"):
        bench_table.render_block(FLAT, FLAT)
    with pytest.raises(BenchTableError, match="flat-out run"):
        bench_table.render_block(STEADY, STEADY)
    with pytest.raises(BenchTableError, match="cannot read result file"):
        bench_table.render_block(tmp_path / "absent.json", STEADY)


def test_compare_results_are_a_table_of_systems_with_ratios_to_hookline(tmp_path):
    """compare.json's `systems` become one row each with the figures both have (other
    figures left out), every figure with its ratio to hookline's; an incomplete run says so."""
    compare = tmp_path / "compare.json"
    compare.write_text(json.dumps({"options": {"events": "2000", "rate_per_s": "None",
                                               "workers": "2"}, "systems": {
        "hookline": {"events_per_s": 2000, "deliveries_per_s": 4000, "complete": True,
                     "latency_ms": {"p50": 5, "p99": 20}, "pids": {"ingest": 123}},
        "celery": {"events_per_s": 1000, "deliveries_per_s": 1000, "complete": False,
                   "latency_ms": {"p50": 10, "p99": 80}, "pids": {"worker": 987654321}}}}))
    block = bench_table.render_block(FLAT, STEADY, compare)
    assert ("| system | events/s accepted | deliveries/s | accept->delivered p50 ms "
            "| accept->delivered p99 ms |") in block
    assert "| hookline | 2,000 (1.00x) | 4,000 (1.00x) | 5 (1.00x) | 20 (1.00x) |" in block
    assert ("| celery (incomplete) | 1,000 (0.50x) | 1,000 (0.25x) | 10 (2.00x) "
            "| 80 (4.00x) |") in block
    assert "987654321" not in block  # process ids are left out
    assert ("2000 events, flat out, 2 workers, delivered to the receiver fixture; in brackets, "
            "the ratio to hookline's") in block
    assert f"--compare {compare}" in block
    assert "hookline bench --compare" not in block  # its options were not all recorded
    lean = json.loads(compare.read_text())
    lean["options"].update(receiver="lean", concurrency="64", synchronous="FULL",
                           out_dir="results/cmp")
    compare.write_text(json.dumps(lean))
    block = bench_table.render_block(FLAT, STEADY, compare)
    assert "2 workers, delivered to the lean receiver;" in block
    assert ("hookline bench --compare --events 2000 --workers 2 --concurrency 64 "
            "--synchronous FULL --compare-receiver lean --out results/cmp\n") in block


def test_without_compare_results_there_is_no_compare_table_and_without_systems_an_error(
        tmp_path):
    """No compare.json: no compare section. One without `systems`: an error naming it."""
    assert "| system |" not in bench_table.render_block(FLAT, STEADY)
    compare = tmp_path / "compare.json"
    compare.write_text(json.dumps({"other": 1}))
    with pytest.raises(BenchTableError, match="no `systems`"):
        bench_table.render_block(FLAT, STEADY, compare)



EVERYDAY = {
    "scenario": "everyday",
    "machine": {"cold_read_us": {"hot_us": 8.1, "after_sleep_us": 92.2, "ratio": 11.4,
                                  "sleep_ms": 10, "samples": 100}},
    "options": {"steady_rates": "(50.0, 200.0)", "phase_s": "20.0", "events": "20000",
                "rounds": "3", "workers": "2", "backend": "sqlite", "use_wrk": "True",
                "out_dir": "results/readme/everyday"},
    "rounds": [{}, {}, {}],
    "medians": {
        "flat_out": {"events_per_s": 3165.12, "ingest_cpu_ms_per_event": 0.304,
                     "workers_cpu_ms_per_delivery": 0.393},
        "steady": {
            "50": {"ingest_cpu_ms_per_event": 2.361, "workers_cpu_ms_per_delivery": 1.69,
                   "service_cores": 0.372, "ingest_cpu_vs_flat_out": 7.076,
                   "workers_cpu_vs_flat_out": 4.161, "latency_p50_ms": 16.1,
                   "latency_p99_ms": 38.01, "sent_latency_p99_ms": 44.2,
                   "floor_server_vs_hookline_flat_out": 2.07,
                   "floor_client_vs_hookline_flat_out": None},
            "200": {"ingest_cpu_ms_per_event": 1.854, "workers_cpu_ms_per_delivery": None,
                    "service_cores": None, "ingest_cpu_vs_flat_out": 6.099,
                    "workers_cpu_vs_flat_out": None, "latency_p50_ms": 12.45,
                    "latency_p99_ms": 59.24}},
        "huey_cpu_ratio": 1.51,
        "cold_read_us": {"hot_us": 9.0, "after_sleep_us": 120.5, "ratio": 13.4, "sleep_ms": 10,
                         "runs": 12}},
    "targets": {"cost_ratio_at_most": 1.5, "service_cores_below": 0.3, "p99_ms_at_most": 22.0,
                "at_rate": 200.0, "huey_cpu_ratio_at_least": 4.0},
    "checks": {"a": True, "b": False, "c": False},
    "out_of_reach": {"b": True, "c": False}}


def test_everyday_results_are_a_table_of_rates_with_multiples_of_flat_out(tmp_path):
    """scenario-everyday.json's medians become a row per rate after the flat-out one, each
    CPU figure with its multiple of flat out (a missing figure is `-`), the bare server's
    and client's CPU per request as multiples of hookline's flat-out cost (`-` when missing,
    as in a file from before they were measured), sent->delivered p99 beside the latency
    (`-` when missing), what a read costs after a sleep on the machine, then Huey's ratio,
    the checks met, those out of reach, and the command that reproduces the run."""
    everyday = tmp_path / "scenario-everyday.json"
    everyday.write_text(json.dumps(EVERYDAY))
    block = bench_table.render_block(FLAT, STEADY, everyday_path=everyday)
    assert "medians of 3 rounds" in block and "at most 1.5x flat out" in block
    assert "| flat out | 0.304 ms | 0.393 ms | - | - | - | - | - | - |\n" in block
    assert ("| 50 events/s | 2.36 ms (7.08x) | 1.69 ms (4.16x) | 0.372 | 16.1 ms / 38 ms "
            "| 44.2 ms | 2.07x / - |" in block)
    assert ("| 200 events/s | 1.85 ms (6.1x) | - | - | 12.4 ms / 59.2 ms | - | - / - | - / - "
            "| - / - |\n" in block)  # no floor, no durable floor: a file from before
    assert ("on this machine, the median of the rounds' 12 runs, a small SQLite read costs 9.0 "
            "µs of CPU back to back, 120.5 µs after 10 ms asleep (13.4x)):") in block
    older = json.loads(json.dumps(EVERYDAY))
    del older["medians"]["cold_read_us"]  # a file from before: the scenario's own probe
    everyday.write_text(json.dumps(older))
    assert ("on this machine, measured at the scenario's end, a small SQLite read costs 8.1 µs "
            "of CPU back to back, 92.2 µs after 10 ms asleep (11.4x)):") in (
        bench_table.render_block(FLAT, STEADY, everyday_path=everyday))
    assert ("1.51x hookline's (target at least 4.0x). Checks met: 1 of 3. Out of reach of any "
            "design on aiohttp no slower flat out than hookline: 1 of them") in block
    assert ("hookline bench --scenario everyday --rates 50,200 --phase-s 20 --events 20000 "
            "--rounds 3 --workers 2 --backend sqlite --out results/readme/everyday\n") in block
    assert f"--everyday {everyday}" in block
    assert "Everyday rates" not in bench_table.render_block(FLAT, STEADY)
    everyday.write_text(json.dumps({"scenario": "fairness"}))
    with pytest.raises(BenchTableError, match="not the result of"):
        bench_table.render_block(FLAT, STEADY, everyday_path=everyday)


def test_everyday_results_show_the_least_any_design_keeping_its_books_could_reach(tmp_path):
    """With the floor measured at a rate (both bare processes, at the rate and flat out),
    the row shows ingest's and the workers' least multiples of flat out for a design keeping
    its books at hookline's flat-out cost (rehearsal/everyday_reach.py), computed from the
    file's figures (a file written before `reach` was, here); the sentence counts the targets
    out of reach that way beyond those the bare HTTP alone puts there, with the service's
    least cores and Huey's ratio."""
    result = json.loads(json.dumps(EVERYDAY))
    result["medians"]["steady"]["200"].update({
        "floor_server_vs_hookline_flat_out": 1.415, "floor_server_vs_flat_out": 6.74,
        "floor_client_vs_hookline_flat_out": 1.112, "floor_client_vs_flat_out": 2.534,
        "floor_service_cores": 0.237})
    result["medians"]["flat_out"].update(ingest_cpu_ms_per_event=0.235,
                                         workers_cpu_ms_per_delivery=0.26)
    result["rounds"] = [{"huey": {"complete": True, "huey_cpu_s_per_1000_deliveries": 1.98}}]
    everyday = tmp_path / "scenario-everyday.json"
    everyday.write_text(json.dumps(result))
    block = bench_table.render_block(FLAT, STEADY, everyday_path=everyday)
    assert "| 1.42x / 1.11x | 2.21x / 1.67x | - / - |\n" in block
    assert "| 2.07x / - | - / - | - / - |\n" in block  # the floor's own ratios not at 50/s
    assert ("Out of reach of any design on aiohttp no slower flat out than hookline: 1 of "
            "them, where the bare HTTP alone costs more than the target allows") in block
    assert ("4 more where the bare HTTP plus hookline's own work beside it, at its flat-out "
            "cost per item, costs more than the target allows") in block
    assert ("the service takes at least 0.362 cores, and Huey's CPU per delivery is at "
            "most 3.26x the service's.") in block
    result["checks"]["ingest_cpu_at_200_within_1.5x_flat_out"] = True  # met: not counted
    everyday.write_text(json.dumps(result))
    assert " 3 more where" in bench_table.render_block(FLAT, STEADY, everyday_path=everyday)


def test_a_figure_the_run_lacks_is_n_a_and_not_met(tmp_path):
    """A run that delivered nothing (deliveries/s and latency None) gives `n/a` rows that
    are not met, rather than failing."""
    steady = json.loads(STEADY.read_text())
    steady["delivery"]["latency_ms"] = {"p50": None, "p90": None, "p99": None, "max": None}
    path = tmp_path / "steady.json"
    path.write_text(json.dumps(steady))
    block = bench_table.render_block(FLAT, path)
    assert "| n/a | < 10 ms at 1,000 events/s | n/a | no |" in block


def test_ratio_to_the_bare_aiohttp_ceiling_has_its_row(tmp_path):
    """A flat-out run with the ceiling phase shows ingest's share of the bare aiohttp
    server's rate against the 0.6 target; a run without that phase shows n/a."""
    flat = json.loads(FLAT.read_text())
    flat["ceiling"] = {"tool": "wrk", "events_per_s": 20_000.0}
    flat["ingest_vs_bare_aiohttp"] = {"ratio": 0.5, "target": 0.6}
    with_ceiling = tmp_path / "flat.json"
    with_ceiling.write_text(json.dumps(flat))
    block = bench_table.render_block(with_ceiling, STEADY)
    assert ("| ingest, share of a bare aiohttp server's rate (bare aiohttp 20,000 events/s, "
            "flat out, 64 connections, load by wrk) | 0.5 of bare aiohttp "
            "| >= 0.6 of bare aiohttp same load, same run | 0.83 | no |") in block
    assert ("| ingest, share of a bare aiohttp server's rate (no ceiling in this run) | n/a "
            "| >= 0.6 of bare aiohttp same load, same run | n/a | no |"
            ) in bench_table.render_block(FLAT, STEADY)


def test_ratios_to_the_bare_clients_have_their_rows(tmp_path):
    """A flat-out run with the sender's ceiling shows the workers' share of the bare clients'
    rate (>= 0.5) and their CPU per delivery as a multiple of the clients' (< 2.5), with the
    clients' figures; a run without that phase shows n/a for both."""
    flat = json.loads(FLAT.read_text())
    flat["sender_ceiling"] = {"clients": [{}, {}], "concurrency": 64, "requests": 9000,
                              "requests_per_s": 3000.0, "cpu_s_per_1000_requests": 0.19}
    flat["delivery_vs_bare_client"] = {"ratio": 0.6, "target": 0.5}
    flat["cpu_per_delivery_vs_bare_client"] = {"ratio": 3.0, "target": 2.5}
    with_ceiling = tmp_path / "flat.json"
    with_ceiling.write_text(json.dumps(flat))
    block = bench_table.render_block(with_ceiling, STEADY)
    clients = "2 bare clients x 64 in flight: 3,000 requests/s, 0.19 CPU s per 1,000"
    assert (f"| deliveries/s, share of bare aiohttp clients' rate ({clients}) "
            "| 0.6 of bare clients | >= 0.5 of bare clients same concurrency, signing and "
            "receiver, same run | 1.20 | yes |") in block
    assert (f"| worker CPU per delivery, multiple of a bare client's per request ({clients}) "
            "| 3 x bare clients | < 2.5 x bare clients same run | 1.20 | no |") in block
    without = bench_table.render_block(FLAT, STEADY)
    assert ("| deliveries/s, share of bare aiohttp clients' rate (no sender ceiling in this "
            "run) | n/a |") in without
    assert ("| worker CPU per delivery, multiple of a bare client's per request (no sender "
            "ceiling in this run) | n/a |") in without


def python_load_run(tmp_path: Path) -> Path:
    """flat.json as a run that fell back to the Python generator because wrk was missing."""
    run = json.loads(FLAT.read_text())
    run["ingest"].pop("tool")
    run["options"]["use_wrk"] = "True"
    run["load_generator"] = ("python (wrk not found: install the wrk package for figures "
                             "comparable to the README's)")
    path = tmp_path / "flat-python.json"
    path.write_text(json.dumps(run))
    return path


def test_a_flat_out_run_not_loaded_by_wrk_is_refused(tmp_path):
    """A flat-out run whose load came from the Python generator cannot make the table: the
    error names the file and the generator it used."""
    path = python_load_run(tmp_path)
    with pytest.raises(bench_table.BenchRunRefused,
                       match=f"refusing {path}: its load generator was python \\(wrk not found"):
        bench_table.render_block(path, STEADY)


def test_cli_exits_2_and_leaves_the_readme_when_the_run_was_not_loaded_by_wrk(
        readme, tmp_path, capsys):
    """`hookline bench-table` on a Python-generator run: exit 2, the reason, README untouched."""
    before = readme.read_text()
    path = python_load_run(tmp_path)
    code = main(["bench-table", "--flat", str(path), "--steady", str(STEADY),
                 "--readme", str(readme)])
    assert code == 2
    err = capsys.readouterr().err
    assert f"refusing {path}" in err and "not wrk" in err
    assert readme.read_text() == before


def test_of_two_runs_the_less_favourable_middle_one_is_judged(tmp_path):
    """With an even count of runs, the row shows the middle run less favourable to the
    target: the lower of two ratios (higher is better), the higher of two p99s."""
    paths = [_flat_copy(tmp_path, 1, vs_bare=0.45, rss_mib=50),
             _flat_copy(tmp_path, 2, vs_bare=0.55, rss_mib=50)]
    steadies = []
    for n, p99 in ((1, 40.0), (2, 60.0)):
        run = json.loads(STEADY.read_text())
        run["delivery"]["latency_ms"]["p99"] = p99
        steadies.append(tmp_path / f"steady-{n}.json")
        steadies[-1].write_text(json.dumps(run))
    block = bench_table.render_block(paths, steadies)
    assert "| 0.45 of bare clients (median of 2 runs: 0.45 to 0.55) |" in block
    assert "| 60 ms (median of 2 runs: 40 to 60) | < 50 ms at 1,000 events/s | 1.20 | no |" \
        in block


def test_machine_line_tells_what_a_read_costs_after_a_sleep(tmp_path):
    """A run that measured it (machine.cold_read_us) says in the machine line what a small
    SQLite read cost back to back and after 10 ms asleep; a run from before says nothing."""
    run = json.loads(FLAT.read_text())
    run["machine"]["cold_read_us"] = {"hot_us": 6.5, "after_sleep_us": 81.0, "ratio": 12.5,
                                      "sleep_ms": 10, "samples": 100}
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps(run))
    block = bench_table.render_block(flat, STEADY)
    assert ("(flat-out run), 0.17 / 0.22 ms (steady run); a small SQLite read costs 6.5 µs "
            "of CPU back to back, 81.0 µs after 10 ms asleep (12.5x) (flat-out run).") in block
    assert "SQLite read" not in bench_table.render_block(FLAT, STEADY)


def test_a_steady_run_with_random_arrivals_is_refused(tmp_path):
    """README's latency rows are for evenly paced events: a `--arrivals poisson` run is
    refused by name, as a flat-out run not loaded by wrk is."""
    run = json.loads(STEADY.read_text())
    run["options"]["arrivals"] = "poisson"
    steady = tmp_path / "steady.json"
    steady.write_text(json.dumps(run))
    with pytest.raises(bench_table.BenchRunRefused, match="--arrivals poisson"):
        bench_table.render_block(FLAT, steady)


def test_the_command_line_names_several_ingest_processes(tmp_path):
    """A run with `--ingest-processes 2` is reproduced with it; with one, nothing is said."""
    run = json.loads(FLAT.read_text())
    run["options"]["ingest_processes"] = "2"
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps(run))
    assert "--workers 2 --ingest-processes 2 --concurrency" in bench_table.render_block(
        flat, STEADY)
    assert "--ingest-processes" not in bench_table.render_block(FLAT, STEADY)


def test_a_runs_payload_filter_is_in_its_command_line():
    """A run made with `--filter` is reproduced with the same filter (bench.json keeps it as
    JSON beside the options' repr): `hookline bench`'s own parser reads it back, and its
    check accepts it; a run without one gets no `--filter`."""
    run = json.loads(FLAT.read_text())
    assert "--filter" not in bench_table.bench_command(run)
    given = {"type": {"$startsWith": "bench."}, "data.pad": {"$exist": True},
             "$or": [{"data.pad": {"$startsWith": "x"}}, {"tenant.metadata.region": "eu"}]}
    run["destination_filter"] = check_filter(given)
    args = shlex.split(bench_table.bench_command(run))
    assert args[0] == "hookline"
    parsed = build_parser().parse_args(args[1:])
    reproduced = json.loads(parsed.destination_filter)
    assert reproduced == given and check_filter(reproduced) == run["destination_filter"]


def test_everyday_results_show_what_the_least_durable_service_measured_puts_out_of_reach(
        tmp_path):
    """With the least durable service measured in each round (rehearsal/everyday_floor.py,
    durable_floor), the row shows its cost at the rate over hookline's flat-out cost (the
    median of the rounds'), and the sentence counts the checks not met that it puts out of
    reach, with its cores at the target rate and Huey's CPU per delivery over its."""
    result = json.loads(json.dumps(EVERYDAY))
    result["checks"] = {"ingest_cpu_at_200_within_1.5x_flat_out": False,
                        "workers_cpu_at_200_within_1.5x_flat_out": False,
                        "service_below_0.3_cores": False,
                        "huey_cpu_per_delivery_at_least_4x": False}
    result["rounds"] = [
        {"flat_out": {"ingest_cpu_ms_per_event": 0.25, "workers_cpu_ms_per_delivery": 0.3},
         "steady": {"200": {"durable": {"ingest_cpu_ms_per_event": 0.75,
                                        "deliverer_cpu_ms_per_delivery": 0.36,
                                        "cores": 0.35}}},
         # 1.8 ms / (0.75 / 3 + 0.36 ms) = 2.951
         "huey": {"complete": True, "huey_cpu_s_per_1000_deliveries": 1.8}},
        {"flat_out": {"ingest_cpu_ms_per_event": 0.2, "workers_cpu_ms_per_delivery": 0.3},
         "steady": {"200": {"durable": {"ingest_cpu_ms_per_event": 0.7,
                                        "deliverer_cpu_ms_per_delivery": 0.42,
                                        "cores": 0.33}}},
         "huey": {"unavailable": "redis-server not found"}}]
    everyday = tmp_path / "scenario-everyday.json"
    everyday.write_text(json.dumps(result))
    block = bench_table.render_block(FLAT, STEADY, everyday_path=everyday)
    # ingest: 0.75 / 0.25 = 3.0 and 0.7 / 0.2 = 3.5; delivery: 1.2 and 1.4.
    assert "| - / - | 3.25x / 1.3x |\n" in block
    assert ("3 of the checks not met are out of reach of any design that costs no less at "
            "the rate and is no slower flat out than hookline; it takes 0.34 cores at 200 "
            "events/s, and Huey's CPU per delivery is 2.95x its. Not bounded out of reach: "
            "workers_cpu_at_200_within_1.5x_flat_out.\n") in block
    # The measured bound supersedes the arithmetic's sentences (the bare HTTP's, the books').
    assert "Out of reach of any design on aiohttp" not in block
    result["checks"]["service_below_0.3_cores"] = True  # met: never counted out of reach
    everyday.write_text(json.dumps(result))
    assert "2 of the checks not met" in bench_table.render_block(FLAT, STEADY,
                                                                 everyday_path=everyday)
    # hookline's own figure below the floor's: no floor there, so no bound.
    result["checks"]["service_below_0.3_cores"] = False
    result["medians"]["steady"]["200"]["service_cores"] = 0.32
    everyday.write_text(json.dumps(result))
    block = bench_table.render_block(FLAT, STEADY, everyday_path=everyday)
    assert "2 of the checks not met" in block
    assert ("hookline's own figure is below that service's for service_below_0.3_cores: no "
            "bound there.") in block


def test_hooklines_work_beyond_the_least_durable_service_bounds_what_it_alone_does_not(
        tmp_path):
    """A check the least durable service alone does not put out of reach is counted once
    hookline's work beyond it, at its flat-out cost per item, is added to the floor's cost at
    the rate: (F + H - Ff) / H, the median of the rounds' own, with the bound named; a check
    that bound does not miss stays "not bounded", and a file without the floor's flat-out
    figures adds nothing."""
    result = json.loads(json.dumps(EVERYDAY))
    result["checks"] = {"ingest_cpu_at_200_within_1.5x_flat_out": False,
                        "workers_cpu_at_200_within_1.5x_flat_out": False}
    result["rounds"] = [
        {"flat_out": {"ingest_cpu_ms_per_event": 0.25, "workers_cpu_ms_per_delivery": 0.3,
                      "durable": {"ingest_cpu_ms_per_event": 0.15,
                                  "deliverer_cpu_ms_per_delivery": 0.2}},
         "steady": {"200": {"durable": {"ingest_cpu_ms_per_event": 0.75,
                                        "deliverer_cpu_ms_per_delivery": 0.36}}}},
        {"flat_out": {"ingest_cpu_ms_per_event": 0.2, "workers_cpu_ms_per_delivery": 0.3,
                      "durable": {"ingest_cpu_ms_per_event": 0.15,
                                  "deliverer_cpu_ms_per_delivery": 0.18}},
         "steady": {"200": {"durable": {"ingest_cpu_ms_per_event": 0.7,
                                        "deliverer_cpu_ms_per_delivery": 0.42}}}}]
    everyday = tmp_path / "scenario-everyday.json"
    everyday.write_text(json.dumps(result))
    block = bench_table.render_block(FLAT, STEADY, everyday_path=everyday)
    # The floor alone: ingest 3.0 and 3.5 (out of reach), delivery 1.2 and 1.4 (not); with
    # the work beyond it, delivery (0.36 + 0.1) / 0.3 = 1.533 and (0.42 + 0.12) / 0.3 = 1.8.
    assert ("1 of the checks not met are out of reach of any design that costs no less at "
            "the rate and is no slower flat out than hookline. 1 more is out of reach of "
            "such a design if whatever it spends flat out beyond that service's flat-out "
            "cost is no cheaper per item arriving one event at a time than in batches: "
            "workers_cpu_at_200_within_1.5x_flat_out (the rounds' median bound 1.67x).\n"
            ) in block
    assert "Not bounded out of reach" not in block
    # hookline's own ratio below that bound: the premise fails, the check is not counted.
    result["medians"]["steady"]["200"]["workers_cpu_vs_flat_out"] = 1.6
    everyday.write_text(json.dumps(result))
    block = bench_table.render_block(FLAT, STEADY, everyday_path=everyday)
    assert "1 more" not in block
    assert ("Not bounded out of reach: workers_cpu_at_200_within_1.5x_flat_out. hookline's "
            "own figure is below the bound with its cost above that service's for "
            "workers_cpu_at_200_within_1.5x_flat_out: that premise fails there.\n") in block
    result["medians"]["steady"]["200"]["workers_cpu_vs_flat_out"] = None
    # A bound inside the target leaves the check not bounded.
    result["rounds"][1]["steady"]["200"]["durable"]["deliverer_cpu_ms_per_delivery"] = 0.3
    everyday.write_text(json.dumps(result))  # 0.3 + 0.12 over 0.3: 1.4; median 1.467
    block = bench_table.render_block(FLAT, STEADY, everyday_path=everyday)
    assert "1 more with" not in block
    assert "Not bounded out of reach: workers_cpu_at_200_within_1.5x_flat_out." in block
    for r in result["rounds"]:  # a file from before the floor was measured flat out
        del r["flat_out"]["durable"]
    result["rounds"][1]["steady"]["200"]["durable"]["deliverer_cpu_ms_per_delivery"] = 0.42
    everyday.write_text(json.dumps(result))
    block = bench_table.render_block(FLAT, STEADY, everyday_path=everyday)
    assert "1 more with" not in block
    assert "Not bounded out of reach: workers_cpu_at_200_within_1.5x_flat_out." in block
