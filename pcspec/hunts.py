"""The order in which ``pcspec verify`` hunts a property: the walker first, then Hypothesis.

A cell that needs a hunt (an expected violation a survey did not meet, a mutant's target) is
hunted by the seeded swarm walker (``pcspec.walker``) for at most ``walker_examples`` examples
of walk seed ``seed`` (its first ``FINDS`` finds are shrunk and the shortest kept); if it finds
nothing, by the Hypothesis machine (``pcspec.fuzzing.hunt``) with its own example budget, as
before the walker existed. Both budgets are example counts, so which one finds the violation,
and the trace it finds, depend on the seed and the budgets alone: the run is as deterministic
as each hunt. The walker finds every expected violation and mutant target faster than the
Hypothesis hunt (docs/PERFORMANCE.md, "Fuzzing speed"); Hypothesis stays as the second
hunter, so a cell the walker misses is hunted exactly as before.

The time caps only stop runs: a walker cut by its cap ends the cell as ``unknown`` (the
Hypothesis hunt is not started, so a cut never yields a trace an uncut run would not have).
"""

from __future__ import annotations

import time

from pcspec import walker
from pcspec.fuzzing import Hit, Run, hunt
from pcspec.model.variants import Variant
from pcspec.properties.catalogue import get_property
from pcspec.shrink import shrink

# The walker's example budget of one verify hunt. The hard cells take up to a few hundred
# examples (median) and about 3,000 at worst over 20 seeds (docs/PERFORMANCE.md, "Fuzzing
# speed"); past the budget, Hypothesis hunts.
WALKER_EXAMPLES = 4000
# Walker finds shrunk per hunt; the shortest shrunk one is kept. The first find of a walk is
# not always a simple one (a rare timing of a dozen server steps where another example shows
# the same violation in four operations), and the replay shrinker cannot turn one scenario
# into another. The extra finds are looked for within as many examples again as the first
# took, so an easy cell stays cheap.
FINDS = 3


def walker_hunt(variant: Variant, pid: str, seed: int, examples: int, seconds: float) -> tuple[Run, Hit | None]:
    """Up to ``FINDS`` walker finds of ``pid`` (walk seed ``seed``, at most ``examples``
    examples); the shortest once shrunk (ties: the first found), or None. A time cap that
    stops the walk gives an incomplete run and no hit, whatever was found before it: the trace
    chosen must not depend on the time."""
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
        finds.append(r.hit)
        i = r.hit.example_seed - walker.example_seed(seed, 0)
        if len(finds) == 1:
            stop = min(examples, 2 * (i + 1))
        start = i + 1
    if not finds:
        return run, None
    t0 = time.monotonic()
    shrunk = [shrink(f.trace(variant), pid) for f in finds]
    run.seconds += time.monotonic() - t0
    best = min(range(len(shrunk)), key=lambda k: (len(shrunk[k].ops), k))
    trace = shrunk[best]
    v = trace.expect[0]  # (a walker find's trace always names its violation; shrink keeps it)
    return run, Hit(pid, str(v["message"]), int(v["op"]), trace, shrunk=True)


def first_hunt(
    variant: Variant,
    pid: str,
    profile: str,
    seed: int,
    walker_examples: int,
    hunt_examples: int,
    seconds: float,
) -> tuple[Run, Hit | None]:
    """Hunt ``pid`` on ``variant``: the walker, then (if it found nothing) Hypothesis.

    Returns the combined run (steps and seconds of both; complete unless a cap stopped one)
    and the hit, if any: the walker's is already shrunk (its trace's ``seed`` is the example
    seed), Hypothesis's is not."""
    wrun, hit = walker_hunt(variant, pid, seed, walker_examples, seconds)
    if hit is not None or not wrun.complete:
        return wrun, hit
    run, hit = hunt(variant, pid, profile, seed, hunt_examples, seconds)
    return Run(wrun.steps + run.steps, wrun.seconds + run.seconds, run.complete, wrun.coverage + run.coverage), hit


__all__ = ["FINDS", "WALKER_EXAMPLES", "first_hunt", "walker_hunt"]
