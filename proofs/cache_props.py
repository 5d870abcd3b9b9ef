"""RB, ACC and LIMIT over the bounded cache: each the Z3 reading of the check in
``properties/rollback.py`` and ``properties/accounting.py`` (same events, same numbers).

A predicate says the property *holds* for one operation (its pre-state, its result); a
proof asks the solver for a state where it does not.
"""

from __future__ import annotations

import z3

from pcspec.proofs.build import Build, Term
from pcspec.proofs.cache_ops import Eviction, Saved
from pcspec.proofs.cache_state import Cache, accounted, holdings
from pcspec.proofs.encoded import Encoded


def no_partial_entry(b: Build, c: Cache) -> Term:
    """RB-1 (rollback.rb1_no_partial_entry): every data buffer of every entry is complete."""
    return b.all(z3.Implies(p, z3.And(m, d)) for p, m, d in zip(c.present, c.main_full, c.drft_full, strict=True))


def failed_save_changes_nothing(b: Build, pre: Cache, s: Saved) -> Term:
    """RB-2 (rollback.rb2_failed_save_changes_nothing): a save that returned false left the
    limit and the entries (which, in which order) as they were. A crash is RB-3's."""
    same = b.all(p == q for p, q in zip(pre.present, s.post.present, strict=True))
    return z3.Implies(z3.And(z3.Not(s.ok), z3.Not(s.crash)), z3.And(same, pre.limit == s.post.limit))


def alloc_failure_contained(b: Build, s: Saved) -> Term:
    """RB-3 (rollback.rb3_alloc_failure_contained): no crash."""
    return z3.Not(s.crash)


def accounted_equals_unique(b: Build, name: str, v: Encoded, c: Cache) -> Term:
    """ACC-1 (accounting.acc1_accounted_equals_unique)."""
    h = holdings(b, name + ".acc1", c)
    return b.sum(accounted(b, name + ".acc1", v, c, h)) == h.uniq[0]


def reject_iff_oversize(b: Build, s: Saved, limit: Term) -> Term:
    """ACC-2 (accounting.acc2_reject_iff_oversize): a rejected entry's own unique bytes exceed
    the limit; an admitted one's do not. (A rejection evicts nothing: it comes first.)"""
    return z3.And(
        z3.Implies(s.rejected, s.own_unique > limit),
        z3.Implies(z3.And(s.published, s.publish_limit > 0), s.own_unique <= s.publish_limit),
    )


def minimal_eviction(b: Build, evictions: list[Eviction]) -> Term:
    """ACC-3 (accounting.acc3_minimal_eviction): every make-room or byte-limit eviction
    happened while the unique bytes (cache plus candidate) exceeded the limit."""
    return b.all(z3.Implies(e.popped, e.unique_total > e.limit) for e in evictions)


def within_limit(b: Build, name: str, c: Cache) -> Term:
    """LIMIT-1 after an operation (accounting.limit1_within_limits, bytes)."""
    return z3.Implies(c.limit > 0, holdings(b, name + ".limit1", c).uniq[0] <= c.limit)


def within_limit_at_publish(b: Build, s: Saved) -> Term:
    """LIMIT-1 at the publication of an entry (the ``entry_insert`` event)."""
    return z3.Implies(z3.And(s.published, s.publish_limit > 0), s.publish_unique <= s.publish_limit)
