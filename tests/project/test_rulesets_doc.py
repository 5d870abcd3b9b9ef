"""docs/RULESETS.md lists every field where a rule set departs from its parent, with a line of C++."""

from __future__ import annotations

import re

from pcspec.model.rulesets import PARENTS, RULE_SETS, differences
from tests.support.paths import ROOT

TEXT = (ROOT / "docs" / "RULESETS.md").read_text(encoding="utf-8")
CITATION = re.compile(r"[\w/.-]+\.(?:cpp|h|cmake|in|txt):\d+")


def section(name: str) -> str:
    start = TEXT.index(f"\n## `{name}`")
    end = TEXT.find("\n## ", start + 1)
    return TEXT[start:end if end >= 0 else None]


def summary_row(name: str) -> str:
    return next(line for line in TEXT.splitlines() if line.startswith(f"| `{name}` |"))


def test_every_difference_of_every_rule_set_is_listed_with_its_line() -> None:
    for name in RULE_SETS:
        diffs = differences(name)
        assert diffs, f"{name} does not differ from its parent"
        row = summary_row(name)
        assert f"`{PARENTS[name]}`" in row
        listed = set(re.findall(r"`(\w+)`", row.split("|")[4]))
        assert listed == set(diffs), (name, listed, set(diffs))
        text = section(name)
        for field in diffs:
            line = next((x for x in text.splitlines() if x.startswith(f"| `{field}` |")), None)
            assert line is not None, f"docs/RULESETS.md, {name}: no row for {field}"
            assert CITATION.search(line) or "#30137's merged diff" in line, (name, field)


def test_the_doc_names_no_rule_set_that_is_not_one() -> None:
    named = set(re.findall(r"^\| `(\w+)` \| (?:0c1e570|build|e152332)", TEXT, re.MULTILINE))
    assert named == set(RULE_SETS)
