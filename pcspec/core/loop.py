"""The one loop from operations to judged states.

Fuzzing (both engines), ``pcspec replay``, the shrinker, the proofs' counterexample replay,
port conformance and the tests all go through ``apply``: one operation of the vocabulary
(``pcspec.core.ops``) applied to a ``Server``, the judge asked after every model operation it
performs (a ``run`` is many). ``replay`` does it for a whole trace; a ``Driver`` does it one
operation at a time for those that choose each operation from what the model did before (the
live checker's and the bench's predictions, the proofs' canvas), keeping the trace of what ran.

The judge is anything callable with no argument that returns the findings of the state and
events since its previous call (``pcspec.properties.judge.Judge`` is the catalogue's); the
loop knows nothing of properties, so it sits below them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pcspec.core import ops
from pcspec.core.ops import Operation, Run
from pcspec.core.results import Finding
from pcspec.core.trace import Trace
from pcspec.model.events import Event
from pcspec.model.server import Server


class Judging(Protocol):
    def __call__(self) -> list[Finding]: ...


def apply(
    srv: Server, op: Operation, judge: Judging, stop: Callable[[], bool] | None = None
) -> list[Finding]:
    """Apply one operation; the findings of every model operation it performed, in order.
    ``stop``: asked after each judgement; True ends the operation there (a ``run`` takes no
    further step), as a hunt ends where its target is violated."""
    found: list[Finding] = []
    for _ in ops.apply(srv, op):
        found.extend(judge())
        if stop is not None and stop():
            break
    return found


@dataclass
class Step:
    """One line of a trace, as it ran: the model operations it performed are ``first_op`` to
    ``last_op`` (a ``run`` performs one per server step; every other operation, one)."""

    index: int  # the trace line's operation index (0-based): the one numbering of steps
    op: Operation
    events: list[Event]
    violations: list[Finding]
    first_op: int = 0
    last_op: int = 0

    def where(self, model_op: int) -> str:
        """A model operation of this step in the steps' numbering: ``step 4``, or ``step 4,
        server step 3 of 12`` inside a ``run``."""
        if isinstance(self.op, Run) and self.last_op > self.first_op:
            n = self.last_op - self.first_op + 1
            return f"step {self.index}, server step {model_op - self.first_op + 1} of {n}"
        return f"step {self.index}"


@dataclass
class ReplayResult:
    server: Server
    steps: list[Step] = field(default_factory=list)

    @property
    def violations(self) -> list[Finding]:
        return [v for s in self.steps for v in s.violations]

    def matches(self, expect: list[dict[str, Any]]) -> bool:
        """Without ``expect``: no violation. With it: every expected violation is present
        (its property at its ``op``, or at any operation when ``op`` is absent); violations
        beyond the expected ones do not matter."""
        if not expect:
            return not self.violations
        seen = {(v.rule, v.at) for v in self.violations} | {(v.rule, None) for v in self.violations}
        return all((e["property"], e.get("op")) in seen for e in expect)


def replay(
    trace: Trace,
    judge_for: Callable[[Server], Judging],
    on_step: Callable[[Step], None] | None = None,
) -> ReplayResult:
    """Run ``trace`` on a fresh ``Server``, judged by ``judge_for(server)``."""
    srv = Server(trace.config, trace.variant)
    judge = judge_for(srv)
    result = ReplayResult(srv)
    for i, op in enumerate(trace.ops):
        start, first_op = len(srv.heap.events), srv.heap.op + 1
        found = apply(srv, op, judge)
        step = Step(i, op, srv.heap.events[start:], found, first_op, max(first_op, srv.heap.op))
        result.steps.append(step)
        if on_step is not None:
            on_step(step)
    return result


def unjudged() -> list[Finding]:
    """The judge of a driver that predicts rather than checks: it finds nothing."""
    return []


@dataclass
class Driver:
    """A model server driven one operation at a time through ``apply``; ``ops`` are those it
    ran, in order, so ``trace()`` replays what it did (unless ``record`` is off: a long
    prediction that needs no trace keeps none)."""

    server: Server
    judge: Judging = unjudged
    ops: list[Operation] = field(default_factory=list)
    record: bool = True

    def apply(self, op: Operation) -> list[Finding]:
        found = apply(self.server, op, self.judge)
        if self.record:
            self.ops.append(op)
        return found

    def trace(self, n_ops: int | None = None) -> Trace:
        """The trace of the first ``n_ops`` operations run (all by default), under the server's
        design."""
        return Trace(self.server.design, self.server.cfg, self.ops[:n_ops])


def first(found: Iterable[Finding], rule: str) -> Finding | None:
    return next((f for f in found if f.rule == rule), None)


__all__ = ["Driver", "Judging", "ReplayResult", "Step", "apply", "first", "replay", "unjudged"]
