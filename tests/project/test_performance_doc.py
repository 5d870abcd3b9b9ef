"""docs/PERFORMANCE.md holds current figures, each reproducible: every section that gives figures
gives the command that gives them and the date they were measured on, and every benchmark script
is run by a command it shows. (The history of the figures is in git, not in the page.)"""

from __future__ import annotations

import re

from tests.support.paths import ROOT

PAGE = ROOT / "docs" / "PERFORMANCE.md"
COMMAND = re.compile(r"^(    |`)(/usr/bin/time (-v )?)?(python|pcspec|cmake) ", re.M)
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
UNMEASURED = {"Targets", "CI"}  # the targets' table points into the sections; CI's figures are .ci/run's


def sections() -> dict[str, str]:
    parts = re.split(r"^## (.+)$", PAGE.read_text(encoding="utf-8"), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_each_section_gives_its_command_and_its_date() -> None:
    found = sections()
    assert "CI" in found
    for title, body in found.items():
        if title in UNMEASURED:
            continue
        assert COMMAND.search(body), f"docs/PERFORMANCE.md, {title!r}: no command gives its figures"
        assert DATE.search(body), f"docs/PERFORMANCE.md, {title!r}: no date says when they were measured"


def test_every_benchmark_is_run_by_a_command_shown() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        assert re.search(rf"^    python benchmarks/{script.name}\b", text, re.M), \
            f"docs/PERFORMANCE.md shows no command running benchmarks/{script.name}"


def test_no_figure_is_dated_by_a_round() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert not re.search(r"\b[Rr]ound \d+\b", text), "date a figure by the day it was measured, not a round"
