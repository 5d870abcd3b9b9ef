"""The ``fixed`` build (patches/fixed, docs/DESIGNS.md) on the workloads of the October bugs it
fixes, compared with its own rules (``fixed@0c1e570``).

* F1 (patch 0002): the pinned busy-slot workload that livelocks the October server
  (tests/live/test_live_server.py::test_pinned_busy_slot_livelock) is answered: the pinned task
  is deferred, no cache update runs on the busy slot, every request gets its answer;
* F2 (patch 0005): the SWA workload whose restore leaves the window one cell short on the
  October server (test_swa_off_by_one_after_restore) restores a checkpoint whose data holds
  the window: the answers are the uncached ones, and the run agrees with the model and the log
  checker (``pos-min=payload``).

Skipped when the fixed build is not cached (``pcspec build --design fixed``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pcspec.live.build import find_server
from pcspec.live.designs import design_of
from tests.support import paths

pytestmark = pytest.mark.live  # a real llama-server

_FIXED = design_of("fixed")
BINARY = find_server(_FIXED.tree, _FIXED.patch_paths())
if BINARY is None:
    pytest.skip("the fixed build is not cached: run `pcspec build --design fixed`",
                allow_module_level=True)
pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")

from pcspec.live.explain import explain  # noqa: E402
from pcspec.live.session import Outcome  # noqa: E402
from tests.support.live import replay  # noqa: E402

DATA = paths.DATA / "live"
RULES = "fixed@0c1e570"
# server-context.cpp (the task loop, after get_available_slot): the pinned task waits for its slot
DEFERRED = b"requested slot is unavailable, defer task"


def _replay(name: str, models: Path, tmp_path: Path, timeout: float) -> Outcome:
    assert BINARY is not None
    return replay(BINARY, name, models, tmp_path, timeout=timeout, variant=RULES)


def _replay_clean(name: str, tmp_path: Path) -> Outcome:
    """One replay of ``name`` on the fixed build, which must show no finding at all (and be
    compared with the uncached reference)."""
    models = tmp_path / "models"
    models.mkdir()
    out = _replay(name, models, tmp_path / "run", timeout=15)
    found = [(f.rule, f.message) for f in out.analysis.findings]
    assert out.analysis.n_checked > 0 and found == [], found
    return out


def test_a_task_pinned_to_a_busy_slot_waits_and_is_answered(tmp_path: Path) -> None:
    """FINDINGS F1 on the fixed build: the workload whose second pinned request livelocks the
    October server. Up to three runs, until one shows the race (the pinned task deferred while
    the slot processes): in every run each request is answered and nothing is `no-answer`."""
    models = tmp_path / "models"
    models.mkdir()
    runs: list[list[tuple[str, str | None]]] = []
    for i in range(3):
        out = _replay("f1-pinned-busy-livelock.jsonl", models, tmp_path / f"try{i}", timeout=8)
        found = [(f.rule, explain(f, out)) for f in out.analysis.findings]
        runs.append(found)
        assert out.run.fatal is None, (out.run.fatal.fatal, found)
        requests = [o for o in out.run.observations if o.op.op == "request"]
        assert len(requests) == 4 and all(o.reply is not None and o.reply.ok for o in requests), found
        assert not [cls for cls, _ in found if cls == "no-answer"], found
        if DEFERRED in out.log:
            return
    pytest.skip(f"the pinned request never met its slot busy in {len(runs)} runs (timing): {runs}")


def test_an_swa_restore_brings_back_the_whole_window(tmp_path: Path) -> None:
    """FINDINGS F2 on the fixed build: the checkpoint at n_tokens = 105 records the start of its
    data (73, not the SWA cache's 0), so the 104-token prompt does not restore it (its window
    does not hold the cells the next token attends to) and resumes from a state whose window
    serves; no finding at all. (Its place in
    the list depends on patch 0012, which erases the one at 48 when the second prompt shares 47.)"""
    out = _replay_clean("f2-swa-off-by-one.jsonl", tmp_path)
    assert b" of 8 (pos_min = 73, pos_max = 104, n_tokens = 105" in out.log
    assert b"restored context checkpoint (pos_min = 73" not in out.log


def test_the_checkpoint_a_task_restored_stays_with_it(tmp_path: Path) -> None:
    """Patch 0013 on the fixed build (tests/data/real/README-logs.md, fixed-keep-restored.log):
    with a cap of 2, the task that restored the checkpoint at n_tokens = 51 erases the newer one
    to make room, not the one it restored; no finding, the log checker holding the build to
    ``restored-owner=restorer``."""
    out = _replay_clean("fixed-keep-restored.jsonl", tmp_path)
    assert b"restored context checkpoint (pos_min = 50, pos_max = 50, n_tokens = 51" in out.log
    assert b"erasing old context checkpoint (pos_min = 79, pos_max = 79, n_tokens = 80" in out.log
    assert b"erasing old context checkpoint (pos_min = 50" not in out.log
