"""The proof obligations: the four families of the mission, each tied to catalogue IDs.

An obligation states a claim and its scope, and gives two things for any variant: the
queries whose ``unsat`` proves the claim (``prove``), and the bounded search for a
counterexample on the canvas (``search``), whose finds are replayed in the model against
``target``. ``OBLIGATIONS`` is the suite; ``pcspec.proofs.pairs`` decides which variants
each runs against and what to expect.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pcspec.model.variants import Variant
from pcspec.proofs import cache_proofs, search_cache, search_world, setsum, world_proofs
from pcspec.proofs import world_props as wp
from pcspec.proofs.build import Build, Term
from pcspec.proofs.cache_proofs import Bounds
from pcspec.proofs.canvas import Controls
from pcspec.proofs.query import Query

Prove = Callable[[Variant, Bounds], list[Query]]
Search = Callable[[Variant, int], tuple[Build, Term, Controls]]

UNBOUNDED = "unbounded: any number of slots, entries, checkpoints and buffers (uninterpreted sorts)"


@dataclass(frozen=True)
class Obligation:
    id: str
    properties: tuple[str, ...]
    family: str  # immutability | uninit | rollback | accounting
    claim: str
    scope: str  # of the proof; "{bounds}" is filled in with the run's bounds
    prove: Prove
    search: Search
    target: str  # the property a counterexample must violate in the model

    def scope_text(self, bounds: Bounds) -> str:
        return self.scope.replace("{bounds}", bounds.describe())


def _world(inv: world_proofs.Formula, prop: world_proofs.Formula, reads: bool = False) -> Prove:
    def prove(v: Variant, bounds: Bounds) -> list[Query]:
        qs = world_proofs.invariant(v, inv, prop)
        return qs + world_proofs.reads(v, inv) if reads else qs

    return prove


def _search_world(pid: str) -> Search:
    return lambda v, depth: search_world.build(v, pid, depth)


def _search_cache(pid: str) -> Search:
    return lambda v, depth: search_cache.build(v, pid, depth)


OBLIGATIONS: tuple[Obligation, ...] = (
    Obligation(
        "IMM-1",
        ("IMM-1",),
        "immutability",
        "A checkpoint held by a slot or a cache entry is, in metadata and payload bytes, as it was when "
        "first published: an inductive invariant over create, drop, clear, the three parts of a save, "
        "load and evict.",
        UNBOUNDED,
        _world(wp.imm1_invariant, wp.imm1),
        _search_world("IMM-1"),
        "IMM-1",
    ),
    Obligation(
        "IMM-2",
        ("IMM-2",),
        "immutability",
        "A cache entry's data buffers (which, and their bytes), checkpoint list and checkpoints stay as "
        "its save published them while it is in the cache.",
        UNBOUNDED,
        _world(wp.imm2_invariant, wp.imm2),
        _search_world("IMM-2"),
        "IMM-2",
    ),
    Obligation(
        "UNINIT-1",
        ("UNINIT-1",),
        "uninit",
        "Every buffer a slot, a checkpoint or a cache entry holds was zero-filled or filled completely: "
        "a buffer is published only after a fill validated for every byte.",
        UNBOUNDED,
        _world(wp.uninit_invariant, wp.uninit1),
        _search_world("UNINIT-1"),
        "UNINIT-1",
    ),
    Obligation(
        "UNINIT-2",
        ("UNINIT-2",),
        "uninit",
        "No load into a context, checkpoint restore or slot-file write reads an unwritten byte (from "
        "UNINIT-1's invariant, which this obligation proves again).",
        UNBOUNDED,
        _world(wp.uninit_invariant, wp.uninit1, reads=True),
        _search_world("UNINIT-2"),
        "UNINIT-2",
    ),
    Obligation(
        "RB-1",
        ("RB-1",),
        "rollback",
        "After any save, update or removal, no cache entry holds a partially filled data buffer (weak "
        "rollback: no partial entry).",
        "{bounds}",
        cache_proofs.rb1,
        _search_cache("RB-1"),
        "RB-1",
    ),
    Obligation(
        "RB-2",
        ("RB-2",),
        "rollback",
        "A save that fails (any fault site, or rejected) leaves the cache's entries, their order and its "
        "limit exactly as they were (strong rollback).",
        "{bounds}",
        cache_proofs.rb2,
        _search_cache("RB-2"),
        "RB-2",
    ),
    Obligation(
        "RB-3",
        ("RB-3",),
        "rollback",
        "An allocation failure at any allocation site of a save (data.main, data.drft, the entry and its "
        "checkpoint copies) is caught: the process survives.",
        "{bounds}",
        cache_proofs.rb3,
        _search_cache("RB-3"),
        "RB-3",
    ),
    Obligation(
        "ACC-1",
        ("ACC-1",),
        "accounting",
        "In every cache of the design's shape -- so after any save, update or removal -- the bytes the "
        "cache accounts equal its unique bytes.",
        "{bounds}",
        cache_proofs.acc1,
        _search_cache("ACC-1"),
        "ACC-1",
    ),
    Obligation(
        "ACC-1/unbounded",
        ("ACC-1",),
        "accounting",
        "The accounting loop (accounted_sizes, back to front) sums each buffer once, for any number of "
        "entries: accounted equals unique bytes.",
        "unbounded: any number of entries and buffers; bytes of a set axiomatized as a set sum",
        lambda v, bounds: setsum.queries(v),
        _search_cache("ACC-1"),
        "ACC-1",
    ),
    Obligation(
        "ACC-2",
        ("ACC-2",),
        "accounting",
        "The admission lemma: a save is rejected as oversize only if the entry's own unique bytes exceed "
        "the limit, and an admitted entry's do not; a rejection evicts nothing.",
        "{bounds}",
        cache_proofs.acc2,
        _search_cache("ACC-2"),
        "ACC-2",
    ),
    Obligation(
        "ACC-3",
        ("ACC-3",),
        "accounting",
        "Minimal eviction: make-room and the byte limit evict an entry only while the unique bytes of the "
        "cache (and the candidate) exceed the limit.",
        "{bounds}",
        cache_proofs.acc3,
        _search_cache("ACC-3"),
        "ACC-3",
    ),
    Obligation(
        "LIMIT-1",
        ("LIMIT-1",),
        "accounting",
        "At every publication and after every save, update or removal the unique bytes are within the "
        "byte limit (the token half of LIMIT-1 is not encoded: its estimate divides).",
        "{bounds}",
        cache_proofs.limit1,
        _search_cache("LIMIT-1"),
        "LIMIT-1",
    ),
)

BY_ID: dict[str, Obligation] = {o.id: o for o in OBLIGATIONS}
