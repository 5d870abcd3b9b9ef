"""RESTORE-2 and the mutants of baseline's restore choice: one scenario per mutant, and how a
mutant of any design is caught (a property its base design does not violate on the same trace).

Each scenario is a slot holding checkpoints, then a prompt at one of the restore rule's
landmarks (server-context.cpp:3274-3364 of 0c1e570). The mutant must violate RESTORE-2 there
and baseline must not (``judge.base_violates``); ``fixed`` must hold RESTORE-2 on it too.
"""

from __future__ import annotations

from typing import Any

import pytest

from pcspec.core.trace import Trace
from pcspec.engines.search import hunt
from pcspec.model import events as ev
from pcspec.model.config import Config, MemoryKind
from pcspec.model.designs import DESIGNS, get_design
from pcspec.properties.catalogue import get_property
from pcspec.properties.judge import base_violates, first_violation, replay
from pcspec.properties.mutants import MUTANTS, TholdMinusOneAlways
from pcspec.properties.oracle import MUTANT_TARGETS, ORACLE
from tests.support.common import PERF1_OPS, SWA_SLOT, TRACE_HEADER, recurrent_config


class BaselessTholdMinusOneAlways(TholdMinusOneAlways):
    """The mutant without its base: judged as a design, every find of it counts."""

    name = TholdMinusOneAlways.name
    base = None


P12 = list(range(1, 13))
NEW = [500, 501, 502]

# A recurrent slot: 40 tokens with a user message at 20 give checkpoints at n_tokens 20 and 36
# (pos [19, 19] and [35, 35]); the live state is at 40 after two generated tokens
# (tests/model/test_scenarios_restore.py works the batches out).
A1 = list(range(1, 41))


def _req(tokens: list[int], **kw: Any) -> list[dict[str, Any]]:
    return [{"op": "request", "tokens": tokens, "n_predict": kw.pop("n_predict", 1), **kw}, {"op": "run"}]


# mutant -> (configuration, operations, (n_past of baseline's last prompt start, the mutant's))
SCENARIOS: dict[str, tuple[Config, list[dict[str, Any]], tuple[int, int]]] = {
    "mutant:thold-minus-one-always": (
        recurrent_config(n_slots=1, cache_ram=0),
        [*_req(A1, spans=[20], n_predict=2), *_req(A1[:36] + NEW)],
        # shared 36, new tokens: thold 36; live pos_min 40 >= 36: scan; c36 pos_min 35 < 36 restores,
        # resuming at 36. With the - 1 always: thold 35, c36 fails (35 < 35 is false), c20 restores:
        # 16 tokens re-processed for nothing.
        (36, 20),
    ),
    "mutant:thold-minus-one-never": (
        recurrent_config(n_slots=1, cache_ram=0, n_rs_seq=1),
        [*_req(A1, spans=[20], n_predict=2), *_req(A1[:36])],
        # A prompt without new tokens, shared 36: thold 35; c36 (pos_min 35) fails, c20 restores
        # (n_past 20). Without the - 1: thold 36 takes c36, whose state is one token past the
        # resume point (n_past 36 - 1 for the prompt's logits): a recurrent state must roll back
        # (here n_rs_seq 1 allows it; with none, the mutant's seq_rm aborts).
        (20, 35),
    ),
    "mutant:restore-pos-min-zero-rejected": (
        SWA_SLOT,
        [*_req(P12, spans=[4]), *_req(P12[:4] + NEW)],
        # shared 4: thold max(0, 4 - 4) = 0; c4 [0, 3] passes only by pos_min == 0 (0 < 0 is false):
        # baseline restores it (n_past 3), the mutant re-processes from 0.
        (3, 0),
    ),
    "mutant:restore-pos-max-unchecked": (
        SWA_SLOT,
        [*_req(P12), *_req(P12[:6] + NEW)],
        # shared 6: the only checkpoint, c8 [0, 7], lies beyond pos_next 6: baseline finds none and
        # re-processes; the mutant restores c8 and resumes at 6 from a state of 8 tokens.
        (0, 6),
    ),
}

RESTORE2 = get_property("RESTORE-2")


