"""The decision rules of ``pcspec.model.policy`` that the cache proofs use, over Z3 terms.

One function per policy function, same name, same arguments in the same order; each loop is
unrolled with every iteration a fresh constant (``Build``). Nothing here is read from the
C++: the rule is the model's, and ``tests/proofs/test_proofs_conformance.py`` checks each against
the policy function it mirrors on drawn numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import z3

from pcspec.proofs.build import Build, Term


def is_oversize(b: Build, new_size: Term, limit_size: Term) -> Term:
    """policy.is_oversize: ``limit_size > 0 and new_size > limit_size``."""
    return z3.And(limit_size > 0, new_size > limit_size)


def make_room(
    b: Build,
    name: str,
    present: Sequence[Term],
    sizes: Sequence[Term],
    new_size: Term,
    limit_size: Term,
    when: Term | None = None,
) -> tuple[list[Term], list[Term]]:
    """policy.make_room over a presence mask: which positions are popped, front first, while
    ``total + new_size > limit_size`` (only with a byte limit). Returns (popped, where the
    loop stopped: ``stop[m]`` iff ``m`` is the first present position it kept, ``stop[n]``
    iff it kept none; all false when ``when`` is).

    Written in closed form, equivalent to the ``while`` loop: the total only falls as
    entries go, so a present entry is popped exactly when every present entry before it was
    and the entries from it on still do not leave room (``rest[i] + new_size > limit``).
    ``when`` guards the whole loop (the caller runs it only on some paths)."""
    n = len(sizes)
    rest = [b.int(f"{name}.rest{n}", 0)]
    for i in range(n - 1, -1, -1):
        rest.insert(0, b.int(f"{name}.rest{i}", z3.If(present[i], sizes[i], 0) + rest[0]))
    front = b.true if when is None else when
    popped: list[Term] = []
    stop: list[Term] = []
    for i, p in enumerate(present):
        # In lemma mode the loop condition is left free: the bridges over this loop hold
        # whatever the sizes, and the lemma query then needs no arithmetic.
        cond = b.bool(f"{name}.cond{i}") if b.lemma_mode else z3.And(limit_size > 0, rest[i] + new_size > limit_size)
        pop = b.bool(f"{name}.pop{i}", z3.And(p, front, cond))
        popped.append(pop)
        stop.append(b.bool(f"{name}.stop{i}", z3.And(front, p, z3.Not(pop))))
        front = b.bool(f"{name}.front{i + 1}", z3.And(front, z3.Or(z3.Not(p), pop)))
    stop.append(front)
    return popped, stop


def update_byte_evictions(
    b: Build, name: str, present: Sequence[Term], sizes: Sequence[Term], limit_size: Term, when: Term | None = None
) -> tuple[list[Term], list[Term]]:
    """The byte loop of policy.update_evictions: pop the front while ``total > limit_size``.
    (Its token loop is a removal of front entries: the proofs cover it as one; see
    ``pcspec.proofs.cache_ops.remove``.)"""
    return make_room(b, name, present, sizes, b.val(0), limit_size, when)


def limit_after_bad_alloc(b: Build, name: str, total_size: Term) -> Term:
    """policy.limit_after_bad_alloc: ``max(1, int(0.4 * total_size))`` for a non-negative
    total, i.e. the floor of 2 * total / 5, at least 1 (linear: 5 q <= 2 t < 5 q + 5)."""
    q = b.int(f"{name}.fifth")
    b.assume(5 * q <= 2 * total_size, 2 * total_size < 5 * q + 5)
    return b.int(name, z3.If(q < 1, 1, q))
