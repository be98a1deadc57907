"""Every link in README.md, OPERATIONS.md and docs/*.md leads somewhere: a relative link names
a file of the repository, and a `#anchor` (in the same document or another one) names one of
that document's headings, by GitHub's anchor rules."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "OPERATIONS.md", *sorted((ROOT / "docs").glob("*.md"))]

# [text](target) and ![alt](target); the text may hold inline code but no brackets.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation other than `-` and `_`
    dropped, each space a `-`."""
    text = re.sub(r"`([^`]*)`", r"\1", heading).strip().lower()
    return re.sub(r"[^a-z0-9 _-]", "", text).replace(" ", "-")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, with inline code spans removed."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(re.sub(r"`[^`]*`", "", line))
    return lines


def anchors(document: Path) -> set[str]:
    """Every heading anchor of `document`; a repeated heading gets `-1`, `-2`, ... as on GitHub."""
    seen: Counter[str] = Counter()
    found = set()
    fenced = False
    for line in document.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        match = None if fenced else re.match(r"^#{1,6} (.+?)\s*#*$", line)
        if match:
            anchor = github_anchor(match.group(1))
            found.add(f"{anchor}-{seen[anchor]}" if seen[anchor] else anchor)
            seen[anchor] += 1
    return found


def links(document: Path) -> list[str]:
    return [target for line in prose_lines(document.read_text(encoding="utf-8"))
            for target in LINK.findall(line)]


def test_the_documents_have_links_to_check() -> None:
    # Guards the checks below against a parser that finds nothing.
    assert len(links(ROOT / "README.md")) > 20
    assert len(links(ROOT / "OPERATIONS.md")) > 40


def test_github_anchor_rules() -> None:
    assert github_anchor("Rotating a destination's secret") == "rotating-a-destinations-secret"
    assert github_anchor("Rehearsal: crash and recovery drills") == (
        "rehearsal-crash-and-recovery-drills")
    assert github_anchor("Ordered (FIFO) delivery") == "ordered-fifo-delivery"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_link_resolves(document: Path) -> None:
    broken = []
    for target in links(document):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not ours to check
            continue
        path, _, anchor = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        if not linked.exists():
            broken.append(f"{target}: no file {linked.relative_to(ROOT)}")
        elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked)):
            broken.append(f"{target}: no heading #{anchor} in {linked.relative_to(ROOT)}")
    assert broken == [], f"{document.name}: " + "; ".join(broken)
