"""deploy/hookline.toml documents every setting: each Config field has a `name = value` line
(set, or commented out showing its default), the file loads as shipped, and every value it
shows is one hookline accepts."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from hookline.shared.config import Config

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "hookline.toml"
_SETTING_LINE = re.compile(r"^(?:# )?([a-z_]+) = (.+?)(?:\s+# .*)?$")


def _shown_values() -> dict[str, str]:
    """Setting name -> the TOML value of its first `name = value` line, commented or not."""
    shown: dict[str, str] = {}
    for line in EXAMPLE.read_text().splitlines():
        if (match := _SETTING_LINE.match(line)) is not None:
            shown.setdefault(match.group(1), match.group(2))
    return shown


def test_every_setting_is_in_the_example_config():
    fields = [f.name for f in dataclasses.fields(Config)]
    shown = _shown_values()
    missing = [name for name in fields if name not in shown]
    assert missing == [], f"add these settings to deploy/hookline.toml: {missing}"
    unknown = sorted(set(shown) - set(fields))
    assert unknown == [], f"deploy/hookline.toml shows settings hookline lacks: {unknown}"


def test_example_config_loads_as_shipped_and_uncommented(tmp_path: Path):
    """As shipped it is valid; with every line uncommented (first occurrence) too, and each
    commented default equals the real default, so the file cannot drift from the code."""
    shipped = Config.load(file=EXAMPLE)
    assert shipped.db == "/var/lib/hookline/hookline.db"
    everything = tmp_path / "all.toml"
    everything.write_text("".join(f"{name} = {value}\n"
                                  for name, value in _shown_values().items()))
    Config.load(file=everything)
    defaults = Config()
    commented = [line for line in EXAMPLE.read_text().splitlines()
                 if line.startswith("# ") and _SETTING_LINE.match(line)]
    for line in commented:
        match = _SETTING_LINE.match(line)
        assert match is not None
        name, value = match.group(1), match.group(2)
        if getattr(defaults, name) is None or name == "db":
            continue  # an example for a setting unset by default, or db's PostgreSQL form
        single = tmp_path / f"{name}.toml"
        single.write_text(f"{name} = {value}\n")
        assert getattr(Config.load(file=single), name) == getattr(defaults, name), line
