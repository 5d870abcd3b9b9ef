"""Replaying a trace: the one path from operations to judged states.

Fuzzing, ``pcspec replay``, the simulator and port conformance all go through ``replay``:
a ``Server`` of the trace's variant, each operation applied, every property judged after
every model operation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pcspec.model import ops
from pcspec.model.events import Event
from pcspec.model.server import Server
from pcspec.properties.base import Property, Violation
from pcspec.properties.catalogue import CATALOGUE
from pcspec.properties.runner import Judge
from pcspec.trace import Trace


@dataclass
class Step:
    index: int  # the trace line's operation index (0-based)
    op: dict[str, Any]
    events: list[Event]
    violations: list[Violation]


@dataclass
class ReplayResult:
    server: Server
    steps: list[Step] = field(default_factory=list)

    @property
    def violations(self) -> list[Violation]:
        return [v for s in self.steps for v in s.violations]

    def matches(self, expect: list[dict[str, Any]]) -> bool:
        """Without ``expect``: no violation. With it: every expected violation is present
        (its property at its ``op``, or at any operation when ``op`` is absent); violations
        beyond the expected ones do not matter."""
        if not expect:
            return not self.violations
        seen = {(v.property, v.op) for v in self.violations} | {(v.property, None) for v in self.violations}
        return all((e["property"], e.get("op")) in seen for e in expect)


def replay(
    trace: Trace,
    props: Iterable[Property] = CATALOGUE,
    on_step: Callable[[Step], None] | None = None,
) -> ReplayResult:
    srv = Server(trace.config, trace.variant)
    judge = Judge(srv, props)
    result = ReplayResult(srv)
    for i, op in enumerate(trace.ops):
        start = len(srv.heap.events)
        found: list[Violation] = []
        for _ in ops.apply(srv, op):
            found.extend(judge())
        step = Step(i, op, srv.heap.events[start:], found)
        result.steps.append(step)
        if on_step is not None:
            on_step(step)
    return result
