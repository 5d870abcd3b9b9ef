"""Holders, checkpoint objects and buffers over uninterpreted sorts: the safety encoding.

Three sorts: ``H`` holders (slots, cache entries, entries being built), ``C`` checkpoint
objects, ``B`` heap buffers; nothing bounds how many there are. A ``World`` maps them with
arrays: who holds which object (``holds``), each object's metadata and payload buffer, each
buffer's content version and how it was written, each entry's data buffers. A checkpoint's
payload is one buffer here (``tgt``; ``dft`` and ``spec`` are created, filled and shared
with it and never written apart from it). Two ghosts: the snapshot of an object at its
first publication (``hold``, IMM-1) and of an entry when its save published it (IMM-2).

"Initialized" is the model's ``Buffer.unwritten == 0``: zero-filled at allocation, or
filled completely.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import z3

from pcspec.proofs.build import Build, Term


@dataclass(frozen=True)
class Sorts:
    H: Term
    C: Term
    B: Term


@dataclass(frozen=True)
class World:
    slot: Term  # H -> Bool: a slot (never changes)
    building: Term  # H -> Bool: an entry a save is building
    cache: Term  # H -> Bool: an entry in the cache
    holds: Term  # H -> (C -> Bool)
    made: Term  # C -> Bool: the object exists
    meta: Term  # C -> Int: n_tokens, pos_min, pos_max (one value standing for all three)
    pay: Term  # C -> B
    alloc: Term  # B -> Bool: ever allocated (ids are never reused)
    ver: Term  # B -> Int: content version (every write bumps it)
    zeroed: Term  # B -> Bool
    full: Term  # B -> Bool: the last fill wrote every byte
    main: Term  # H -> B
    has_main: Term  # H -> Bool
    drft: Term  # H -> B
    has_drft: Term  # H -> Bool
    # ghost: each object as first published (hold), each entry as its save published it
    pub: Term  # C -> Bool
    smeta: Term
    spay: Term
    sver: Term
    sealed: Term  # H -> Bool
    emain: Term
    ehas_main: Term
    emver: Term
    edrft: Term
    ehas_drft: Term
    edver: Term
    eholds: Term  # H -> (C -> Bool)
    crash: Term  # Bool: the process died

    def set(self, **fields: Term) -> World:
        return replace(self, **fields)


def sorts(b: Build) -> Sorts:
    return Sorts(b.sort("H"), b.sort("C"), b.sort("B"))


def _arrays(b: Build, name: str, so: Sorts) -> dict[str, Term]:
    Int, Bo = z3.IntSort(b.ctx), z3.BoolSort(b.ctx)
    sig = {
        "slot": (so.H, Bo),
        "building": (so.H, Bo),
        "cache": (so.H, Bo),
        "holds": (so.H, z3.ArraySort(so.C, Bo)),
        "made": (so.C, Bo),
        "meta": (so.C, Int),
        "pay": (so.C, so.B),
        "alloc": (so.B, Bo),
        "ver": (so.B, Int),
        "zeroed": (so.B, Bo),
        "full": (so.B, Bo),
        "main": (so.H, so.B),
        "has_main": (so.H, Bo),
        "drft": (so.H, so.B),
        "has_drft": (so.H, Bo),
        "pub": (so.C, Bo),
        "smeta": (so.C, Int),
        "spay": (so.C, so.B),
        "sver": (so.C, Int),
        "sealed": (so.H, Bo),
        "emain": (so.H, so.B),
        "ehas_main": (so.H, Bo),
        "emver": (so.H, Int),
        "edrft": (so.H, so.B),
        "ehas_drft": (so.H, Bo),
        "edver": (so.H, Int),
        "eholds": (so.H, z3.ArraySort(so.C, Bo)),
    }
    return {k: b.const(f"{name}.{k}", z3.ArraySort(d, r)) for k, (d, r) in sig.items()}


def fresh(b: Build, name: str, so: Sorts) -> World:
    """A world with every array free (the pre-state of an inductive step)."""
    return World(**_arrays(b, name, so), crash=b.false)


def initial(b: Build, so: Sorts, slots: list[Term]) -> World:
    """The server at start: the given slots, nothing held, nothing allocated."""
    no_h, no_c, no_b = z3.K(so.H, b.false), z3.K(so.C, b.false), z3.K(so.B, b.false)
    slot = no_h
    for s in slots:
        slot = z3.Store(slot, s, True)
    zero_c, zero_b, zero_h = z3.K(so.C, b.val(0)), z3.K(so.B, b.val(0)), z3.K(so.H, b.val(0))

    # Which buffer an unmade object or an unused holder points at does not matter: free
    # arrays (a constant array of a non-value is not SMT-LIB that cvc5 accepts).
    def nobuf_c(name: str) -> Term:
        return b.const(f"init.{name}", z3.ArraySort(so.C, so.B))

    def nobuf_h(name: str) -> Term:
        return b.const(f"init.{name}", z3.ArraySort(so.H, so.B))

    return World(
        slot=slot,
        building=no_h,
        cache=no_h,
        holds=z3.K(so.H, no_c),
        made=no_c,
        meta=zero_c,
        pay=nobuf_c("pay"),
        alloc=no_b,
        ver=zero_b,
        zeroed=no_b,
        full=no_b,
        main=nobuf_h("main"),
        has_main=no_h,
        drft=nobuf_h("drft"),
        has_drft=no_h,
        pub=no_c,
        smeta=zero_c,
        spay=nobuf_c("spay"),
        sver=zero_c,
        sealed=no_h,
        emain=nobuf_h("emain"),
        ehas_main=no_h,
        emver=zero_h,
        edrft=nobuf_h("edrft"),
        ehas_drft=no_h,
        edver=zero_h,
        eholds=z3.K(so.H, no_c),
        crash=b.false,
    )


def initialized(w: World, buf: Term) -> Term:
    """``Buffer.unwritten == 0``."""
    return z3.Or(w.zeroed[buf], w.full[buf])


def reachable(w: World, h: Term) -> Term:
    """A holder the properties judge: a slot, or an entry in the cache."""
    return z3.Or(w.slot[h], w.cache[h])
