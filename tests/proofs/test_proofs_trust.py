"""What a ``proved`` can be trusted for: the pinned solver, the seed, the limits. A timeout,
a resource limit or an interrupt is ``unknown``, never ``proved``; so is a lemma that does not
hold."""

from __future__ import annotations

import z3

from pcspec.model.designs import DESIGNS
from pcspec.proofs import cache_proofs
from pcspec.proofs.build import Build
from pcspec.proofs.encoded import encode
from pcspec.proofs.obligations import BY_ID
from pcspec.proofs.pairs import PROVED, UNKNOWN, Pair
from pcspec.proofs.run import RunConfig, Runner
from pcspec.proofs.solver import Settings, solve, solve_blocks

BASELINE, FIXED = DESIGNS["baseline"], DESIGNS["fixed"]


def _hard() -> str:
    """A pigeonhole instance: 9 pigeons, 8 holes. Unsat, and far beyond a millisecond."""
    b = Build("pigeons")
    p = [[b.bool(f"p{i}_{j}") for j in range(8)] for i in range(9)]
    b.assume(*(z3.Or(*row) for row in p))
    for j in range(8):
        for i in range(9):
            for k in range(i + 1, 9):
                b.assume(z3.Not(z3.And(p[i][j], p[k][j])))
    return b.smt2(b.true)


def test_a_timeout_is_unknown_never_proved_and_says_what_to_raise() -> None:
    ans = solve(_hard(), Settings(timeout_ms=1))
    assert ans.status == "unknown"
    assert ans.seconds < 2
    assert "timeout (1 ms)" in ans.reason and "--proof-timeout" in ans.reason


def test_a_resource_limit_is_unknown_and_says_what_to_raise() -> None:
    ans = solve(_hard(), Settings(rlimit=1000, timeout_ms=60_000, watchdog_s=60))
    assert ans.status == "unknown"
    assert "resource limit (1,000 units)" in ans.reason and "--proof-rlimit" in ans.reason


def test_the_watchdog_interrupts() -> None:
    ans = solve(_hard(), Settings(timeout_ms=60_000, rlimit=10**12, watchdog_s=0.05))
    assert ans.status == "unknown"
    assert ans.seconds < 5
    assert "watchdog" in ans.reason


def test_a_timed_out_obligation_is_unknown_and_not_ok() -> None:
    """The whole path: RB-1 for fixed with a 1 ms budget per query is not proved."""
    runner = Runner(RunConfig(settings=Settings(timeout_ms=1, watchdog_s=1)))
    row = runner.run(Pair(BY_ID["RB-1"], FIXED, PROVED))
    assert row.result == UNKNOWN
    assert not row.ok
    assert row.detail


def test_the_same_query_gives_the_same_answer_for_any_seed() -> None:
    facts, unknown = encode(FIXED)
    assert unknown == {}
    qs = cache_proofs.acc2(facts, cache_proofs.Bounds(4, 4))
    for seed in (0, 1, 7):
        assert {solve_blocks(q.blocks(), Settings(seed=seed)).status for q in qs} == {"unsat"}


def test_a_claim_that_fails_is_never_proved() -> None:
    """baseline does not validate its fills: the RB-1 proof finds a counterexample to induction
    (``sat``), so ``prove`` reports unknown, not proved."""
    result, detail, _, _ = Runner(RunConfig()).prove(Pair(BY_ID["RB-1"], BASELINE, None))
    assert result == UNKNOWN and "not inductive" in detail
