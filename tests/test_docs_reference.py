"""README.md and docs/findings.md read as reference: they state what is true now, with
the command that reproduces each figure, and carry no dates (the history of the work is
in git log). README's first screen holds the headline table of `make sim`: it starts,
after its marker comment, within the first :data:`FIRST_SCREEN` lines.

Each check is also run on a small sample written to break it."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Files that must carry no dates.
UNDATED = ("README.md", "docs/findings.md")

#: Lines of README's first screen, within which its headline table starts.
FIRST_SCREEN = 60

#: The comment that marks README's headline table (the next line is its header row).
HEADLINE_MARK = "<!-- headline table"

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")

#: A year of the work (and so any ISO date of it) or a month's name; a month's name is
#: matched with a capital and as a whole word ("may" in prose does not count).
DATE = re.compile(r"\b2026\b|\b(?:" + "|".join(MONTHS) + r")\b")


def dated_lines(text):
    """``(line number, line)`` of each line of ``text`` with a date."""
    return [(n, line) for n, line in enumerate(text.splitlines(), 1) if DATE.search(line)]


def headline_line(text):
    """The line number of the headline table's header row (the line after
    :data:`HEADLINE_MARK`), or ``None`` when the mark is missing or no table follows."""
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if line.strip().startswith(HEADLINE_MARK):
            following = lines[n] if n < len(lines) else ""
            return n + 1 if following.startswith("|") else None
    return None


@pytest.mark.parametrize("name", UNDATED)
def test_no_dates(name):
    found = dated_lines((ROOT / name).read_text())
    assert not found, f"{name}: dates on lines " + "; ".join(
        f"{n}: {line.strip()[:80]}" for n, line in found)


def test_readme_headline_table_on_first_screen():
    line = headline_line((ROOT / "README.md").read_text())
    assert line is not None, f"README.md: no table after a {HEADLINE_MARK!r} comment"
    assert line <= FIRST_SCREEN, (f"README.md: the headline table starts at line {line}, "
                                  f"after the first {FIRST_SCREEN}")


def test_checks_see_what_they_are_meant_to():
    assert [n for n, _ in dated_lines("a\nrun of 4 December\n2026-12-03\nit may\n")] == [2, 3]
    assert dated_lines("20260 cycles, 12026 bits, it may\n") == []
    assert dated_lines("released in May") != []
    table = f"{HEADLINE_MARK} -->\n| a | b |\n|---|---|\n"
    assert headline_line("intro\n" + table) == 3
    assert headline_line("intro\n" * FIRST_SCREEN + table) == FIRST_SCREEN + 2
    assert headline_line("| a | b |\n") is None
    assert headline_line(f"{HEADLINE_MARK} -->\n\nno table\n") is None
