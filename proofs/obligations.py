"""The proof obligations: the four families of the mission, each tied to catalogue IDs.

An obligation states a claim and its scope, and gives two things for any design the
encodings can say (``pcspec.proofs.encoded``): the queries whose ``unsat`` proves the claim
(``prove``), and the bounded search for a counterexample on the canvas (``search``), whose
finds are replayed in the model against ``target``. It also names the extension points its
proof does not depend on (``abstracts``); code the encodings do not know anywhere else makes
its answer ``not covered``. ``OBLIGATIONS`` is the suite; ``pcspec.proofs.pairs`` decides
which designs each runs against and what to expect.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pcspec.proofs import cache_proofs, search_cache, search_world, setsum, world_proofs
from pcspec.proofs import world_props as wp
from pcspec.proofs.build import Build, Term
from pcspec.proofs.cache_proofs import Bounds
from pcspec.proofs.canvas import Controls
from pcspec.proofs.encoded import Encoded
from pcspec.proofs.query import Query

Prove = Callable[[Encoded, Bounds], list[Query]]
Search = Callable[[Encoded, int], tuple[Build, Term, Controls]]

# The points every proof lets decide anything: the world's operations (create, drop, clear, save,
# load, evict) and the cache's (save, update, remove) are taken in any order on any object, so
# which slot a task takes, where a fill breaks, which checkpoints a sweep, the cap or an
# invalidation drops, which one a prompt start restores, which entry a load takes, what a slot
# file's restore refuses: all of it is one of the orders the proofs cover, provided these points
# only decide (a decision point returns a value; a choice point reads the state and returns one).
CHOOSING = frozenset({
    "update_cache_on_select", "load_baseline", "load_select", "breaks_at_user_message", "tail_breaks",
    "sweep_too_close", "cap_evictions", "pos_min_threshold", "restore_choice", "invalidated", "appendix_cap",
    "bytes_reported", "file_restore_refuses", "file_checkpoint_refused", "cache_update_busy_slot",
    "get_available_slot", "checkpoint_pos_min",
})
# The claims that hold whichever entries make room or the limits evict (an eviction takes a whole
# entry, after the admission and never inside a fill): RB-1 (no partial entry), RB-3 (a bad_alloc
# caught), ACC-2 (the admission, decided before any eviction).
WHICH_GO = CHOOSING | {"make_room", "update_evictions"}
# ... and, for the world's obligations (which hold for any cache contents), which entries make
# room, which the limits evict, what is over the limit, how entries are counted and the limit
# after a bad_alloc: the world's evict takes any entry at any time.
CACHE_DECISIONS = frozenset({
    "is_oversize", "make_room", "update_evictions", "limit_after_bad_alloc", "entry_sizes", "candidate_size",
})

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
    # The extension points whose every behaviour the proof covers (``CHOOSING`` and more).
    abstracts: frozenset[str] = CHOOSING

    def not_covered(self, unknown: dict[str, str]) -> dict[str, str]:
        """Of the points where a design runs code the encodings do not know (``encode``), those
        this obligation's proof depends on: point -> the class that defines it."""
        return {p: where for p, where in unknown.items() if p not in self.abstracts}

    def scope_text(self, bounds: Bounds) -> str:
        return self.scope.replace("{bounds}", bounds.describe())


def _world_obligation(
    pid: str, family: str, claim: str, inv: world_proofs.Formula, prop: world_proofs.Formula, reads: bool = False
) -> Obligation:
    """An obligation of the safety encoding, about property ``pid``: proved for any number of
    objects by an inductive invariant ``inv`` (with ``reads``: that no read meets an unwritten
    byte), searched for on the canvas of the world operations."""

    def prove(v: Encoded, bounds: Bounds) -> list[Query]:
        qs = world_proofs.invariant(v, inv, prop)
        return qs + world_proofs.reads(v, inv) if reads else qs

    return Obligation(pid, (pid,), family, claim, UNBOUNDED, prove, lambda v, n: search_world.build(v, pid, n), pid,
                      CHOOSING | CACHE_DECISIONS | {"kept_checkpoint"})