def _trace(variant: str, cfg: Config, ops: list[dict[str, Any]]) -> Trace:
    return Trace(get_design(variant), cfg, ops)


def _violations(variant: str, cfg: Config, ops: list[dict[str, Any]]) -> list[str]:
    return [v.message for v in replay(_trace(variant, cfg, ops), [RESTORE2]).violations if v.rule == "RESTORE-2"]


def _last_n_past(variant: str, cfg: Config, ops: list[dict[str, Any]]) -> int:
    events = replay(_trace(variant, cfg, ops), []).server.heap.events
    return [e for e in events if isinstance(e, ev.PromptStart)][-1].n_past


def test_every_baseline_mutant_has_a_scenario() -> None:
    of_baseline = {name for name, v in MUTANTS.items() if v.base == "baseline"}
    assert of_baseline == set(SCENARIOS)
    assert all(MUTANT_TARGETS[m] == ("RESTORE-2",) for m in of_baseline)


@pytest.mark.parametrize("mutant", sorted(SCENARIOS))
def test_scenario_catches_the_mutant(mutant: str) -> None:
    cfg, ops, (n_baseline, n_mutant) = SCENARIOS[mutant]
    assert (_last_n_past("baseline", cfg, ops), _last_n_past(mutant, cfg, ops)) == (n_baseline, n_mutant)
    found = _violations(mutant, cfg, ops)
    assert len(found) == 1, found
    trace = _trace(mutant, cfg, ops)
    assert not base_violates(trace, "RESTORE-2")  # baseline holds RESTORE-2 on the same trace
    assert _violations("baseline", cfg, ops) == []


@pytest.mark.parametrize("mutant", sorted(SCENARIOS))
@pytest.mark.parametrize("design", ["pr30137", "pr27451", "fixed"])
def test_designs_hold_restore2_on_the_scenarios(mutant: str, design: str) -> None:
    cfg, ops, _why = SCENARIOS[mutant]
    assert _violations(design, cfg, ops) == []


def test_restore2_holds_on_every_design_in_the_oracle() -> None:
    assert {ORACLE[d]["RESTORE-2"] for d in DESIGNS} == {"."}


def test_a_violation_the_base_shares_does_not_catch() -> None:
    # baseline deep-copies checkpoints on a save (PERF-1); a mutant of baseline violates PERF-1 on
    # that trace too, but so does baseline: it is not the mutant's doing.
    cfg = Config(**{k: v for k, v in TRACE_HEADER["config"].items() if k != "memory"}, memory=MemoryKind.RECURRENT)
    trace = Trace(get_design("mutant:thold-minus-one-always"), cfg, list(PERF1_OPS))
    assert first_violation(trace, "PERF-1") is not None
    assert base_violates(trace, "PERF-1")
    # A design has no base; a mutant of fixed (which holds PERF-1) is caught by any violation.
    assert not base_violates(Trace(DESIGNS["baseline"], cfg, list(PERF1_OPS)), "PERF-1")
    assert not base_violates(Trace(get_design("mutant:free-shared"), cfg, list(PERF1_OPS)), "PERF-1")


def test_every_mutant_names_its_base() -> None:
    assert all(v.base in DESIGNS for v in MUTANTS.values())
    assert all(v.base is None for v in DESIGNS.values())


def test_a_hunt_walks_past_finds_its_base_shares() -> None:
    # baseline violates PERF-1 within a few examples (a save deep-copies the checkpoints); a mutant
    # of baseline that changes only the restore threshold shares most such finds: its hunt walks
    # past them, and what it returns (if anything) is a trace baseline holds PERF-1 on.
    mutant = get_design("mutant:thold-minus-one-always")
    run, first = hunt(BaselessTholdMinusOneAlways(), "PERF-1", 0, 30)  # (judged as a design: found)
    assert first is not None
    assert base_violates(Trace(mutant, first.trace.config, list(first.trace.ops)), "PERF-1")
    walked, hit = hunt(mutant, "PERF-1", 0, 30)
    assert walked.complete and walked.steps > run.steps  # (it went on past the shared finds)
    assert hit is None or not base_violates(hit.trace, "PERF-1")
