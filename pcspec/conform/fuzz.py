"""Fuzzed model traces for conformance: the examples of pcspec's seeded walker.

The walker (``pcspec.engines.walker``) runs the fuzzing rules (``pcspec.properties.rules``:
configurations small enough to reach every limit, chat-like and raw requests, faults at every
site, slot files, restarts); here with no property judged, and every example's operations
become one trace. Example ``i`` of seed ``s`` is the walker's example seed ``(s, i)``, so a run
of any length is a function of the seed, and traces are made one at a time.
"""

from __future__ import annotations

from collections.abc import Iterator

from pcspec.core.trace import Trace
from pcspec.engines.walker import Walker, example_seed
from pcspec.model.design import Design


def traces(variant: Design, count: int, seed: int = 0) -> Iterator[Trace]:
    """``count`` fuzzed traces (examples that applied no operation are skipped)."""
    w = Walker(variant, props=())
    done, i = 0, 0
    while done < count:
        ex = w.example(example_seed(seed, i))
        i += 1
        if ex.ops:
            yield Trace(variant, ex.fuzz.cfg0, list(ex.ops))
            done += 1


__all__ = ["traces"]
