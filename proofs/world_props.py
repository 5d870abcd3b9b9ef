"""IMM-1, IMM-2, UNINIT-1 over a ``World``: each property as the model's check states it
(``properties/immutability.py``, ``properties/uninit.py``), and the inductive invariant a
proof carries for it -- the property plus what makes it inductive (every held payload was
allocated, so a fresh buffer is nobody's; only slots, cache entries and entries being
built hold checkpoints; those kinds of holder are exclusive).

UNINIT-2 is an event, not a state property: ``Did.unwritten_read`` of a load, a restore or
a file write.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import z3

from pcspec.proofs.build import Build, Term
from pcspec.proofs.world import Sorts, World, initialized, reachable


@dataclass(frozen=True)
class Domain:
    """The holders and objects a bounded search designated: every one that can exist. Over
    it a property is a finite conjunction, quantifier-free (a second solver, cvc5, does not
    decide a negated universal of a satisfiable query)."""

    holders: Sequence[Term]
    ckpts: Sequence[Term]


def _forall(so: Sorts, dom: Domain | None, kinds: str, body: Callable[..., Term]) -> Term:
    """``ForAll`` over fresh bound variables of the given sorts (``h``/``c``), or, over a
    domain, the conjunction of every instance."""
    import itertools

    sort_of = {"h": so.H, "c": so.C}
    if dom is None:
        xs = [z3.Const(f"q.{k}{i}", sort_of[k]) for i, k in enumerate(kinds)]
        return z3.ForAll(xs, body(*xs))
    pools = [dom.holders if k == "h" else dom.ckpts for k in kinds]
    return z3.And(*[body(*xs) for xs in itertools.product(*pools)])


def _unchanged(w: World, c: Term) -> Term:
    return z3.And(w.meta[c] == w.smeta[c], w.pay[c] == w.spay[c], w.ver[w.pay[c]] == w.sver[c])


def _entry_unchanged(w: World, e: Term) -> Term:
    return z3.And(
        w.main[e] == w.emain[e],
        w.has_main[e] == w.ehas_main[e],
        z3.Implies(w.has_main[e], w.ver[w.main[e]] == w.emver[e]),
        w.drft[e] == w.edrft[e],
        w.has_drft[e] == w.ehas_drft[e],
        z3.Implies(w.has_drft[e], w.ver[w.drft[e]] == w.edver[e]),
    )


def imm1(b: Build, so: Sorts, w: World, dom: Domain | None = None) -> Term:
    """IMM-1: every checkpoint a slot or a cache entry holds is as it was published."""
    return _forall(
        so,
        dom,
        "hc",
        lambda h, c: z3.Implies(z3.And(reachable(w, h), w.holds[h][c]), z3.And(w.pub[c], _unchanged(w, c))),
    )


def imm2(b: Build, so: Sorts, w: World, dom: Domain | None = None) -> Term:
    """IMM-2: every entry in the cache is as its save published it (data buffers, their
    contents, its checkpoint list and those checkpoints)."""
    return z3.And(
        _forall(so, dom, "h", lambda e: z3.Implies(w.cache[e], z3.And(w.sealed[e], _entry_unchanged(w, e)))),
        # the list, pointwise (array equality under a quantifier stalls the solver)
        _forall(so, dom, "hc", lambda e, c: z3.Implies(w.cache[e], w.holds[e][c] == w.eholds[e][c])),
        _forall(so, dom, "hc", lambda e, c: z3.Implies(z3.And(w.cache[e], w.holds[e][c]), _unchanged(w, c))),
    )


def uninit1(b: Build, so: Sorts, w: World, dom: Domain | None = None) -> Term:
    """UNINIT-1: no buffer a slot, a checkpoint or a cache entry holds has unwritten bytes."""
    data = lambda h: z3.Implies(  # noqa: E731
        w.cache[h],
        z3.And(
            z3.Implies(w.has_main[h], initialized(w, w.main[h])), z3.Implies(w.has_drft[h], initialized(w, w.drft[h]))
        ),
    )
    return z3.And(
        _forall(
            so, dom, "hc", lambda h, c: z3.Implies(z3.And(reachable(w, h), w.holds[h][c]), initialized(w, w.pay[c]))
        ),
        _forall(so, dom, "h", data),
    )


def _shape(so: Sorts, w: World) -> Term:
    """Holders of checkpoints are slots, cache entries or entries being built; the kinds are
    exclusive; what is held or cached was allocated."""
    h, c = z3.Const("q.h", so.H), z3.Const("q.c", so.C)
    kinds = z3.ForAll(
        [h],
        z3.And(
            z3.Not(z3.And(w.slot[h], w.cache[h])),
            z3.Not(z3.And(w.slot[h], w.building[h])),
            z3.Not(z3.And(w.cache[h], w.building[h])),
            z3.Implies(
                z3.Or(w.cache[h], w.building[h]),
                z3.And(z3.Implies(w.has_main[h], w.alloc[w.main[h]]), z3.Implies(w.has_drft[h], w.alloc[w.drft[h]])),
            ),
        ),
    )
    held = z3.ForAll(
        [h, c],
        z3.Implies(
            w.holds[h][c],
            z3.And(z3.Or(w.slot[h], w.cache[h], w.building[h]), w.made[c], w.alloc[w.pay[c]]),
        ),
    )
    return z3.And(kinds, held)


def imm1_invariant(b: Build, so: Sorts, w: World) -> Term:
    h, c = z3.Const("q.h", so.H), z3.Const("q.c", so.C)
    every_holder = z3.ForAll([h, c], z3.Implies(w.holds[h][c], z3.And(w.pub[c], _unchanged(w, c))))
    return z3.And(_shape(so, w), every_holder)


def imm2_invariant(b: Build, so: Sorts, w: World) -> Term:
    return z3.And(imm1_invariant(b, so, w), imm2(b, so, w))


def uninit_invariant(b: Build, so: Sorts, w: World) -> Term:
    h, c = z3.Const("q.h", so.H), z3.Const("q.c", so.C)
    every_holder = z3.ForAll([h, c], z3.Implies(w.holds[h][c], initialized(w, w.pay[c])))
    return z3.And(_shape(so, w), every_holder, uninit1(b, so, w))
