"""The proof queries of the RB, ACC and LIMIT obligations: one per (property, operation).

Each query takes a cache of up to ``n`` entries over ``k`` checkpoints with every field and
size free (``cache_state.fresh``), constrained only by what the design keeps true (its
sharing, the inductive invariant the property needs: no partial entry for RB-1, unique
bytes within the limit for LIMIT-1), applies one operation with every input free, and asks
for a post-state or an event the property forbids. ``unsat`` for every operation, with the
lemma query of each operation that states bridges, proves the property for every cache
within the bounds.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import z3

from pcspec.proofs import cache_ops as co
from pcspec.proofs import cache_props as cp
from pcspec.proofs.build import Build, Term
from pcspec.proofs.cache_state import Cache, empty, fresh, well_formed
from pcspec.proofs.encoded import Encoded
from pcspec.proofs.query import Query, claim, lemma


@dataclass(frozen=True)
class Bounds:
    n: int = 6  # entries
    k: int = 8  # checkpoints

    def describe(self) -> str:
        return f"every cache of up to {self.n} entries sharing up to {self.k} checkpoints, every size symbolic"


@dataclass
class Outcome:
    """One operation's result, as the properties judge it."""

    pre: Cache
    post: Cache
    saved: co.Saved | None
    evictions: list[co.Eviction]
    crash: Term


Holds = Callable[[Build, Encoded, Outcome], Term]
Hypothesis = Callable[[Build, Cache], Term]


def _candidate(b: Build, n: int) -> co.Candidate:
    cand = co.Candidate(
        b.int("tgt"), b.int("dft"), [b.bool(f"obsolete{i}") for i in range(n)], b.bool("contained"), b.int("fault")
    )
    b.assume(cand.tgt >= 0, cand.dft >= 0, cand.fault >= 0, cand.fault < len(co.FAULTS))
    return cand


def operations(v: Encoded) -> tuple[str, ...]:
    """The operations that change the cache: a save, ``update``, any removal, and -- only
    where failed loads are not contained -- the C++ load that clears an entry's main state."""
    return ("save", "update", "remove") if v.contain_failures else ("save", "update", "remove", "clear_main")


def _apply(b: Build, v: Encoded, op: str, pre: Cache) -> Outcome:
    if op == "save":
        s = co.save(b, "save", v, pre, _candidate(b, pre.n), pre.n - 1)
        return Outcome(pre, s.post, s, s.evictions, s.crash)
    if op == "update":
        post, ev = co.update(b, "update", v, pre)
        return Outcome(pre, post, None, ev, b.false)
    if op == "remove":
        return Outcome(pre, co.remove(b, "remove", pre), None, [], b.false)
    return Outcome(pre, co.clear_main(b, "clear_main", pre), None, [], b.false)


def _pre(b: Build, v: Encoded, bounds: Bounds) -> Cache:
    pre = fresh(b, "pre", bounds.n, bounds.k)
    b.assume(well_formed(b, v, pre), z3.Not(pre.present[bounds.n - 1]))  # room at the back
    return pre


@functools.lru_cache(maxsize=64)
def _operation(v: Encoded, op: str, bounds: Bounds) -> tuple[Build, Outcome]:
    """One operation on a free cache, built once for every claim about it."""
    b = Build(f"{v.name} {op} ({bounds.n} entries, {bounds.k} checkpoints)")
    return b, _apply(b, v, op, _pre(b, v, bounds))


@functools.lru_cache(maxsize=64)
def _lemma(v: Encoded, op: str, bounds: Bounds) -> Query | None:
    def build() -> Build:
        b = Build(f"{v.name} lemma {op} ({bounds.n} entries, {bounds.k} checkpoints)", lemma_mode=True)
        _apply(b, v, op, _pre(b, v, bounds))
        return b

    return lemma(f"lemma:{op}", build)


