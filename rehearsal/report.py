"""The rehearsal's HTML report: a table of scenarios, a timeline each, and small SVG plots.

Plain HTML with inline SVG (no script, no external assets); every value is escaped.
"""

from __future__ import annotations

import html
from typing import Any

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:left;vertical-align:top}.pass{color:#176f2c;font-weight:bold}
.fail{color:#b00020;font-weight:bold}details{margin:.3em 0}code{font-size:12px}
.drill{color:#6a1b9a}
"""


def render(results: list[dict[str, Any]], title: str = "hookline operations rehearsal") -> str:
    """The whole report page for `results` (the completion.json entries plus timelines)."""
    e = html.escape
    rows = "".join(
        f"<tr><td><a href='#{e(r['name'])}'>{e(r['name'])}</a></td><td>{e(r['expected'])}</td>"
        f"<td class='{'pass' if r['passed'] else 'fail'}'>{'pass' if r['passed'] else 'FAIL'}"
        f"</td><td>{r['duration_s']:.1f} s</td></tr>" for r in results)
    sections = "".join(_section(r) for r in results)
    passed = sum(r["passed"] for r in results)
    return (f"<!doctype html><meta charset='utf-8'><title>{e(title)}</title>"
            f"<style>{_STYLE}</style><h1>{e(title)}</h1>"
            f"<p>{passed} of {len(results)} scenarios passed.</p>"
            f"<table><tr><th>scenario</th><th>expected</th><th>result</th><th>time</th></tr>"
            f"{rows}</table>{sections}")


def _timeline_fields(entry: dict[str, Any]) -> str:
    """A timeline entry's own fields as `k=v, ...` (time, what and source have columns)."""
    return ", ".join(f"{k}={v}" for k, v in entry.items() if k not in ("t", "what", "source"))


def _section(r: dict[str, Any]) -> str:
    e = html.escape
    checks = "".join(f"<li class='{'pass' if ok else 'fail'}'>{e(name)}</li>"
                     for name, ok in r["checks"].items())
    error = f"<p class='fail'>error: {e(r['error'])}</p>" if r.get("error") else ""
    timeline = "".join(
        f"<tr class='{e(t['source'])}'><td>{t['t']:.3f}</td><td>{e(t['what'])}</td>"
        f"<td><code>{e(_timeline_fields(t))}</code></td></tr>" for t in r.get("timeline", []))
    return (f"<h2 id='{e(r['name'])}'>{e(r['name'])}</h2><p>{e(r['expected'])}</p>"
            f"<ul>{checks}</ul>{error}<p>observed: <code>{e(str(r['observed']))}</code></p>"
            f"{attempts_plot(r.get('attempts_t', []), r.get('marks_t', []))}"
            f"<details><summary>timeline ({len(r.get('timeline', []))} entries, seconds "
            f"from start)</summary><table>{timeline}</table></details>")


def attempts_plot(points: list[tuple[float, str]], marks: list[tuple[float, str]],
                  width: int = 720, height: int = 120) -> str:
    """An SVG strip: one dot per attempt start (green 2xx, red otherwise), drill marks as
    vertical lines. `points` and `marks` are (seconds from start, label)."""
    if not points and not marks:
        return ""
    end = max([t for t, _ in points] + [t for t, _ in marks] + [1.0]) * 1.05

    def x(t: float) -> float:
        return 40 + (width - 60) * t / end

    dots = "".join(
        f"<circle cx='{x(t):.1f}' cy='{60 + (hash(label) % 30) - 15}' r='3' "
        f"fill='{'#2e7d32' if label.startswith('2') else '#c62828'}'>"
        f"<title>{html.escape(label)} at {t:.3f} s</title></circle>" for t, label in points)
    lines = "".join(
        f"<line x1='{x(t):.1f}' x2='{x(t):.1f}' y1='10' y2='{height - 20}' stroke='#6a1b9a' "
        f"stroke-dasharray='4 3'><title>{html.escape(label)}</title></line>"
        f"<text x='{x(t) + 3:.1f}' y='20' font-size='10' fill='#6a1b9a'>"
        f"{html.escape(label[:28])}</text>" for t, label in marks)
    axis = (f"<line x1='40' x2='{width - 20}' y1='{height - 20}' y2='{height - 20}' "
            f"stroke='#999'/><text x='40' y='{height - 5}' font-size='10'>0 s</text>"
            f"<text x='{width - 60}' y='{height - 5}' font-size='10'>{end:.1f} s</text>")
    return (f"<svg width='{width}' height='{height}' role='img' aria-label='attempts over "
            f"time'>{axis}{lines}{dots}</svg>")
