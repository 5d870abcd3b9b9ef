"""ACC-1 for any number of entries: the accounting loop against an axiomatized set sum.

``PromptCache.accounted_sizes`` walks the entries from the back with a set ``seen`` of the
buffers counted so far (initially the candidate's). Sets of buffers are an uninterpreted
sort with ``cup`` (union), ``minus`` (difference) and ``empty``; ``bytes`` of a set is
axiomatized as a set sum: the empty set has none, no set has fewer than none, and the bytes
of ``X`` united with ``Y`` are those of ``X`` plus those of ``Y`` not in ``X`` (true of any
finite set of sized buffers). The loop invariant is ``total + bytes(seen0) = bytes(seen)``:

* ``base``: it holds before the first entry (``total`` 0, ``seen = seen0``);
* ``step``: one more entry ``B`` keeps it (the accounting seam decides what ``total`` gains:
  ``bytes(B minus seen)`` under unique accounting, ``bytes(B)`` per holder);
* ``exit``: after the last entry ``seen`` is the union of every entry's buffers (plus
  ``seen0``), so with ``seen0`` empty ``total`` is the unique bytes: ACC-1.

Three queries, each one step of the induction; none bounds the number of entries or of
buffers. The ``undercount`` mutant's rule depends on other holders, which this encoding does
not have: no queries for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import z3

from pcspec.proofs.build import Build, Term
from pcspec.proofs.encoded import Encoded
from pcspec.proofs.query import Query, claim


@dataclass
class _Sets:
    sort: Term
    empty: Term
    cup: Term
    minus: Term
    bytes: Term


def _sets(b: Build) -> _Sets:
    S = b.sort("BufferSet")
    ints = z3.IntSort(b.ctx)
    s = _Sets(
        S,
        z3.Const("bufset.empty", S),
        z3.Function("bufset.cup", S, S, S),
        z3.Function("bufset.minus", S, S, S),
        z3.Function("bufset.bytes", S, ints),
    )
    x, y = z3.Const("q.x", S), z3.Const("q.y", S)
    b.assume(
        s.bytes(s.empty) == 0,
        z3.ForAll([x], s.bytes(x) >= 0),
        z3.ForAll([x, y], s.bytes(s.cup(x, y)) == s.bytes(x) + s.bytes(s.minus(y, x))),
    )
    return s


def _gain(v: Encoded, s: _Sets, entry: Term, seen: Term) -> Term:
    if v.accounting == "unique":
        return s.bytes(s.minus(entry, seen))
    return s.bytes(entry)


def queries(v: Encoded) -> list[Query]:
    if v.accounting not in ("unique", "per_holder"):
        return []

    def base() -> tuple[Build, Term]:
        b = Build(f"{v.name} set-sum base")
        s = _sets(b)
        seen0 = b.const("seen0", s.sort)
        return b, z3.Not(0 + s.bytes(seen0) == s.bytes(seen0))

    def step() -> tuple[Build, Term]:
        b = Build(f"{v.name} set-sum step")
        s = _sets(b)
        seen0, seen, entry = b.const("seen0", s.sort), b.const("seen", s.sort), b.const("entry", s.sort)
        total = b.int("total")
        b.assume(total + s.bytes(seen0) == s.bytes(seen))
        total2 = b.int("total2", total + _gain(v, s, entry, seen))
        seen2 = b.const("seen2", s.sort)
        b.assume(seen2 == s.cup(seen, entry))
        return b, z3.Not(total2 + s.bytes(seen0) == s.bytes(seen2))

    def exit_() -> tuple[Build, Term]:
        b = Build(f"{v.name} set-sum exit")
        s = _sets(b)
        seen, total = b.const("union", s.sort), b.int("total")
        # seen0 is empty: the candidate is none (ACC-1 judges the cache as it stands)
        b.assume(total + s.bytes(s.empty) == s.bytes(seen))
        return b, z3.Not(total == s.bytes(seen))

    return [claim("base", base), claim("step", step), claim("exit", exit_)]
