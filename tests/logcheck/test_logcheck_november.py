"""A real log of the November server (tests/data/real/README-logs.md): its build line names the
``november`` rule set, and the log is what that rule set allows."""

from __future__ import annotations

from pcspec.logcheck import check_log
from tests.support.paths import DATA

LOG = DATA / "real" / "november-recurrent.log"


def test_the_november_build_line_chooses_the_november_rules() -> None:
    report = check_log(LOG)
    (run,) = report.runs
    assert (run.build, run.build_warning, run.invalidation) == ("november", "", "n-prefix")
    assert "build 11549 (november)" in run.build_evidence
    assert not report.deviations, report.deviations
