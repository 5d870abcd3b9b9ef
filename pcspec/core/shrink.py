"""The one shrinker: delta debugging over a list, then simpler items one at a time.

Every counterexample pcspec reports is shrunk by this loop, whatever produced it: a walker's
or Hypothesis's find replayed in the model (``pcspec.properties.judge.shrink_trace``: items are
trace operations), a live workload re-run on a real server (``pcspec.live.shrink``: items are
units of live operations). The caller's ``fails`` says whether a candidate still shows what is
being shrunk and owns the budget (it answers False once the budget is spent, which ends the
loop); ``simpler`` lists simplifications of one item, simplest first.

Replaying candidates is cheap and deterministic, so a find is shrunk here rather than by the
engine that found it: a survey records violations without failing an example (so one run sees
every property), and Hypothesis cannot shrink an example it did not fail on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from pcspec.core import ops

T = TypeVar("T")


def shrink_list(
    items: list[T], fails: Callable[[list[T]], bool], simpler: Callable[[T], list[T]] = lambda _item: []
) -> list[T]:
    """The smallest list found on which ``fails`` still answers True (``items`` is assumed to
    fail): chunks removed (halves, quarters, ... single items), then each item replaced by a
    simpler one, until neither changes anything."""
    n = 2
    while len(items) >= 2:
        chunk = max(1, len(items) // n)
        for i in range(0, len(items), chunk):
            cand = items[:i] + items[i + chunk :]
            if cand and fails(cand):
                items = cand
                n = max(n - 1, 2)
                break
        else:
            if chunk == 1:
                break
            n = min(len(items), n * 2)
    changed = True
    while changed:
        changed = False
        for i, item in enumerate(items):
            for better in simpler(item):
                cand = [*items[:i], better, *items[i + 1 :]]
                if fails(cand):
                    items, changed = cand, True
                    break
    return items


def simpler_op(op: ops.Operation) -> list[ops.Operation]:
    """Simplifications of one trace operation, simplest first: a ``run`` becomes one ``step``;
    a request's prompt is halved or loses its last token (its spans beyond the cut go), a
    pinned request is unpinned; a group of decisions loses one of its prompts."""
    out: list[ops.Operation] = []
    if isinstance(op, ops.Run):
        out.append(ops.Step())
    if isinstance(op, ops.Request):
        toks = op.tokens
        for n in sorted({len(toks) // 2, len(toks) - 1}):
            if 1 <= n < len(toks):
                out.append(replace(op, tokens=toks[:n], spans=tuple(s for s in op.spans if s < n)))
        if op.id_slot != -1:
            out.append(replace(op, id_slot=-1))
    if isinstance(op, ops.RequestGroup) and len(op.prompts) > 1:
        out += [replace(op, prompts=op.prompts[:i] + op.prompts[i + 1 :]) for i in range(len(op.prompts))]
    return out


__all__ = ["shrink_list", "simpler_op"]
