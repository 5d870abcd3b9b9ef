"""``restored-owner=restorer`` on a real log of ``fixed``'s build (patch 0013: the checkpoint a
task restored stays with it; tests/data/real/README-logs.md): the sweep and the cap leave it,
which the default rule (``creator``: the snapshot's) reports as two deviations."""

from __future__ import annotations

from pcspec.logcheck import check_events, parse_bytes, parse_options
from tests.support.paths import DATA

LOG = DATA / "real" / "fixed-keep-restored.log"
# the rules pcspec live passes for fixed's build (pcspec.live.analyze.logcheck_options)
FIXED = ["checkpoint_pos_min=fixed", "entry_sizes=fixed", "invalidation=n-prefix"]


def _found(*opts: str) -> list[str]:
    result = check_events(parse_bytes(LOG.read_bytes()).events, parse_options(opts))
    return [d.rule for d in result.deviations]


def test_the_restored_checkpoint_stays_with_the_task_that_restored_it() -> None:
    assert _found(*FIXED, "kept_checkpoint=fixed") == []


def test_the_snapshot_rule_reports_the_sweep_and_the_cap() -> None:
    assert sorted(_found(*FIXED)) == ["ckpt-cap-evict", "ckpt-sweep"]
