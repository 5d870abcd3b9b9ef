"""Fuzzed model traces for conformance: the examples of pcspec's Hypothesis state machine.

The machine (``pcspec.properties.machine``) draws configurations small enough to reach every
limit, chat-like and raw requests, faults at every site, slot files, restarts; here it runs
bound to the variant with no property judged, and every example's operations become one
trace. Traces come in batches, each a separate Hypothesis run seeded by ``(seed, batch)``, so
that a run of any length is a function of the seed and holds at most one batch in memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from pcspec.determinism import seed_only_generation
from pcspec.model.config import Config
from pcspec.model.variants import Variant
from pcspec.properties.machine import PROFILES, CacheMachine, machine_for
from pcspec.trace import Trace

BATCH = 100


def _collector(variant: Variant, out: list[Trace]) -> type[CacheMachine]:
    base = machine_for(variant, props=())

    class Collect(base):  # type: ignore[valid-type,misc]
        def do(self, op: dict[str, Any]) -> None:
            if not self.trace:
                self.first_config: Config = self.cfg  # (a restart changes self.cfg)
            super().do(op)

        def teardown(self) -> None:
            if self.trace:
                out.append(Trace(variant, self.first_config, list(self.trace)))

    return Collect


def batch(variant: Variant, seed: int, index: int, n: int = BATCH) -> list[Trace]:
    """The traces of one batch."""
    out: list[Trace] = []
    cls = _collector(variant, out)
    cls._hypothesis_internal_use_seed = seed * 1_000_003 + index
    s = settings(PROFILES["ci"], max_examples=n, derandomize=False, phases=[Phase.generate])
    with seed_only_generation():
        run_state_machine_as_test(cls, settings=s)  # type: ignore[no-untyped-call]
    return out


def traces(variant: Variant, count: int, seed: int = 0) -> Iterator[Trace]:
    """``count`` fuzzed traces (each batch may hold a few more examples than asked: the surplus
    is dropped)."""
    done, index = 0, 0
    while done < count:
        for t in batch(variant, seed, index, min(BATCH, count - done)):
            if done >= count:
                return
            yield t
            done += 1
        index += 1
