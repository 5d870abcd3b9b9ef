"""Shrinking a trace by replay: delta debugging over the operation list, then simpler
operations, keeping the one property violated.

Hypothesis shrinks what it generates, but a survey records violations without failing (so
one run can see every property), and Hypothesis cannot shrink an example it did not fail on.
Replaying candidate traces is cheap and deterministic, so the survey's first trace for each
property is shrunk here. The result replays to the same violation by construction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pcspec.errors import PcspecError
from pcspec.properties.catalogue import get_property
from pcspec.replay import replay
from pcspec.trace import Trace


def _violation(trace: Trace, pid: str) -> dict[str, Any] | None:
    for v in replay(trace, [get_property(pid)]).violations:
        if v.property == pid:
            return {"property": pid, "op": v.op, "message": v.message}
    return None


def _simpler(op: dict[str, Any]) -> list[dict[str, Any]]:
    """Candidate simplifications of one operation, simplest first."""
    out: list[dict[str, Any]] = []
    if op["op"] == "run":
        out.append({"op": "step"})
    if op["op"] == "request":
        toks = op["tokens"]
        for n in sorted({len(toks) // 2, len(toks) - 1}):
            if 1 <= n < len(toks):
                cut = dict(op, tokens=toks[:n])
                spans = [s for s in op.get("spans", []) if s < n]
                cut.pop("spans", None)
                if spans:
                    cut["spans"] = spans
                out.append(cut)
        if op.get("id_slot", -1) != -1:
            out.append({k: v for k, v in op.items() if k != "id_slot"})
    return out


def shrink_ops(ops: list[dict[str, Any]], fails: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
    """The shrinking loop every shrinker shares: delta debugging over the operation list,
    then simpler operations one at a time, keeping each candidate on which ``fails`` (which
    owns its budget) still answers True. ``ops`` itself is assumed to fail."""
    n = 2
    while len(ops) >= 2:
        chunk = max(1, len(ops) // n)
        for i in range(0, len(ops), chunk):
            cand = ops[:i] + ops[i + chunk :]
            if cand and fails(cand):
                ops = cand
                n = max(n - 1, 2)
                break
        else:
            if chunk == 1:
                break
            n = min(len(ops), n * 2)
    changed = True
    while changed:
        changed = False
        for i, op in enumerate(ops):
            for cand_op in _simpler(op):
                cand = [*ops[:i], cand_op, *ops[i + 1 :]]
                if fails(cand):
                    ops, changed = cand, True
                    break
    return ops


def shrink(trace: Trace, pid: str, max_replays: int = 3000) -> Trace:
    """The shortest trace found (within ``max_replays``) that still violates ``pid``."""
    budget = [max_replays]

    def fails(ops: list[dict[str, Any]]) -> bool:
        if budget[0] <= 0:
            return False
        budget[0] -= 1
        try:
            return _violation(replace(trace, ops=ops), pid) is not None
        except PcspecError:
            # A candidate can be ill-formed where the whole trace was not: without the
            # restart that gave the server more slots, a later slot action names a slot
            # that does not exist. Such a candidate does not reproduce the violation.
            return False

    if not fails(list(trace.ops)):
        return trace
    final = replace(trace, ops=shrink_ops(list(trace.ops), fails))
    v = _violation(final, pid)
    return replace(final, expect=[v] if v else trace.expect)
