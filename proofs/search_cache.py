"""Bounded search for an RB, ACC or LIMIT violation, from the empty cache, over the canvas.

Each request of the canvas (``pcspec.proofs.canvas``) is, to the cache, a save of the slot's
last prompt (``cache_ops.save``: the proofs' builder) and an ``update``; then the slot's
checkpoints move as the canvas move says. Entry ``t`` is the prompt of step ``t``, saved by
request ``t + 1``; checkpoint ``t`` is created by request ``t``. The search asks for a
violation at the last request, the requests before it running without a crash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import z3

from pcspec.proofs import cache_props as cp
from pcspec.proofs.build import Build, Term
from pcspec.proofs.cache_ops import Candidate, Eviction, Saved, save, update
from pcspec.proofs.cache_state import Cache, empty
from pcspec.proofs.canvas import EXTEND, FORK, NEW, Controls, ancestry, controls
from pcspec.proofs.encoded import Encoded
from pcspec.properties.catalogue import get_property

# What each property judges of one request: (the cache before, the save, the cache after
# the update, the update's evictions) -> "it holds".
Judge = Callable[[Build, Encoded, Cache, Saved, Cache, list[Eviction]], Term]

JUDGES: dict[str, Judge] = {
    "RB-1": lambda b, v, pre, s, post, ev: z3.And(cp.no_partial_entry(b, s.post), cp.no_partial_entry(b, post)),
    "RB-2": lambda b, v, pre, s, post, ev: cp.failed_save_changes_nothing(b, pre, s),
    "RB-3": lambda b, v, pre, s, post, ev: cp.alloc_failure_contained(b, s),
    "ACC-1": lambda b, v, pre, s, post, ev: z3.And(
        cp.accounted_equals_unique(b, "saved", v, s.post), cp.accounted_equals_unique(b, "updated", v, post)
    ),
    "ACC-2": lambda b, v, pre, s, post, ev: cp.reject_iff_oversize(b, s, pre.limit),
    "ACC-3": lambda b, v, pre, s, post, ev: cp.minimal_eviction(b, s.evictions + ev),
    "LIMIT-1": lambda b, v, pre, s, post, ev: z3.And(
        cp.within_limit_at_publish(b, s), cp.within_limit(b, "saved", s.post), cp.within_limit(b, "updated", post)
    ),
}


def build(v: Encoded, pid: str, depth: int) -> tuple[Build, Term, Controls]:
    """The search of ``depth`` requests after the first, for a violation of ``pid``."""
    b = Build(f"search {pid} {v.name} depth {depth}")
    ctl = controls(b, depth, (NEW, EXTEND, FORK), tuple(range(6)), limit=True, cap=depth + 2)
    n, k = depth, depth + 1
    ck_size = b.int("ckpt_size", ctl.tgt() + ctl.dft())
    c = empty(b, "cache", n, k, ctl.limit)
    b.assume(*(s == ck_size for s in c.size))
    slot = [b.val(j == 0) for j in range(k)]
    anc = ancestry(b, ctl, depth)
    goal = b.false
    for t in range(1, depth + 1):
        # entry i (the prompt of step i) is obsolete iff it is a prefix of step t - 1's
        obsolete = [anc[i][t - 1] if i < t - 1 else b.false for i in range(n)]
        cand = Candidate(
            ctl.tgt(),
            ctl.dft(),
            [z3.And(p, o) for p, o in zip(c.present, obsolete, strict=True)],
            b.false,
            ctl.fault[t],
        )
        pre = replace(c, slot=slot)
        s = save(b, f"s{t}", v, pre, cand, t - 1)
        post, ev = update(b, f"u{t}", v, s.post)
        b.assume(s.consumed)
        if t < depth or not get_property(pid).after_crash:  # after a crash only RB-3 is judged
            b.assume(z3.Not(s.crash))
        if t == depth:
            goal = z3.Not(JUDGES[pid](b, v, pre, s, post, ev))
        c = post
        slot = _move(b, ctl.kind[t], slot, t)
    return b, goal, ctl


def _move(b: Build, kind: Term, slot: list[Term], t: int) -> list[Term]:
    """The slot's checkpoints after request ``t``: ``new`` keeps none, ``extend`` all,
    ``fork`` the oldest; each request adds checkpoint ``t``."""
    older = b.false
    out: list[Term] = []
    for j, h in enumerate(slot):
        oldest = z3.And(h, z3.Not(older))
        older = z3.Or(older, h)
        kept = z3.Or(z3.And(kind == EXTEND, h), z3.And(kind == FORK, oldest))
        out.append(b.bool(f"slot{t}.{j}", b.true if j == t else kept))
    return out
