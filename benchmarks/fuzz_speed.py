"""Fuzzing speed, measured side by side in one run.

1. Throughput: rule executions per second of the state machine with every property judged
   after every model operation, over the same machine with every rule body replaced by
   nothing (same rules, same argument strategies), same settings and seed. Target >= 0.5.
2. Time to first violation, for every expected violation of the oracle and every mutant:
   a survey per (variant, seed) with every property judged, stopping once all the
   violations expected of that variant were seen; the median over the seeds. Target < 1 s.
3. The shrunk length of each first counterexample (pcspec.shrink). Target <= 8 operations.

    python benchmarks/fuzz_speed.py [--seeds 20] [--examples 300] [--budget 20]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable
from typing import Any

from hypothesis import Phase, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule, run_state_machine_as_test

from pcspec.model.variants import ALL
from pcspec.properties.catalogue import CATALOGUE
from pcspec.properties.machine import PROFILES, CacheMachine, machine_for
from pcspec.properties.oracle import MUTANT_TARGETS, ORACLE
from pcspec.shrink import shrink
from pcspec.trace import Trace


def _counted(base: type[RuleBasedStateMachine], bare: bool, counter: list[int]) -> type[RuleBasedStateMachine]:
    """A subclass whose rules count their executions (and, if ``bare``, do nothing else)."""
    attrs: dict[str, Any] = {}
    for name in dir(base):
        f = getattr(base, name)
        r = getattr(f, "hypothesis_stateful_rule", None)
        i = getattr(f, "hypothesis_stateful_initialize_rule", None)
        if r is None and i is None:
            continue

        def make(fn: Callable[..., Any]) -> Callable[..., Any]:
            def body(self: Any, *a: Any, **kw: Any) -> None:
                depth = getattr(self, "_depth", 0)
                if depth == 0:  # workflow rules call other rules: count what Hypothesis ran
                    counter[0] += 1
                if not bare:
                    self._depth = depth + 1
                    try:
                        fn(self, *a, **kw)
                    finally:
                        self._depth = depth

            return body

        wrapped = make(f)
        if i is not None:
            attrs[name] = initialize(**i.arguments)(wrapped)
        else:
            g = rule(**r.arguments)(wrapped)
            pre = getattr(f, "hypothesis_stateful_precondition", None)
            if pre is not None and not bare:
                g = precondition(pre)(g)
            attrs[name] = g
    if bare:
        return type("Bare", (RuleBasedStateMachine,), attrs)
    return type("Counted", (base,), attrs)


def throughput(examples: int) -> tuple[float, float]:
    s = settings(PROFILES["ci"], max_examples=examples)
    out = []
    for bare in (True, False):
        counter = [0]
        cls = _counted(machine_for(ALL["fixed"]), bare, counter)
        t0 = time.perf_counter()
        run_state_machine_as_test(cls, settings=s)  # type: ignore[no-untyped-call]
        out.append(counter[0] / (time.perf_counter() - t0))
    return out[0], out[1]


class _Done(Exception):
    """Ends a survey once every expected violation was seen (or the budget ran out)."""


def first_violations(variant: str, expected: set[str], seed: int, examples: int, budget: float) -> dict[str, float]:
    """Seconds from the start of a survey to the first violation of each property."""
    cls = machine_for(ALL[variant])
    t0 = time.perf_counter()
    seen: dict[str, float] = {}
    original = CacheMachine.do

    def do(self: CacheMachine, op: dict[str, Any]) -> None:
        if expected <= set(seen) or time.perf_counter() - t0 > budget:
            raise _Done
        original(self, op)
        for pid in type(self).found.first:
            seen.setdefault(pid, time.perf_counter() - t0)

    sub = type(cls.__name__, (cls,), {"do": do})
    sub._hypothesis_internal_use_seed = seed  # type: ignore[attr-defined]
    s = settings(PROFILES["ci"], derandomize=False, max_examples=examples, phases=[Phase.generate])
    # Hypothesis re-runs the "failing" example and finds _Done earlier (a flakiness error):
    # either way the times are recorded in `seen` by then.
    with contextlib.suppress(Exception):
        run_state_machine_as_test(sub, settings=s)  # type: ignore[no-untyped-call]
    return seen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--examples", type=int, default=2000, help="example budget of one survey")
    ap.add_argument("--budget", type=float, default=20.0, help="seconds budget of one survey")
    ap.add_argument("--throughput-examples", type=int, default=300)
    ap.add_argument("--only", help="only variants whose name contains this (e.g. mutant:)")
    args = ap.parse_args()

    bare, full = throughput(args.throughput_examples)
    print(f"throughput: bare machine {bare:,.0f} rules/s, with every property judged {full:,.0f} rules/s, "
          f"ratio {full / bare:.2f} (target >= 0.5)")

    targets: dict[str, set[str]] = {v: {p for p, e in row.items() if e == "x"} for v, row in ORACLE.items()}
    targets |= {m: set(t) for m, t in MUTANT_TARGETS.items()}
    print(f"\ntime to first violation over {args.seeds} seeds (median; '-' = not found within the budget)")
    print(f"{'variant':26s} {'property':10s} {'median s':>9s} {'found':>6s} {'shrunk ops':>10s}")
    for variant, expected in targets.items():
        if args.only and args.only not in variant:
            continue
        times: dict[str, list[float]] = {p: [] for p in expected}
        lengths: dict[str, int] = {}
        for seed in range(args.seeds):
            seen = first_violations(variant, expected, seed, args.examples, args.budget)
            for p in expected:
                if p in seen:
                    times[p].append(seen[p])
        # the shrunk length of one counterexample per property (a seed-0 survey)
        first = _first_traces(variant, expected, args.examples, args.budget)
        for p, tr in first.items():
            lengths[p] = len(shrink(tr, p).ops)
        is_mutant = variant.startswith("mutant:")
        for p in sorted(expected):
            ts = times[p]
            med = f"{statistics.median(ts):9.2f}" if len(ts) == args.seeds else "        -"
            if is_mutant and not ts:
                med = "        -"
            print(f"{variant:26s} {p:10s} {med} {len(ts):3d}/{args.seeds:<2d} {lengths.get(p, '-')!s:>10s}")


def _first_traces(variant: str, expected: set[str], examples: int, budget: float) -> dict[str, Trace]:
    cls = machine_for(ALL[variant], props=[p for p in CATALOGUE if p.id in expected])
    sub = type(cls.__name__, (cls,), {})
    sub._hypothesis_internal_use_seed = 0  # type: ignore[attr-defined]
    s = settings(PROFILES["ci"], derandomize=False, max_examples=examples)
    t0 = time.perf_counter()
    original = cls.do

    def do(self: CacheMachine, op: dict[str, Any]) -> None:
        if expected <= set(type(self).found.first) or time.perf_counter() - t0 > budget:
            return
        original(self, op)

    sub.do = do  # type: ignore[method-assign]
    run_state_machine_as_test(sub, settings=s)  # type: ignore[no-untyped-call]
    return {p: Trace(ALL[variant], cfg, tr, 0) for p, (_v, tr, cfg) in cls.found.first.items()}


if __name__ == "__main__":
    main()
