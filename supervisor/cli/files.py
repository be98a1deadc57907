"""The files CLI options name: one reader of JSON (or YAML) documents and one writer, so a
file that is missing, a directory, not UTF-8, not JSON, nested too deep or holding text no
database can store is the option's one-line error and exit 2 (InvalidInput), never a
traceback, whichever command reads it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hookline.shared.errors import InvalidInput
from hookline.shared.policy.inputs import MAX_JSON_DEPTH, json_document, json_problem

YAML_SUFFIXES = (".yaml", ".yml")


def read_json_file(path: str | Path, option: str, *, yaml_ok: bool = False) -> Any:
    """The JSON document in a file (YAML when `yaml_ok` and the name ends .yaml/.yml; that
    needs PyYAML).

    Args:
        path: the file, as given on the command line.
        option: the option (or argument) that named it, e.g. `--filter-file`; errors name it.
        yaml_ok: whether a .yaml/.yml file is read as YAML.

    Returns:
        The parsed value, checked by shared/policy/inputs.py's json_document (at most
        MAX_JSON_DEPTH levels deep, every string storable as UTF-8).

    Raises:
        InvalidInput(option): the file cannot be read or is not a fit document (exit 2).
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(option, f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        if yaml_ok and path.suffix in YAML_SUFFIXES:
            return _yaml_document(path, raw, option)
        return json_document(option, raw)
    except InvalidInput as exc:
        raise InvalidInput(option, f"{path} {exc.detail}") from None


def write_text_file(path: str | Path, text: str, option: str) -> None:
    """Write `text` (UTF-8) to `path`, replacing it. Raises InvalidInput(option) when it
    cannot be written (no such folder, a directory, no permission): exit 2."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(option, f"cannot write {path}: {exc.strerror or exc}") from None


def _yaml_document(path: Path, raw: bytes, option: str) -> Any:
    """A YAML file's value, with the JSON checks (its text must be UTF-8)."""
    try:
        import yaml  # type: ignore[import-untyped]  # noqa: PLC0415  (optional)
    except ImportError:
        raise InvalidInput(option, "is YAML: install PyYAML, or convert it to JSON") from None
    try:
        value = yaml.safe_load(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidInput(option, f"is not valid UTF-8 (byte {exc.start})") from None
    except RecursionError:
        raise InvalidInput(option, f"is nested deeper than {MAX_JSON_DEPTH} levels") from None
    except yaml.YAMLError as exc:
        raise InvalidInput(option, f"is not valid YAML: {exc}") from None
    if (problem := json_problem(value)) is not None:
        raise InvalidInput(option, problem)
    return value