def queries(
    v: Encoded,
    bounds: Bounds,
    holds: Holds,
    ops: tuple[str, ...],
    hyp: Hypothesis | None = None,
    only: Holds | None = None,
    crash_counts: bool = False,
) -> list[Query]:
    """For each operation: the claim (``holds`` after it, from a cache where ``hyp`` holds,
    for the cases ``only`` selects, unless the process died -- or whatever happens, when
    ``crash_counts``) and its lemma query; and, with a hypothesis, that the empty cache
    satisfies it."""
    out: list[Query] = []
    if hyp is not None:

        def base() -> tuple[Build, Term]:
            b = Build(f"{v.name} init")
            c = empty(b, "init", bounds.n, bounds.k, b.int("limit"))
            b.assume(c.limit >= 0)
            return b, z3.Not(hyp(b, c))

        out.append(claim("init", base))
    for op in ops:

        def make(op: str = op) -> list[str]:
            b, o = _operation(v, op, bounds)
            mark = b.mark()
            start = len(b.bridges)  # the operation's own are its lemma query's
            try:
                parts = [z3.Not(holds(b, v, o))]
                if hyp is not None:
                    parts.append(hyp(b, o.pre))
                if only is not None:
                    parts.append(only(b, v, o))
                if not crash_counts:
                    parts.append(z3.Not(o.crash))
                return [b.smt2(z3.And(*parts)), *b.lemma_blocks(start)]
            finally:
                b.restore(mark)

        out.append(Query(op, make))
        lq = _lemma(v, op, bounds)
        if lq is not None:
            out.append(lq)
    return out


# -- the obligations' claims ------------------------------------------------------------------


def rb1(v: Encoded, bounds: Bounds) -> list[Query]:
    return queries(v, bounds, lambda b, v_, o: cp.no_partial_entry(b, o.post), operations(v), cp.no_partial_entry)


def rb2(v: Encoded, bounds: Bounds) -> list[Query]:
    return queries(v, bounds, lambda b, v_, o: cp.failed_save_changes_nothing(b, o.pre, o.saved), ("save",))  # type: ignore[arg-type]


def rb3(v: Encoded, bounds: Bounds) -> list[Query]:
    return queries(
        v,
        bounds,
        lambda b, v_, o: cp.alloc_failure_contained(b, o.saved),  # type: ignore[arg-type]
        ("save",),
        only=lambda b, v_, o: b.any(o.saved.fault == f for f in co.ALLOC_SITES),  # type: ignore[union-attr]
        crash_counts=True,
    )


def acc1(v: Encoded, bounds: Bounds) -> list[Query]:
    """ACC-1 is a property of a state, not of a step: accounted and unique bytes are both
    functions of the cache. One query over every cache of the design's shape (reachable or
    not) covers every state any operation can leave."""

    def state() -> tuple[Build, Term]:
        b = Build(f"{v.name} every cache")
        c = fresh(b, "cache", bounds.n, bounds.k)
        b.assume(well_formed(b, v, c))
        return b, z3.Not(cp.accounted_equals_unique(b, "cache", v, c))

    return [claim("every-state", state)]


def acc2(v: Encoded, bounds: Bounds) -> list[Query]:
    return queries(v, bounds, lambda b, v_, o: cp.reject_iff_oversize(b, o.saved, o.pre.limit), ("save",))  # type: ignore[arg-type]


def acc3(v: Encoded, bounds: Bounds) -> list[Query]:
    return queries(v, bounds, lambda b, v_, o: cp.minimal_eviction(b, o.evictions), ("save", "update"))


def limit1(v: Encoded, bounds: Bounds) -> list[Query]:
    def holds(b: Build, v_: Encoded, o: Outcome) -> Term:
        after = cp.within_limit(b, "post", o.post)
        return after if o.saved is None else z3.And(after, cp.within_limit_at_publish(b, o.saved))

    return queries(v, bounds, holds, operations(v), lambda b, c: cp.within_limit(b, "pre", c))