def _cache_obligation(
    pid: str, family: str, claim: str, prove: Prove, id: str | None = None, scope: str = "{bounds}",
    abstracts: frozenset[str] = CHOOSING,
) -> Obligation:
    """An obligation of the bounded cache encoding about property ``pid`` (``id``: its own name
    when another obligation has the property's), searched for on the canvas of saves and updates."""
    return Obligation(id or pid, (pid,), family, claim, scope, prove, lambda v, n: search_cache.build(v, pid, n), pid,
                      abstracts | {"kept_checkpoint", "reuse_payload"})


OBLIGATIONS: tuple[Obligation, ...] = (
    _world_obligation(
        "IMM-1",
        "immutability",
        "A checkpoint held by a slot or a cache entry is, in metadata and payload bytes, as it was when "
        "first published: an inductive invariant over create, drop, clear, the three parts of a save, "
        "load and evict.",
        wp.imm1_invariant,
        wp.imm1,
    ),
    _world_obligation(
        "IMM-2",
        "immutability",
        "A cache entry's data buffers (which, and their bytes), checkpoint list and checkpoints stay as "
        "its save published them while it is in the cache.",
        wp.imm2_invariant,
        wp.imm2,
    ),
    _world_obligation(
        "UNINIT-1",
        "uninit",
        "Every buffer a slot, a checkpoint or a cache entry holds was zero-filled or filled completely: "
        "a buffer is published only after a fill validated for every byte.",
        wp.uninit_invariant,
        wp.uninit1,
    ),
    _world_obligation(
        "UNINIT-2",
        "uninit",
        "No load into a context, checkpoint restore or slot-file write reads an unwritten byte (from "
        "UNINIT-1's invariant, which this obligation proves again).",
        wp.uninit_invariant,
        wp.uninit1,
        reads=True,
    ),
    _cache_obligation(
        "RB-1",
        "rollback",
        "After any save, update or removal, no cache entry holds a partially filled data buffer (weak "
        "rollback: no partial entry).",
        cache_proofs.rb1,
        abstracts=WHICH_GO,
    ),
    _cache_obligation(
        "RB-2",
        "rollback",
        "A save that fails (any fault site, or rejected) leaves the cache's entries, their order and its "
        "limit exactly as they were (strong rollback).",
        cache_proofs.rb2,
    ),
    _cache_obligation(
        "RB-3",
        "rollback",
        "An allocation failure at any allocation site of a save (data.main, data.drft, the entry and its "
        "checkpoint copies) is caught: the process survives.",
        cache_proofs.rb3,
        abstracts=WHICH_GO,
    ),
    _cache_obligation(
        "ACC-1",
        "accounting",
        "In every cache of the design's shape -- so after any save, update or removal -- the bytes the "
        "cache accounts equal its unique bytes.",
        cache_proofs.acc1,
        abstracts=CHOOSING | {"is_oversize", "make_room", "update_evictions", "limit_after_bad_alloc",
                              "on_contained"},
    ),
    _cache_obligation(
        "ACC-1",
        "accounting",
        "The accounting loop (accounted_sizes, back to front) sums each buffer once, for any number of "
        "entries: accounted equals unique bytes.",
        lambda v, bounds: setsum.queries(v),
        id="ACC-1/unbounded",
        scope="unbounded: any number of entries and buffers; bytes of a set axiomatized as a set sum",
        abstracts=CHOOSING | {"is_oversize", "make_room", "update_evictions", "limit_after_bad_alloc",
                              "on_contained"},
    ),
    _cache_obligation(
        "ACC-2",
        "accounting",
        "The admission lemma: a save is rejected as oversize only if the entry's own unique bytes exceed "
        "the limit, and an admitted entry's do not; a rejection evicts nothing.",
        cache_proofs.acc2,
        abstracts=WHICH_GO,
    ),
    _cache_obligation(
        "ACC-3",
        "accounting",
        "Minimal eviction: make-room and the byte limit evict an entry only while the unique bytes of the "
        "cache (and the candidate) exceed the limit.",
        cache_proofs.acc3,
    ),
    _cache_obligation(
        "LIMIT-1",
        "accounting",
        "At every publication and after every save, update or removal the unique bytes are within the "
        "byte limit (the token half of LIMIT-1 is not encoded: its estimate divides).",
        cache_proofs.limit1,
    ),
)

BY_ID: dict[str, Obligation] = {o.id: o for o in OBLIGATIONS}
