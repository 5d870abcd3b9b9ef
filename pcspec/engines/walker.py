"""The seeded swarm walker: the fuzzing rules driven by a plain PRNG.

The walker runs the rules of ``pcspec.properties.rules`` (their bodies, preconditions and
argument domains, the same ones the Hypothesis engine runs) in the style of a deterministic
simulator:

* an *example* is a function of one integer, its example seed: ``Random(example_seed)`` picks
  the configuration and the fault sites (``rules.SETUP``), the *swarm* (which rules are enabled
  in this example: each with probability 1/2, all of them if that left none; which of their
  arguments keep one value for the whole example: each with probability 1/4), the example's
  length (1 to ``steps`` rules), then each rule among the enabled ones whose preconditions
  hold, and its arguments;
* a *walk* of seed ``s`` runs the examples ``s * STRIDE + i`` for ``i`` in ``range(examples)``,
  so a walk is a function of (variant, properties, seed, examples, steps) alone: no time, no
  string hash, no global random state, no Hypothesis. ``pcspec campaign --seeds A:B`` runs
  example seeds ``A..B-1``: walk seed 0 of ``n`` examples is campaign seeds ``0:n``.

A hunt (``targets``) stops at the first violation of a target; a survey (no targets) runs every
example and records the first violation of each property. A time cap may stop a walk; it is
then ``complete=False``, and what it did not settle is ``unknown``, never a pass. Everything is
returned (``Walk``, ``Example``); nothing is raised or kept in class variables.

Every draw goes through ``Random.random()``, whose sequence for a given integer seed is the
same on every platform and Python 3 version; integers are ``lo + int(random() * span)``
(``randrange`` would cost three times as much on the hot path).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pcspec.core.draw import Bool, Choice, Composite, Domain, Int, Lists
from pcspec.core.ops import Operation
from pcspec.core.results import Finding
from pcspec.core.trace import Trace
from pcspec.model.config import Config
from pcspec.model.design import Design
from pcspec.properties.base import Property
from pcspec.properties.catalogue import CATALOGUE, get_property
from pcspec.properties.rules import RULES, SETUP, Fuzz, Rule

T = TypeVar("T")
Drawer = Callable[[random.Random], Any]

# Example seeds of walk seed s: s * STRIDE + i. Far above any example budget, so the walks of
# two seeds never share an example.
STRIDE = 1 << 32
# Rules per example at most (each example draws its length from 1..STEPS). Longer than a
# Hypothesis example (the ci profile's 25): a walker example costs nothing to generate, and
# the deep states (an entry emptied by a failed load, loaded again, then checkpointed) need
# long sequences. Measured over the hard cells of 2026-12-01 (in git: git log -p
# docs/PERFORMANCE.md): 60 found them in about half the model steps of 25; 100 was no better than 60.
STEPS = 60
# Swarm: the chance that a rule is enabled in an example, and that an argument is fixed.
ENABLE = 0.5
FIX = 0.25


def below(rng: random.Random, n: int) -> int:
    """A uniform integer in ``[0, n)``."""
    return int(rng.random() * n)


class RandomDraw:
    """The draw interface (``pcspec.core.draw.Draw``) over a ``random.Random``."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return lo + int(self.rng.random() * (hi - lo + 1))

    def choice(self, options: Sequence[T]) -> T:
        return options[int(self.rng.random() * len(options))]

    def boolean(self) -> bool:
        return self.rng.random() < 0.5

    def sample(self, options: Sequence[T], min_size: int, max_size: int, unique: bool) -> list[T]:
        n = min_size + int(self.rng.random() * (max_size - min_size + 1))
        if not unique:
            return [self.choice(options) for _ in range(n)]
        # A partial Fisher-Yates shuffle: distinct elements, each order equally likely.
        left = list(dict.fromkeys(options))
        return [left.pop(int(self.rng.random() * len(left))) for _ in range(n)]


def drawer(domain: Domain) -> Drawer:
    """``domain`` as a function of the generator, drawing what ``RandomDraw`` draws (the hot
    path: a rule's arguments are drawn at every step, so the common domains are closures)."""
    if isinstance(domain, Int):
        lo, span = domain.lo, domain.hi - domain.lo + 1
        return lambda rng: lo + int(rng.random() * span)
    if isinstance(domain, Choice):
        options, n = domain.options, len(domain.options)
        return lambda rng: options[int(rng.random() * n)]
    if isinstance(domain, Bool):
        return lambda rng: rng.random() < 0.5
    if isinstance(domain, Lists | Composite):
        return lambda rng: domain.draw(RandomDraw(rng))
    raise TypeError(f"no drawer for {domain!r}")


@dataclass(frozen=True)
class _Drawn:
    """A rule with its arguments as drawers (some fixed for the example by the swarm)."""

    rule: Rule
    arguments: tuple[tuple[str, Drawer], ...]

    def enabled(self, fuzz: Fuzz) -> bool:
        for p in self.rule.preconditions:  # noqa: SIM110  (a loop: asked of every rule at every step)
            if not p(fuzz):
                return False
        return True

    def draw(self, rng: random.Random) -> dict[str, Any]:
        # In the order the rule declares them: the draw order is part of the seed's meaning.
        return {name: d(rng) for name, d in self.arguments}


def _fixed(value: Any) -> Drawer:
    return lambda _rng: value


