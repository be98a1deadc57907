"""The shipped Prometheus files: promtool accepts the rules and the scrape configuration, the
rule unit tests pass, and every alert has a case where it fires and one where it does not,
plus a summary and a runbook anchor that OPERATIONS.md has."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from tests.promtool import PROMETHEUS_DIR, ROOT, promtool

RULES = PROMETHEUS_DIR / "hookline.rules.yml"
RULE_TESTS = PROMETHEUS_DIR / "hookline.rules.test.yml"


def alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_promtool_checks_the_rules() -> None:
    checked = promtool("check", "rules", RULES.name)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in checked.stdout


def test_promtool_rule_unit_tests_pass() -> None:
    tested = promtool("test", "rules", RULE_TESTS.name)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_promtool_checks_the_scrape_configuration(tmp_path: Path) -> None:
    """The scrape configuration is valid once its token file exists (promtool checks it)."""
    config = (PROMETHEUS_DIR / "prometheus.yml").read_text()
    token_file = "/etc/prometheus/hookline-admin-token"
    assert token_file in config  # /metrics needs the admin token
    (tmp_path / "token").write_text("t0ken\n")
    (tmp_path / "prometheus.yml").write_text(config.replace(token_file, str(tmp_path / "token")))
    shutil.copy(RULES, tmp_path / RULES.name)
    checked = promtool("check", "config", "prometheus.yml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    fired: set[str] = set()
    quiet: set[str] = set()
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            (fired if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {rule["alert"] for rule in alerts()}
    assert names - fired == set(), "alerts never shown firing"
    assert names - quiet == set(), "alerts never shown quiet"


def test_every_alert_has_a_summary_and_a_runbook_section() -> None:
    headings = {_anchor(line.lstrip("#").strip())
                for line in (ROOT / "OPERATIONS.md").read_text().splitlines()
                if line.startswith("#")}
    for rule in alerts():
        annotations = rule["annotations"]
        assert annotations["summary"], rule["alert"]
        document, anchor = annotations["runbook"].split("#")
        assert document == "OPERATIONS.md" and anchor in headings, rule["alert"]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-")


def _runbook(alert: str) -> str:
    """The text of `alert`'s runbook section in OPERATIONS.md (up to the next heading)."""
    text = (ROOT / "OPERATIONS.md").read_text()
    section = re.search(rf"(?ms)^#+ {re.escape(alert)}\n(.*?)(?=^#|\Z)", text)
    assert section, alert
    return section.group(1)


def test_every_runbook_command_is_one_the_cli_takes() -> None:
    """Each `hookline ...` command a runbook names parses with the real CLI (its
    subcommand and flags exist), placeholders (NAME, TENANT, ID, N) standing for "1"."""
    from hookline.supervisor.cli.main import build_parser

    commands = [(rule["alert"], command) for rule in alerts()
                for command in re.findall(r"`hookline ([^`]+)`", _runbook(rule["alert"]))]
    assert commands
    for alert, command in commands:
        words = [re.sub(r"^[A-Z][A-Z_]*$", "1", word) for word in command.split()]
        try:
            build_parser().parse_args(words)
        except SystemExit as refused:
            raise AssertionError(f"{alert}: `hookline {command}` is refused") from refused


def test_the_failing_destination_runbook_finds_any_tenants_destination() -> None:
    """A destination of a tenant other than the default one is labelled TENANT~NAME; the
    runbook names the commands that show it: the list of every tenant's destinations with
    their failure streak, the stats of that tenant (`hookline stats` alone shows the
    default tenant's destinations only), and its jobs by the alert's label as it is or by
    tenant and name."""
    runbook = _runbook("HooklineDestinationFailing")
    for named in ("TENANT~NAME", "`hookline destinations list`",
                  "`hookline stats --tenant TENANT`", "`hookline jobs --destination LABEL`",
                  "--tenant acme --destination billing"):
        assert named in runbook, named
