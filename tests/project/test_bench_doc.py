"""docs/BENCH.md says how to build every design `pcspec bench` measures, each of which has a build."""

from __future__ import annotations

import re

from pcspec.bench.run import DESIGNS
from pcspec.live.designs import design_of
from tests.support.paths import ROOT

BENCH = ROOT / "docs" / "BENCH.md"


def test_every_benched_design_has_a_build_the_page_names() -> None:
    text = BENCH.read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if x.startswith("pcspec build --design"))
    named = set(re.findall(r"\b(" + "|".join(DESIGNS) + r")\b", line))
    for design in DESIGNS:
        assert design_of(design).name == design  # a build recipe: DesignUnavailable otherwise
        assert design in named, f"docs/BENCH.md's set-up does not say how to build {design}: {line}"
    assert "no llama.cpp build" not in text
