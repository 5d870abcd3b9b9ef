"""Surveys and hunts: how ``pcspec verify`` and ``pcspec fuzz`` settle a cell.

* A *survey* walks a variant with every property judged and none failing an example: it tells
  which properties some example violated, and how many model operations were examined. Its
  examples are the walk's from ``SURVEY_OFFSET`` on, so they are not the examples a hunt of the
  same seed starts with (a hunt would otherwise re-run what the survey already judged).
* A *hunt* walks with one target property judged and stops at its first violation. Up to
  ``FINDS`` finds are shrunk (``pcspec.properties.judge.shrink_trace``) and the shortest kept:
  the first find of a walk is not always a simple one (a rare timing of a dozen server steps
  where another example shows the same violation in four operations), and the replay shrinker
  cannot turn one scenario into another. The extra finds are looked for within as many
  examples again as the first took, so an easy cell stays cheap.

Both are walks of the seeded walker (``pcspec.engines.walker``), so the result depends on the
variant, the seed and the example budgets alone: the same on every machine and every
Hypothesis version. Verdicts are three-valued: ``violated`` (with the trace), ``holds`` (no
violation in the examples of the budget, every one run), ``unknown`` (a safety time cap cut the
walk first: never a pass, and no trace chosen by the clock).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from pcspec.core.trace import Trace
from pcspec.engines import walker
from pcspec.model.design import Design
from pcspec.properties.catalogue import CATALOGUE, get_property
from pcspec.properties.judge import base_violates, shrink_trace

# Survey examples of walk seed s are example_seed(s, SURVEY_OFFSET + i): far beyond any hunt.
SURVEY_OFFSET = 1 << 31
# The walker's example budget of one hunt. The hard cells take up to a few hundred examples
# (median) and about 1,000 at worst over 20 seeds (docs/PERFORMANCE.md, "Fuzzing speed").
HUNT_EXAMPLES = 4000
FINDS = 3


@dataclass
class Run:
    steps: int
    seconds: float
    complete: bool  # False: the time cap ran out before the example budget
    coverage: Counter[str] = field(default_factory=Counter)  # decisions reached (properties/coverage.py)


@dataclass
class Hit:
    property: str
    message: str
    op: int
    trace: Trace
    shrunk: bool


def survey(
    variant: Design,
    seed: int = 0,
    examples: int = 600,
    seconds: float = float("inf"),
    properties: Sequence[str] | None = None,
) -> tuple[Run, dict[str, Hit]]:
    """Every property (or ``properties``) judged over ``examples`` examples of walk ``seed``;
    the first violation of each, unshrunk."""
    props = [get_property(p) for p in properties] if properties else list(CATALOGUE)
    w = walker.Walker(variant, props).run_seeds(
        (walker.example_seed(seed, SURVEY_OFFSET + i) for i in range(examples)), seconds=seconds
    )
    run = Run(w.steps, w.seconds, w.complete, w.coverage)
    hits = {}
    for pid, f in w.first.items():
        v = f.violation
        hits[pid] = Hit(pid, v.message, v.at, f.trace(variant), shrunk=False)
    return run, hits


def hunt(
    variant: Design, pid: str, seed: int = 0, examples: int = HUNT_EXAMPLES, seconds: float = float("inf")
) -> tuple[Run, Hit | None]:
    """Up to ``FINDS`` finds of ``pid`` (walk seed ``seed``, at most ``examples`` examples,
    only ``pid`` judged); the shortest once shrunk (ties: the first found), or None. For a
    mutant, a find counts only where its base design does not violate ``pid`` on the same
    operations (``judge.base_violates``): the walk goes on past one that does. A time cap
    that stops the walk gives an incomplete run and no hit, whatever was found before it: the
    trace chosen must not depend on the time."""
    w = walker.Walker(variant, [get_property(pid)], [pid])
    deadline = time.monotonic() + seconds
    run = Run(0, 0.0, True)
    finds: list[walker.Find] = []
    start, stop = 0, examples
    while len(finds) < FINDS and start < stop:
        r = w.run_seeds(
            (walker.example_seed(seed, i) for i in range(start, stop)), seconds=max(deadline - time.monotonic(), 0.0)
        )
        run.steps += r.steps
        run.seconds += r.seconds
        run.coverage.update(r.coverage)
        if not r.complete:
            return Run(run.steps, run.seconds, False, run.coverage), None
        if r.hit is None:
            break
        i = r.hit.example_seed - walker.example_seed(seed, 0)
        start = i + 1
        if base_violates(r.hit.trace(variant), pid):
            continue  # a mutant's base design fails there too: not the mutant's doing, walk on
        finds.append(r.hit)
        if len(finds) == 1:
            stop = min(examples, 2 * (i + 1))
    if not finds:
        return run, None
    t0 = time.monotonic()
    shrunk = [shrink_trace(f.trace(variant), pid) for f in finds]
    run.seconds += time.monotonic() - t0
    best = min(range(len(shrunk)), key=lambda k: (len(shrunk[k].ops), k))
    trace = shrunk[best]
    v = trace.expect[0]  # (a walker find's trace always names its violation; shrinking keeps it)
    return run, Hit(pid, str(v["message"]), int(v["op"]), trace, shrunk=True)


__all__ = ["FINDS", "HUNT_EXAMPLES", "SURVEY_OFFSET", "Hit", "Run", "hunt", "survey"]
