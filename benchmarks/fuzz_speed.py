"""Fuzzing speed: the seeded swarm walker and the Hypothesis machine, side by side in one run.

1. Throughput, interleaved repetitions on the same variant (``fixed``), rules executed per
   second (workflow rules count once, the initialize rule not at all) and model operations
   judged per second:
   * Hypothesis, bare: the machine's rules with every body replaced by nothing (same rules,
     same argument strategies, same settings): what Hypothesis alone costs;
   * Hypothesis, judged: the machine, every property judged after every model operation;
   * walker, judged: ``pcspec.walker`` on the same machine class, same properties judged;
   * walker, model only: the walker with no property judged: the model's own cost, which
     bounds the judged walker from above;
   * walker, bare: the walker's generation alone (rules drawn, bodies not run).
   Target (issue 12): walker judged >= 3 x Hypothesis bare, in rules per second.
2. Time to first violation for every expected violation of the oracle and every mutant
   target: a walker hunt (only the target judged, as ``pcspec verify`` hunts) of walk seeds
   0..S-1, each with verify's walker budget (``pcspec.hunts.WALKER_EXAMPLES`` examples): the
   median and the worst over the seeds, how many found it. Target: median < 1 s, found in
   every seed. ``--hypothesis-seeds K`` also times the Hypothesis hunt (verify's budget) over
   seeds 0..K-1, for comparison.
3. The length of the seed-0 counterexample as ``pcspec verify`` reports it: the shortest of
   the walker's first finds once shrunk (``pcspec.hunts.walker_hunt``). Target <= 8.

    python benchmarks/fuzz_speed.py --seeds 0                 # throughput only
    python benchmarks/fuzz_speed.py --seeds 20                # everything
    python benchmarks/fuzz_speed.py --seeds 20 --only mutant: # the mutants' rows
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from hypothesis import settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule, run_state_machine_as_test

from pcspec.determinism import seed_only_generation
from pcspec.fuzzing import hunt
from pcspec.hunts import WALKER_EXAMPLES, walker_hunt
from pcspec.model.variants import ALL
from pcspec.properties.catalogue import get_property
from pcspec.properties.machine import PROFILES, machine_for
from pcspec.properties.oracle import MUTANT_TARGETS, ORACLE
from pcspec.walker import Walker
from pcspec.walker_rules import Rule, RuleTable

# -- throughput ------------------------------------------------------------------------------


def _counted(base: type[RuleBasedStateMachine], bare: bool, counter: list[int]) -> type[RuleBasedStateMachine]:
    """A subclass whose rules count their top-level executions (and, if ``bare``, do nothing
    else, and have no preconditions: there is no state for them to read)."""
    attrs: dict[str, Any] = {}
    for name in dir(base):
        f = getattr(base, name)
        r = getattr(f, "hypothesis_stateful_rule", None)
        i = getattr(f, "hypothesis_stateful_initialize_rule", None)
        if r is None and i is None:
            continue

        def make(fn: Callable[..., Any], count: bool) -> Callable[..., Any]:
            def body(self: Any, *a: Any, **kw: Any) -> None:
                depth = getattr(self, "_depth", 0)
                if count and depth == 0:  # workflow rules call other rules: count what Hypothesis ran
                    counter[0] += 1
                if not bare:
                    self._depth = depth + 1
                    try:
                        fn(self, *a, **kw)
                    finally:
                        self._depth = depth

            return body

        if i is not None:
            attrs[name] = initialize(**i.arguments)(make(f, False))
            continue
        g = rule(**r.arguments)(make(f, True))
        if not bare:
            for pre in r.preconditions:
                g = precondition(pre)(g)
        attrs[name] = g
    if bare:
        return type("Bare", (RuleBasedStateMachine,), attrs)
    return type("Counted", (base,), attrs)


def hypothesis_rate(examples: int, bare: bool, seed: int) -> tuple[float, float]:
    """(rules/s, judged operations/s) of the Hypothesis machine on ``fixed``."""
    counter = [0]
    base = machine_for(ALL["fixed"])
    cls = _counted(base, bare, counter)
    cls._hypothesis_internal_use_seed = seed  # type: ignore[attr-defined]
    s = settings(PROFILES["ci"], max_examples=examples, derandomize=False)
    t0 = time.perf_counter()
    with seed_only_generation():
        run_state_machine_as_test(cls, settings=s)  # type: ignore[no-untyped-call]
    dt = time.perf_counter() - t0
    return counter[0] / dt, base.found.steps / dt


def walker_rate(examples: int, bare: bool, seed: int, judged: bool = True) -> tuple[float, float]:
    """(rules/s, operations/s) of the walker on ``fixed`` (``judged``: every property after every
    operation; otherwise none, the model alone)."""
    w = Walker(ALL["fixed"]) if judged else Walker(ALL["fixed"], [])
    if bare:  # generation only: draw every rule and its arguments, run nothing
        nothing = [Rule(r.name, lambda *_a, **_k: None, (), r.arguments) for r in w.table.rules]
        init = [Rule(r.name, lambda *_a, **_k: None, (), r.arguments) for r in w.table.initializers]
        w.table = RuleTable(tuple(init), tuple(nothing), ())
    t0 = time.perf_counter()
    r = w.walk(seed, examples)
    dt = time.perf_counter() - t0
    return r.rules / dt, r.steps / dt


def throughput(examples: int, reps: int) -> None:
    names = ["Hypothesis, bare", "Hypothesis, judged", "walker, judged", "walker, model only", "walker, bare"]
    runs: list[Callable[[int], tuple[float, float]]] = [
        lambda s: hypothesis_rate(examples, True, s),
        lambda s: hypothesis_rate(examples, False, s),
        lambda s: walker_rate(examples, False, s),
        lambda s: walker_rate(examples, False, s, judged=False),
        lambda s: walker_rate(examples, True, s),
    ]
    rates: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    for rep in range(reps):  # interleaved, so a change in the machine's load hits every row
        for name, run in zip(names, runs, strict=True):
            rates[name].append(run(rep))
    print(f"throughput on fixed, {examples} examples each, {reps} interleaved repetitions (median):")
    med = {n: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v)) for n, v in rates.items()}
    for n in names:
        ops = f"{med[n][1]:9,.0f} judged ops/s" if "judged" in n else ""
        print(f"  {n:20s} {med[n][0]:9,.0f} rules/s {ops}")
    hj, wj, hb = med["Hypothesis, judged"], med["walker, judged"], med["Hypothesis, bare"]
    print(
        f"  walker judged / Hypothesis judged: {wj[0] / hj[0]:.2f} (rules/s), {wj[1] / hj[1]:.2f} (judged ops/s)\n"
        f"  walker judged / Hypothesis bare:   {wj[0] / hb[0]:.2f} (rules/s)  [target >= 3]\n"
        f"  walker bare / Hypothesis bare:     {med['walker, bare'][0] / hb[0]:.2f} (rules/s: generation alone)\n"
        f"  walker model only / Hypothesis bare: {med['walker, model only'][0] / hb[0]:.2f} (rules/s: the ceiling of"
        " walker judged / Hypothesis bare, the model's own cost with nothing judged)"
    )


# -- time to first violation -----------------------------------------------------------------


def cells(only: str | None) -> list[tuple[str, str]]:
    out = [(v, p) for v, row in ORACLE.items() for p, e in row.items() if e == "x"]
    out += [(m, p) for m, targets in MUTANT_TARGETS.items() for p in targets]
    return [(v, p) for v, p in out if not only or only in f"{v} {p}"]


def _fmt(ts: list[float], n: int) -> str:
    if len(ts) < n:
        return f"{'-':>8s} {'-':>8s}"
    return f"{statistics.median(ts):8.2f} {max(ts):8.2f}"


def first_violations(seeds: int, examples: int, cap: float, hyp_seeds: int, only: str | None) -> None:
    print(
        f"\ntime to first violation, walker hunt, seeds 0..{seeds - 1}, budget {examples} examples"
        f" (cap {cap:.0f} s); '-': not found in every seed"
    )
    head = f"{'variant':26s} {'property':10s} {'median s':>8s} {'worst s':>8s} {'found':>6s}"
    head += f" {'examples':>8s} {'shrunk':>6s}"
    if hyp_seeds:
        head += f"  {'Hypothesis median/worst s, found':>32s}"
    print(head)
    medians = []
    for variant, pid in cells(only):
        w = Walker(ALL[variant], [get_property(pid)], [pid])
        ts: list[float] = []
        exs: list[int] = []
        for seed in range(seeds):
            r = w.walk(seed, examples, seconds=cap)
            if r.hit is not None:
                ts.append(r.hit.seconds)
                exs.append(r.examples)
        # verify's own procedure for seed 0: the shortest of the first finds, shrunk
        _run, hit = walker_hunt(ALL[variant], pid, 0, examples, cap)
        length = len(hit.trace.ops) if hit else "-"
        if len(ts) == seeds:
            medians.append(statistics.median(ts))
        line = (
            f"{variant:26s} {pid:10s} {_fmt(ts, seeds)} {len(ts):3d}/{seeds:<2d} "
            f"{max(exs) if exs else '-'!s:>8s} {length!s:>6s}"
        )
        if hyp_seeds:
            hts = []
            for seed in range(hyp_seeds):
                try:
                    run, hit = hunt(ALL[variant], pid, "ci", seed, 1500, cap)
                except Exception:
                    # A hunt cut by its cap may end in Hypothesis's FlakyStrategyDefinition
                    # (pcspec.fuzzing's cap unwinds a rule mid-draw): not found within the cap.
                    continue
                if hit is not None:
                    hts.append(run.seconds)
            line += f"  {_fmt(hts, hyp_seeds)} {len(hts):3d}/{hyp_seeds:<2d}"
        print(line, flush=True)
    if medians:
        print(f"worst median over the cells found in every seed: {max(medians):.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20, help="walk seeds per cell (0: throughput only)")
    ap.add_argument("--examples", type=int, default=WALKER_EXAMPLES, help="walker budget per hunt (verify's)")
    ap.add_argument("--cap", type=float, default=120.0, help="seconds cap of one hunt")
    ap.add_argument("--throughput-examples", type=int, default=300)
    ap.add_argument("--reps", type=int, default=2, help="interleaved throughput repetitions")
    ap.add_argument("--hypothesis-seeds", type=int, default=0, help="also time Hypothesis hunts over this many seeds")
    ap.add_argument("--only", help="only cells whose 'variant property' contains this (e.g. mutant:)")
    args = ap.parse_args()
    if args.throughput_examples:
        throughput(args.throughput_examples, args.reps)
    if args.seeds:
        first_violations(args.seeds, args.examples, args.cap, args.hypothesis_seeds, args.only)


if __name__ == "__main__":
    main()
