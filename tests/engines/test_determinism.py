"""Verdicts are a function of the commit, the seed and the example budgets.

``pcspec verify`` walks with its own PRNG (``pcspec.engines.walker``): no Hypothesis is involved,
so neither the Hypothesis a user installed nor the modules Hypothesis would take for local code
(it mines integer literals from them) can change what is generated."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pcspec.cli import main


@pytest.mark.slow
def test_a_survey_is_the_same_with_and_without_hypothesis_importable() -> None:
    code = (
        "import sys, json;{block}"
        "from pcspec.engines.search import survey; from pcspec.model.designs import get_design;"
        "run, hits = survey(get_design('pr30137'), examples=40);"
        "print(json.dumps([run.steps, sorted(f'{{p}}:{{h.trace.dumps()}}' for p, h in hits.items())]))"
    )
    outs = [
        subprocess.run([sys.executable, "-c", code.format(block=b)], capture_output=True, text=True, check=True).stdout
        for b in ("", "sys.modules['hypothesis'] = None;")
    ]
    assert outs[0] == outs[1] and json.loads(outs[0])[0] > 0


@pytest.mark.slow
def test_time_cap_gives_unknown_never_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A survey the safety cap cuts short settles nothing: every cell it could not settle is
    ``unknown``, the summary says so and the exit status is 3 (not 0, not a mismatch's 1)."""
    code = main(["verify", "--variant", "fixed", "--survey-seconds", "0.2", "--json", "--out", str(tmp_path)])
    data = json.loads(capsys.readouterr().out)
    assert code == 3 and data["ok"] is False and data["unknown"] > 0
    assert all(c["verdict"] != "holds" for c in data["fuzz"])
    code = main(["verify", "--variant", "fixed", "--survey-seconds", "0.2", "--out", str(tmp_path)])
    assert code == 3 and "UNKNOWN:" in capsys.readouterr().out