_TABLE: tuple[_Drawn, ...] = tuple(_Drawn(r, tuple((n, drawer(d)) for n, d in r.arguments)) for r in RULES)
_SETUP: tuple[tuple[str, Drawer], ...] = tuple((n, drawer(d)) for n, d in SETUP)


@dataclass
class Find:
    """The first violation of one property in a walk: where, and the trace that shows it."""

    violation: Finding
    ops: list[Operation]
    config: Config
    example_seed: int
    seconds: float  # from the start of the walk (time-to-first-violation; not part of the result)

    def trace(self, variant: Design) -> Trace:
        v = self.violation
        expect = [{"property": v.rule, "op": v.at, "message": v.message}]
        return Trace(variant, self.config, list(self.ops), self.example_seed, expect)


@dataclass
class Walk:
    examples: int = 0  # examples run to their end (or to the target's violation)
    rules: int = 0  # rules the walker chose (workflow rules count once)
    steps: int = 0  # model operations judged
    seconds: float = 0.0
    complete: bool = True  # False: the time cap stopped the walk
    first: dict[str, Find] = field(default_factory=dict)  # property -> its first violation
    hit: Find | None = None  # a hunt's target violation
    coverage: Counter[str] = field(default_factory=Counter)  # decisions reached (properties/coverage.py)


@dataclass
class Example:
    seed: int
    fuzz: Fuzz  # the example's record: first violation per property, steps, a target's hit
    rules: int  # rules run
    ops: list[Operation]  # every operation, in order (the example's whole trace)


def example_seed(seed: int, i: int) -> int:
    return seed * STRIDE + i


class Walker:
    """Runs examples of one variant; reused across examples and walks."""

    def __init__(self, variant: Design, props: Sequence[Property] = CATALOGUE, targets: Iterable[str] = (),
                 reference: bool | None = None) -> None:
        self.variant = variant
        self.reference = reference  # the judge's mode (properties/judge.py: Judge)
        self.props = tuple(props)
        self.targets = frozenset(targets)
        # the rules of this variant (rules_for): a rule that does not apply draws nothing
        self.table = tuple(d for d in _TABLE if d.rule.applies(variant))

    def example(self, seed: int, steps: int = STEPS, deadline: float = float("inf")) -> Example:
        """Run the example of this example seed. A target's violation ends it (``Fuzz.hit``),
        so does the time cap (``Fuzz.out_of_time``)."""
        rng = random.Random(seed)
        fuzz = Fuzz(self.variant, self.props, self.targets, deadline, reference=self.reference)
        fuzz.setup(**{name: d(rng) for name, d in _SETUP})
        rules = self._swarm(rng)
        n = 1 + below(rng, steps)
        ran = 0
        for _ in range(n):
            enabled = [r for r in rules if r.enabled(fuzz)]
            if not enabled:
                break
            chosen = enabled[below(rng, len(enabled))]
            ran += 1
            chosen.rule.body(fuzz, **chosen.draw(rng))
            if fuzz.stopped:
                break
        return Example(seed, fuzz, ran, fuzz.trace)

    def _swarm(self, rng: random.Random) -> list[_Drawn]:
        """This example's rules: each enabled with probability 1/2 (all of them if that left
        none), and each argument of each fixed for the whole example with probability 1/4."""
        # Swarm testing (Groce et al. 2012): leaving rules out of an example makes the
        # others' rare sequences likelier (no sleep_wake wiping the cache between a save and
        # its failed load), and an argument fixed for the example repeats one choice (the
        # same conversation, file name, fault or corruption) where a sequence needs it
        # several times. Both choices are drawn for every rule, enabled or not, so that a
        # rule's draws do not depend on its neighbours'.
        out = []
        for r in self.table:
            on = rng.random() < ENABLE
            args = tuple((name, _fixed(d(rng)) if rng.random() < FIX else d) for name, d in r.arguments)
            if on:
                out.append(_Drawn(r.rule, args))
        return out or list(self.table)

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
        deadline = t0 + seconds
        out = Walk()
        for s in seeds:
            ex = self.example(s, steps, deadline)
            fuzz = ex.fuzz
            out.steps += fuzz.judged  # (a cut example's operations were judged too)
            out.coverage.update(fuzz.coverage)
            if fuzz.out_of_time:
                out.complete = False
                break
            out.examples += 1
            out.rules += ex.rules
            elapsed = time.monotonic() - t0
            for pid, (v, ops, cfg) in fuzz.first.items():
                if pid not in out.first:
                    out.first[pid] = Find(v, ops, cfg, s, elapsed)
                    if on_find is not None:
                        on_find(out.first[pid])
            if fuzz.hit is not None:
                v, ops, cfg = fuzz.hit
                out.hit = Find(v, ops, cfg, s, elapsed)
                break
        out.seconds = time.monotonic() - t0
        return out


def hunt(
    variant: Design, pid: str, seed: int, examples: int, seconds: float = float("inf"), steps: int = STEPS
) -> Walk:
    """Walk until ``pid`` is violated (only ``pid`` judged)."""
    return Walker(variant, [get_property(pid)], [pid]).walk(seed, examples, steps, seconds)


__all__ = ["STEPS", "STRIDE", "Example", "Find", "RandomDraw", "Walk", "Walker", "drawer", "example_seed", "hunt"]
