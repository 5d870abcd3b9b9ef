"""Fuzz campaigns over the state machine: surveys, hunts, and the verdict of each cell.

* A *survey* runs the machine on a variant with every property judged and none failing the
  example: it tells which properties some run violated, and how many steps were examined.
* A *hunt* runs the machine with one target property and stops at its first violation;
  ``pcspec.shrink`` then shrinks the trace by replay (much faster than Hypothesis shrinking
  a stateful run, and it serves survey finds too).

Verdicts are three-valued: ``violated`` (with the trace), ``holds`` (no violation found in
the steps examined; the whole budget ran), ``unknown`` (the time budget ran out first). Same
seed and same commit give the same result, unless a time budget cut the run short.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import Phase, settings
from hypothesis.errors import FlakyStrategyDefinition
from hypothesis.stateful import run_state_machine_as_test

from pcspec.determinism import seed_only_generation
from pcspec.model.variants import Variant
from pcspec.properties.catalogue import CATALOGUE, get_property
from pcspec.properties.machine import PROFILES, CacheMachine, machine_for
from pcspec.trace import Trace


@dataclass
class Run:
    steps: int
    seconds: float
    complete: bool  # False: the time budget ran out before the example budget
    coverage: Counter[str] = field(default_factory=Counter)  # decisions reached (properties/coverage.py)


@dataclass
class Hit:
    property: str
    message: str
    op: int
    trace: Trace
    shrunk: bool


class _OutOfTime(BaseException):
    """Raised inside a run once its safety time cap has passed. A ``BaseException`` (like
    ``KeyboardInterrupt``) so that Hypothesis does not take it for a failure of the example,
    shrink or replay it: it unwinds the run at once, where examples turned into no-ops would
    still cost their generation (a hunt overran its cap by half that way)."""


def _budgeted(cls: type[CacheMachine], deadline: float) -> type[CacheMachine]:
    """Stop the run once the deadline passes; the run is then marked incomplete, and every
    verdict it could not settle is ``unknown`` (never a pass, never a different violation:
    the examples before the cut are the same as in an uncut run of the same seed)."""
    original = cls.do

    def do(self: CacheMachine, op: dict[str, Any]) -> None:
        # Once a target violation was found, the final replay must see the same behaviour,
        # so the cap no longer applies.
        if type(self).found.last is None and time.monotonic() > deadline:
            raise _OutOfTime
        original(self, op)

    return type(cls.__name__, (cls,), {"do": do})


def _run(cls: type[CacheMachine], profile: str, seed: int, examples: int | None, seconds: float) -> Run:
    deadline = time.monotonic() + seconds
    cls = _budgeted(cls, deadline)
    cls._hypothesis_internal_use_seed = seed  # what @seed does
    base = PROFILES[profile]
    phases = [p for p in base.phases if p != Phase.shrink]  # pcspec.shrink does it by replay
    s = settings(base, derandomize=False, max_examples=examples or base.max_examples, phases=phases)
    t0 = time.monotonic()
    complete = True
    try:
        with seed_only_generation():
            run_state_machine_as_test(cls, settings=s)  # type: ignore[no-untyped-call]
    except AssertionError:
        if not cls.targets:
            raise
    except _OutOfTime:
        complete = False
    except FlakyStrategyDefinition:
        # The cap struck while Hypothesis was replaying an example to report it: the replay
        # then differs from the first run, which Hypothesis calls flaky. Past the deadline it
        # is the cap's doing; before it, it is a real error.
        if time.monotonic() <= deadline:
            raise
        complete = False
    return Run(cls.found.steps, time.monotonic() - t0, complete, cls.found.coverage)


def survey(
    variant: Variant,
    profile: str = "ci",
    seed: int = 0,
    examples: int | None = None,
    seconds: float = 60.0,
    properties: Sequence[str] | None = None,
) -> tuple[Run, dict[str, Hit]]:
    props = [get_property(p) for p in properties] if properties else list(CATALOGUE)
    cls = machine_for(variant, props=props)
    run = _run(cls, profile, seed, examples, seconds)
    hits = {
        pid: Hit(pid, v.message, v.op, Trace(variant, cfg, tr, seed, [_expect(v)]), shrunk=False)
        for pid, (v, tr, cfg) in cls.found.first.items()
    }
    return run, hits


def _expect(v: Any) -> dict[str, Any]:
    return {"property": v.property, "op": v.op, "message": v.message}


def hunt(
    variant: Variant, pid: str, profile: str = "ci", seed: int = 0, examples: int | None = None, seconds: float = 30.0
) -> tuple[Run, Hit | None]:
    # Judge only the target: a hunt's examples (and its shrinking) run many times over.
    cls = machine_for(variant, targets=[pid], props=[get_property(pid)])
    run = _run(cls, profile, seed, examples, seconds)
    if cls.found.last is None:
        return run, None
    v, tr, cfg = cls.found.last
    return run, Hit(pid, v.message, v.op, Trace(variant, cfg, tr, seed, [_expect(v)]), shrunk=False)


__all__ = ["CATALOGUE", "Hit", "Run", "hunt", "survey"]
