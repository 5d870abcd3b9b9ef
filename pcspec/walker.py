"""The seeded swarm walker: the Hypothesis machine's rules, driven by a plain PRNG.

Hypothesis spends a large share of a fuzzing step generating it (choice sequences, strategy
objects, rule selection, its bookkeeping for shrinking): the bare machine, rule bodies
replaced by nothing, runs at about 3 times the rate of the judged one. The walker draws a
rule in about a twenty-fifth of Hypothesis's time (docs/PERFORMANCE.md), and drives the same
machine class (``pcspec.properties.machine``: its rule methods, preconditions, argument ranges
and ``configs()``, read by ``pcspec.walker_rules``; its ``do``, which records every operation
and judges the properties after every model operation) in the style of a deterministic
simulator:

* an *example* is a function of one integer, its example seed: ``Random(example_seed)`` picks
  the configuration and the fault sites (the machine's ``setup``), the *swarm* (which rules are
  enabled in this example: each with probability 1/2, all of them if that left none; which of
  their arguments keep one value for the whole example: each with probability 1/4), the
  example's length (1 to ``steps`` rules), then each rule among the enabled ones whose
  preconditions hold, and its arguments;
* a *walk* of seed ``s`` runs the examples ``s * STRIDE + i`` for ``i`` in ``range(examples)``,
  so a walk is a function of (variant, properties, seed, examples, steps) alone: no time, no
  string hash, no global random state. ``pcspec campaign --seeds A:B`` runs example seeds
  ``A..B-1``: walk seed 0 of ``n`` examples is campaign seeds ``0:n``.

A hunt (``targets``) stops at the first violation of a target; a survey (no targets) runs every
example and records the first violation of each property. A time cap may stop a walk; it is
then ``complete=False``, and what it did not settle is ``unknown``, never a pass. Finds are
shrunk by ``pcspec.shrink`` like the Hypothesis machine's.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pcspec.model.config import Config
from pcspec.model.variants import Variant
from pcspec.properties.base import Property, Violation
from pcspec.properties.catalogue import CATALOGUE, get_property
from pcspec.properties.machine import CacheMachine, Found, machine_for
from pcspec.trace import Trace
from pcspec.walker_rules import Rule, RuleTable, below, rule_table

# Example seeds of walk seed s: s * STRIDE + i. Far above any example budget, so the walks of
# two seeds never share an example.
STRIDE = 1 << 32
# Rules per example at most (each example draws its length from 1..STEPS). Longer than a
# Hypothesis example (the ci profile's 25): a walker example costs nothing to generate, and
# the deep states (an entry emptied by a failed load, loaded again, then checkpointed) need
# long sequences. Measured over the hard cells (docs/PERFORMANCE.md): 60 found them in about
# half the model steps of 25; 100 was no better than 60.
STEPS = 60
# Swarm: the chance that a rule is enabled in an example, and that an argument is fixed.
ENABLE = 0.5
FIX = 0.25


def _fixed(value: Any) -> Callable[[random.Random], Any]:
    return lambda _rng: value


class _OutOfTime(BaseException):
    """Unwinds a walk at once when its time cap passes (a BaseException: no rule catches it)."""


@dataclass
class Find:
    """The first violation of one property in a walk: where, and the trace that shows it."""

    violation: Violation
    ops: list[dict[str, Any]]
    config: Config
    example_seed: int
    seconds: float  # from the start of the walk (time-to-first-violation; not part of the result)

    def trace(self, variant: Variant) -> Trace:
        v = self.violation
        expect = [{"property": v.property, "op": v.op, "message": v.message}]
        return Trace(variant, self.config, list(self.ops), self.example_seed, expect)


@dataclass
class Walk:
    examples: int = 0  # examples run to their end (or to the target's violation)
    rules: int = 0  # rules the walker chose (workflow rules count once, as in Hypothesis)
    steps: int = 0  # model operations judged
    seconds: float = 0.0
    complete: bool = True  # False: the time cap stopped the walk
    first: dict[str, Find] = field(default_factory=dict)  # property -> its first violation
    hit: Find | None = None  # a hunt's target violation
    coverage: Counter[str] = field(default_factory=Counter)  # decisions reached (properties/coverage.py)


@dataclass
class Example:
    seed: int
    found: Found  # the machine's record: first violation per property, steps, a target's hit
    rules: int  # rules run
    ops: list[dict[str, Any]]  # every operation, in order (the example's whole trace)


def example_seed(seed: int, i: int) -> int:
    return seed * STRIDE + i


class Walker:
    """Runs examples of one variant's machine; reused across examples and walks."""

    def __init__(self, variant: Variant, props: Sequence[Property] = CATALOGUE, targets: Iterable[str] = ()) -> None:
        self.variant = variant
        self.targets = frozenset(targets)
        base = machine_for(variant, targets=self.targets, props=props)
        self.deadline = float("inf")
        walker = self

        def do(machine: CacheMachine, op: dict[str, Any]) -> None:
            # The machine's own `do` (record, apply, judge); the cap is checked between
            # operations, so a cut never changes what an operation did.
            if time.monotonic() > walker.deadline:
                raise _OutOfTime
            base.do(machine, op)

        self.cls: type[CacheMachine] = type(base.__name__, (base,), {"do": do})
        self.table: RuleTable = rule_table(self.cls)

    def example(self, seed: int, steps: int = STEPS) -> Example:
        """Run the example of this example seed. A target's violation ends it (``Found.last``)."""
        rng = random.Random(seed)
        found = self.cls.found = Found()
        machine = self.cls()
        ran = 0
        for init in self.table.initializers:
            init.function(machine, **init.draw(rng))
        rules = self._swarm(rng)
        n = 1 + below(rng, steps)
        try:
            self._invariants(machine)
            for _ in range(n):
                enabled = [r for r in rules if r.enabled(machine)]
                if not enabled:
                    break
                rule = enabled[below(rng, len(enabled))]
                ran += 1
                rule.function(machine, **rule.draw(rng))
                self._invariants(machine)
        except AssertionError:
            if found.last is None:  # not a target's violation: a failure of the machine itself
                raise
        machine.teardown()  # type: ignore[no-untyped-call]
        return Example(seed, found, ran, machine.trace)

    def _swarm(self, rng: random.Random) -> list[Rule]:
        """This example's rules: each enabled with probability 1/2 (all of them if that left
        none), and each argument of each fixed for the whole example with probability 1/4."""
        # Swarm testing (Groce et al. 2012): leaving rules out of an example makes the
        # others' rare sequences likelier (no sleep_wake wiping the cache between a save and
        # its failed load), and an argument fixed for the example repeats one choice (the
        # same conversation, file name, fault or corruption) where a sequence needs it
        # several times. Both choices are drawn for every rule, enabled or not, so that a
        # rule's draws do not depend on its neighbours'.
        out = []
        for r in self.table.rules:
            on = rng.random() < ENABLE
            args = tuple((name, _fixed(d(rng)) if rng.random() < FIX else d) for name, d in r.arguments)
            if on:
                out.append(Rule(r.name, r.function, r.preconditions, args))  # (``replace``, without its cost)
        return out or list(self.table.rules)

    def _invariants(self, machine: CacheMachine) -> None:
        for inv in self.table.invariants:
            inv(machine)

    def walk(
        self,
        seed: int,
        examples: int,
        steps: int = STEPS,
        seconds: float = float("inf"),
        on_find: Callable[[Find], None] | None = None,
    ) -> Walk:
        """The examples of walk seed ``seed`` in order (see the module doc)."""
        return self.run_seeds((example_seed(seed, i) for i in range(examples)), steps, seconds, on_find)

    def run_seeds(
        self,
        seeds: Iterable[int],
        steps: int = STEPS,
        seconds: float = float("inf"),
        on_find: Callable[[Find], None] | None = None,
    ) -> Walk:
        """The examples of these example seeds in order; stops at a target's violation."""
        t0 = time.monotonic()
        self.deadline = t0 + seconds
        out = Walk()
        try:
            for s in seeds:
                ex = self.example(s, steps)
                found = ex.found
                out.examples += 1
                out.rules += ex.rules
                out.steps += found.steps
                out.coverage.update(found.coverage)
                elapsed = time.monotonic() - t0
                for pid, (v, ops, cfg) in found.first.items():
                    if pid not in out.first:
                        out.first[pid] = Find(v, ops, cfg, s, elapsed)
                        if on_find is not None:
                            on_find(out.first[pid])
                if found.last is not None:
                    v, ops, cfg = found.last
                    out.hit = Find(v, ops, cfg, s, elapsed)
                    break
        except _OutOfTime:
            out.steps += self.cls.found.steps  # the cut example's operations were judged too
            out.coverage.update(self.cls.found.coverage)
            out.complete = False
        finally:
            self.deadline = float("inf")
        out.seconds = time.monotonic() - t0
        return out


def hunt(
    variant: Variant, pid: str, seed: int, examples: int, seconds: float = float("inf"), steps: int = STEPS
) -> Walk:
    """Walk until ``pid`` is violated (only ``pid`` judged, as in a Hypothesis hunt)."""
    return Walker(variant, [get_property(pid)], [pid]).walk(seed, examples, steps, seconds)


__all__ = ["STEPS", "STRIDE", "Example", "Find", "Walk", "Walker", "example_seed", "hunt"]
