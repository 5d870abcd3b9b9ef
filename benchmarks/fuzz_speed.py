"""Fuzzing speed: the seeded walker and the Hypothesis machine, side by side in one run.

Both engines run the same rules (``pcspec.properties.rules``).

1. Throughput, interleaved repetitions on the same variant (``fixed``), rules executed per
   second (workflow rules count once, the example's setup not at all) and model operations
   judged per second:
   * Hypothesis, bare: a machine with the same rules and the same argument strategies, every
     body doing nothing: what Hypothesis alone costs;
   * Hypothesis, judged: ``pcspec.engines.hypothesis.machine_for(fixed)``, every property
     judged after every model operation;
   * walker, judged: ``pcspec.engines.walker``, the same properties judged;
   * walker, model only: the walker with no property judged: the model's own cost, which
     bounds the judged walker from above;
   * walker, bare: the walker's generation alone (rules drawn, bodies not run).
2. Time to first violation for every expected violation of the oracle and every mutant
   target: a walker hunt (only the target judged, as ``pcspec verify`` hunts) of walk seeds
   0..S-1, each with verify's budget (``pcspec.engines.search.HUNT_EXAMPLES`` examples): the
   median and the worst over the seeds, how many found it. Target: median < 1 s, found in
   every seed.
3. The length of the seed-0 counterexample as ``pcspec verify`` reports it: the shortest of
   the walker's first finds once shrunk (``pcspec.engines.search.hunt``). Target <= 8.

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

from hypothesis import settings, stateful
from hypothesis.stateful import run_state_machine_as_test

from pcspec.engines import walker
from pcspec.engines.hypothesis import PROFILES, CacheMachine, machine_for, strategy
from pcspec.engines.search import HUNT_EXAMPLES, hunt
from pcspec.model.designs import named
from pcspec.properties.catalogue import get_property
from pcspec.properties.oracle import MUTANT_TARGETS, ORACLE
from pcspec.properties.rules import RULES, SETUP

_rule: Any = stateful.rule
_initialize: Any = stateful.initialize

# -- throughput ------------------------------------------------------------------------------


def _bare(counter: list[int]) -> type[stateful.RuleBasedStateMachine]:
    """The rules with their strategies and no body, no precondition (there is no state)."""

    def nothing(self: Any, **_drawn: Any) -> None:
        counter[0] += 1

    def setup(self: Any, **_drawn: Any) -> None:
        pass

    attrs: dict[str, Any] = {"setup": _initialize(**{n: strategy(d) for n, d in SETUP})(setup)}
    for r in RULES:
        attrs[r.name] = _rule(**{n: strategy(d) for n, d in r.arguments})(nothing)
    return type("Bare", (stateful.RuleBasedStateMachine,), attrs)


def _counted(counter: list[int]) -> type[CacheMachine]:
    """The judged machine, counting the rules it ran (one ``after`` per rule)."""
    base = machine_for(named()["fixed"])

    def after(self: CacheMachine) -> None:
        counter[0] += 1
        base.after(self)

    return type("Counted", (base,), {"after": after})


def hypothesis_rate(examples: int, bare: bool) -> tuple[float, float]:
    """(rules/s, judged operations/s) of the Hypothesis machine on ``fixed``."""
    counter = [0]
    cls = _bare(counter) if bare else _counted(counter)
    s = settings(PROFILES["ci"], max_examples=examples)
    t0 = time.perf_counter()
    run_state_machine_as_test(cls, settings=s)  # type: ignore[no-untyped-call]
    dt = time.perf_counter() - t0
    steps = 0 if bare else cls.record.steps  # type: ignore[attr-defined]
    return counter[0] / dt, steps / dt


def walker_rate(examples: int, bare: bool, seed: int, judged: bool = True) -> tuple[float, float]:
    """(rules/s, operations/s) of the walker on ``fixed`` (``judged``: every property after every
    operation; otherwise none, the model alone)."""
    table = walker._TABLE
    if bare:  # generation only: draw every rule and its arguments, run nothing
        walker._TABLE = tuple(
            walker._Drawn(walker.Rule(d.rule.name, lambda *_a, **_k: None, (), d.rule.arguments), d.arguments)
            for d in table
        )
    try:
        # (made after the swap: a walker takes its rules from the table when it is made)
        w = walker.Walker(named()["fixed"]) if judged else walker.Walker(named()["fixed"], [])
        t0 = time.perf_counter()
        r = w.walk(seed, examples)
        dt = time.perf_counter() - t0
    finally:
        walker._TABLE = table
    return r.rules / dt, r.steps / dt


def throughput(examples: int, reps: int) -> None:
    names = ["Hypothesis, bare", "Hypothesis, judged", "walker, judged", "walker, model only", "walker, bare"]
    runs: list[Callable[[int], tuple[float, float]]] = [
        lambda s: hypothesis_rate(examples, True),
        lambda s: hypothesis_rate(examples, False),
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
        f"  walker judged / Hypothesis bare:   {wj[0] / hb[0]:.2f} (rules/s)\n"
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


def first_violations(seeds: int, examples: int, cap: float, only: str | None) -> None:
    print(
        f"\ntime to first violation, walker hunt, seeds 0..{seeds - 1}, budget {examples} examples"
        f" (cap {cap:.0f} s); '-': not found in every seed"
    )
    head = f"{'variant':26s} {'property':10s} {'median s':>8s} {'worst s':>8s} {'found':>6s}"
    print(f"{head} {'examples':>8s} {'shrunk':>6s}")
    medians = []
    for variant, pid in cells(only):
        w = walker.Walker(named()[variant], [get_property(pid)], [pid])
        ts: list[float] = []
        exs: list[int] = []
        for seed in range(seeds):
            r = w.walk(seed, examples, seconds=cap)
            if r.hit is not None:
                ts.append(r.hit.seconds)
                exs.append(r.examples)
        # verify's own procedure for seed 0: the shortest of the first finds, shrunk
        _run, hit = hunt(named()[variant], pid, 0, examples, cap)
        length = len(hit.trace.ops) if hit else "-"
        if len(ts) == seeds:
            medians.append(statistics.median(ts))
        print(
            f"{variant:26s} {pid:10s} {_fmt(ts, seeds)} {len(ts):3d}/{seeds:<2d} "
            f"{max(exs) if exs else '-'!s:>8s} {length!s:>6s}",
            flush=True,
        )
    if medians:
        print(f"worst median over the cells found in every seed: {max(medians):.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20, help="walk seeds per cell (0: throughput only)")
    ap.add_argument("--examples", type=int, default=HUNT_EXAMPLES, help="walker budget per hunt (verify's)")
    ap.add_argument("--cap", type=float, default=120.0, help="seconds cap of one hunt")
    ap.add_argument("--throughput-examples", type=int, default=300)
    ap.add_argument("--reps", type=int, default=2, help="interleaved throughput repetitions")
    ap.add_argument("--only", help="only cells whose 'variant property' contains this (e.g. mutant:)")
    args = ap.parse_args()
    if args.throughput_examples:
        throughput(args.throughput_examples, args.reps)
    if args.seeds:
        first_violations(args.seeds, args.examples, args.cap, args.only)


if __name__ == "__main__":
    main()
