"""A counterexample, turned into a trace and replayed in the executable model.

The search's model is read back as a canvas ``Plan``; ``canvas.realize`` writes it as a
trace of ordinary operations; ``pcspec.properties.judge.replay`` (the path ``pcspec replay`` takes)
runs it from scratch and judges the property. The counterexample counts as replayed only
when the model reports the same property violated.
"""

from __future__ import annotations

from dataclasses import dataclass

from pcspec.core.trace import Trace
from pcspec.model.design import Design
from pcspec.proofs.canvas import Plan, realize
from pcspec.properties.catalogue import get_property
from pcspec.properties.judge import replay


@dataclass
class Replayed:
    trace: Trace
    reproduced: bool
    message: str


def replay_plan(plan: Plan, variant: Design, pid: str) -> Replayed:
    trace = realize(plan, variant)
    hits = [v for v in replay(trace, [get_property(pid)]).violations if v.property == pid]
    if not hits:
        return Replayed(trace, False, "the model shows no violation of " + pid)
    first = hits[0]
    trace.expect = [{"property": pid, "op": first.op, "message": first.message}]
    return Replayed(trace, True, first.message)
