"""The operations that touch checkpoints and cache entries, over a ``World``.

Each mirrors model code, with the variant's seams, and is written with array stores only
(quantifier-free): ``create`` (``processing.create_checkpoint``: the cap's victim, the
``inplace-update`` recycling, a short read), ``drop`` and ``clear`` (erasures, invalidation,
``prompt_clear``, a context shift), the three parts of a save (``entry_build``: the data
buffers allocated and filled and, under ``shared_object``, the slot's list shared;
``entry_copy``: one checkpoint copied under ``shared_payload`` or ``deep_copy``;
``entry_publish``: the save protocol decides whether the entry joins the cache),
``load`` (``PromptCache.load``, its failure paths by the ``contain_failures`` seam),
``evict``, and the reads that must not see unwritten bytes (``restore``, ``file_write``).

Which objects and buffers are new is a parameter: a proof passes free constants with the
freshness preconditions, a bounded search passes the object it designated for that step.
Preconditions are assumed on the ``Build``; ``when`` guards a whole operation (the world
is unchanged and nothing is required when it is false).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import z3

from pcspec.model.design import Sharing
from pcspec.proofs.build import Build, Term
from pcspec.proofs.encoded import Encoded
from pcspec.proofs.world import Sorts, World, initialized


@dataclass(frozen=True)
class Did:
    world: World
    unwritten_read: Term  # an unwritten byte was loaded into a context or written to a file


def _guard(b: Build, when: Term | None, new: World, old: World, pre: list[Term]) -> World:
    if when is None:
        b.assume(*pre)
        return new
    b.assume(*(z3.Implies(when, p) for p in pre))
    # Each guarded array is named: nested ``If``s over arrays, step after step, grow terms
    # the solver then takes apart again and again.
    changed: dict[str, Term] = {}
    for f in fields(World):
        x, y = getattr(new, f.name), getattr(old, f.name)
        if x is not y:
            g = _guarded_stores(when, x, y) if z3.is_array(x) else None
            c = b.const(f"w.{f.name}", x.sort()) if z3.is_array(x) else b.bool(f"w.{f.name}")
            b.assume(c == (g if g is not None else z3.If(when, x, y)))
            changed[f.name] = c
    return old.set(**changed)


def _guarded_stores(when: Term, new: Term, old: Term) -> Term | None:
    """``If(when, new, old)`` for ``new`` a chain of stores on ``old``, written as the same
    stores of guarded values: pointwise, which the array solver takes far better than an
    ``If`` between two arrays. None when ``new`` is not such a chain."""
    if new.eq(old):
        return old
    if not z3.is_store(new):
        return None
    base = _guarded_stores(when, new.arg(0), old)
    if base is None:
        return None
    idx, val = new.arg(1), new.arg(2)
    return z3.Store(base, idx, z3.If(when, val, base[idx]))


def _nothing(so: Sorts, b: Build) -> Term:
    return z3.K(so.C, b.false)


def _fill(w: World, buf: Term, fresh: bool, zero_init: bool, ok: Term) -> World:
    """Allocate ``buf`` (if ``fresh``: version 0) and fill it (every write bumps the version):
    complete when ``ok``, short otherwise."""
    if fresh:
        w = w.set(
            alloc=z3.Store(w.alloc, buf, True),
            zeroed=z3.Store(w.zeroed, buf, zero_init),
            ver=z3.Store(w.ver, buf, 0),
        )
    return w.set(ver=z3.Store(w.ver, buf, w.ver[buf] + 1), full=z3.Store(w.full, buf, ok))


def _publish(w: World, c: Term) -> World:
    """``hold``'s first publication: the object is sealed as it is now."""
    return w.set(
        pub=z3.Store(w.pub, c, True),
        smeta=z3.Store(w.smeta, c, w.meta[c]),
        spay=z3.Store(w.spay, c, w.pay[c]),
        sver=z3.Store(w.sver, c, w.ver[w.pay[c]]),
    )


def create(
    b: Build,
    v: Encoded,
    w: World,
    s: Term,
    c: Term,
    buf: Term,
    meta: Term,
    ok: bool,
    victim: Term | None = None,
    has_victim: Term | None = None,
    when: Term | None = None,
) -> Did:
    """processing.create_checkpoint: the cap drops ``victim`` (when ``has_victim``); the new
    object ``c`` gets a fresh payload ``buf`` -- or, under ``inplace-update``, the victim's
    buffer -- which the state read fills, completely when ``ok``. A short read aborts, or
    under ``contain_failures`` holds nothing. (``ok`` is a Python bool: a proof asks both
    ways, since a symbolic choice inside the stored values stalls its quantifier
    instantiation.)"""
    pre = [w.slot[s], z3.Not(w.made[c]), z3.Not(w.alloc[buf])]
    x = w
    target = buf
    recycle = b.false
    if victim is not None and has_victim is not None:
        pre.append(z3.Implies(has_victim, w.holds[s][victim]))
        x = x.set(holds=z3.If(has_victim, z3.Store(x.holds, s, z3.Store(x.holds[s], victim, False)), x.holds))
        if v.inplace_update:
            recycle = has_victim
            target = z3.If(recycle, w.pay[victim], buf)
    fresh = x.set(
        alloc=z3.Store(x.alloc, buf, True),
        zeroed=z3.Store(x.zeroed, buf, v.zero_init),
        ver=z3.Store(x.ver, buf, 0),  # a new buffer starts at version 0
    )
    if target is not buf:  # inplace-update: the new buffer is only allocated when not recycling
        fresh = x.set(**{f: z3.If(recycle, getattr(x, f), getattr(fresh, f)) for f in ("alloc", "zeroed", "ver")})
    x = fresh.set(ver=z3.Store(fresh.ver, target, fresh.ver[target] + 1), full=z3.Store(fresh.full, target, ok))
    if ok:
        x = x.set(
            made=z3.Store(x.made, c, True),
            meta=z3.Store(x.meta, c, meta),
            pay=z3.Store(x.pay, c, target),
            holds=z3.Store(x.holds, s, z3.Store(x.holds[s], c, True)),
        )
        x = _publish(x, c)
    elif not v.contain_failures:
        x = x.set(crash=b.true)
    return Did(_guard(b, when, x, w, pre), b.false)


def drop(b: Build, w: World, s: Term, c: Term, when: Term | None = None) -> Did:
    """A slot lets go of one checkpoint (cap, sweep, supersede, invalidation). Only slots'
    lists change in place; an entry's list goes whole, with the entry."""
    new = w.set(holds=z3.Store(w.holds, s, z3.Store(w.holds[s], c, False)))
    return Did(_guard(b, when, new, w, [w.slot[s]]), b.false)


def clear(b: Build, so: Sorts, w: World, s: Term, when: Term | None = None) -> Did:
    """A slot lets go of its whole list (``prompt_clear``, a new prompt, a context shift)."""
    new = w.set(holds=z3.Store(w.holds, s, _nothing(so, b)))
    return Did(_guard(b, when, new, w, [w.slot[s]]), b.false)


def entry_build(
    b: Build,
    v: Encoded,
    so: Sorts,
    w: World,
    s: Term,
    e: Term,
    mb: Term,
    db: Term,
    has_drft: Term,
    ok_main: Term,
    ok_drft: Term,
    when: Term | None = None,
) -> Did:
    """A save begins: entry ``e`` gets fresh data buffers, filled from the contexts (a short
    read when not ``ok_*``), and under ``shared_object`` the slot's very checkpoints."""
    pre = [
        w.slot[s],
        z3.Not(w.slot[e]),
        z3.Not(w.cache[e]),
        z3.Not(w.building[e]),
        z3.Not(w.alloc[mb]),
        z3.Not(w.alloc[db]),
        mb != db,
    ]
    x = _fill(w, mb, True, v.zero_init, ok_main)
    x = _fill(x, db, True, v.zero_init, ok_drft)
    shared = v.sharing == Sharing.SHARED_OBJECT
    x = x.set(
        building=z3.Store(x.building, e, True),
        holds=z3.Store(x.holds, e, w.holds[s] if shared else _nothing(so, b)),
        main=z3.Store(x.main, e, mb),
        has_main=z3.Store(x.has_main, e, True),
        drft=z3.Store(x.drft, e, db),
        has_drft=z3.Store(x.has_drft, e, has_drft),
    )
    return Did(_guard(b, when, x, w, pre), b.false)


def entry_copy(
    b: Build, v: Encoded, w: World, s: Term, e: Term, c: Term, x: Term, xb: Term, when: Term | None = None
) -> Did:
    """The entry's copy of the slot's checkpoint ``c``: a new object ``x`` with the metadata,
    sharing the payload (``shared_payload``) or with a copy of it in ``xb`` (``deep_copy``);
    ``hold`` publishes it."""
    pre = [w.building[e], w.slot[s], w.holds[s][c], z3.Not(w.made[x]), z3.Not(w.alloc[xb])]
    src = w.pay[c]
    y = w
    if v.sharing == Sharing.DEEP_COPY:
        y = y.set(
            alloc=z3.Store(y.alloc, xb, True),
            zeroed=z3.Store(y.zeroed, xb, z3.Or(w.zeroed[src], v.zero_init)),
            full=z3.Store(y.full, xb, w.full[src]),
            ver=z3.Store(y.ver, xb, 0),  # a copy is written at construction: no fill
        )
        payload = xb
    else:
        payload = src
    y = y.set(
        made=z3.Store(y.made, x, True),
        meta=z3.Store(y.meta, x, w.meta[c]),
        pay=z3.Store(y.pay, x, payload),
        holds=z3.Store(y.holds, e, z3.Store(y.holds[e], x, True)),
    )
    return Did(_guard(b, when, _publish(y, x), w, pre), b.false)


def entry_publish(b: Build, v: Encoded, so: Sorts, w: World, e: Term, when: Term | None = None) -> Did:
    """The save ends: the protocol decides. ``transactional`` and ``append_fill_pop`` keep the
    entry only if every data byte was filled; ``append_fill`` keeps it whatever the fill did.
    A kept entry is sealed (IMM-2's snapshot); a dropped one lets go of its list."""
    complete = z3.And(z3.Or(z3.Not(w.has_main[e]), w.full[w.main[e]]), z3.Or(z3.Not(w.has_drft[e]), w.full[w.drft[e]]))
    kept = complete if v.validates_save else b.true
    m, d = w.main[e], w.drft[e]

    def seal(arr: Term, value: Term) -> Term:
        return z3.Store(arr, e, z3.If(kept, value, arr[e]))

    new = w.set(
        building=z3.Store(w.building, e, False),
        cache=z3.Store(w.cache, e, kept),
        holds=z3.Store(w.holds, e, z3.If(kept, w.holds[e], _nothing(so, b))),
        sealed=seal(w.sealed, b.true),
        emain=seal(w.emain, m),
        ehas_main=seal(w.ehas_main, w.has_main[e]),
        emver=seal(w.emver, w.ver[m]),
        edrft=seal(w.edrft, d),
        ehas_drft=seal(w.ehas_drft, w.has_drft[e]),
        edver=seal(w.edver, w.ver[d]),
        eholds=seal(w.eholds, w.holds[e]),
    )
    return Did(_guard(b, when, new, w, [w.building[e]]), b.false)


def load(
    b: Build,
    v: Encoded,
    so: Sorts,
    w: World,
    e: Term,
    s: Term,
    fail_tgt: Term,
    fail_dft: Term,
    when: Term | None = None,
) -> Did:
    """PromptCache.load of entry ``e`` into slot ``s``: the target state, then the draft.
    Success moves the entry's list to the slot and the entry leaves the cache. On failure
    ``contain_failures`` drops the entry; the C++ leaves it -- with its main state already
    cleared when only the draft load failed. The slot is cleared either way."""
    pre = [w.cache[e], w.slot[s]]
    has_m, has_d = w.has_main[e], w.has_drft[e]
    m, d = w.main[e], w.drft[e]
    tgt_ok = z3.Or(z3.Not(has_m), z3.And(z3.Not(fail_tgt), _takes(w, m)))
    ok = z3.And(tgt_ok, z3.Or(z3.Not(has_d), z3.And(z3.Not(fail_dft), _takes(w, d))))
    unwritten = z3.Or(
        z3.And(has_m, z3.Not(fail_tgt), z3.Not(initialized(w, m))),
        z3.And(tgt_ok, has_d, z3.Not(fail_dft), z3.Not(initialized(w, d))),
    )
    nothing = _nothing(so, b)
    stays = b.false if v.contain_failures else z3.Not(ok)
    holds = z3.Store(w.holds, e, z3.If(stays, w.holds[e], nothing))
    new = w.set(
        cache=z3.Store(w.cache, e, stays),
        holds=z3.Store(holds, s, z3.If(ok, w.holds[e], nothing)),
        # main.clear() before the draft load (the C++; contained, the entry is gone anyway)
        has_main=z3.Store(w.has_main, e, z3.And(has_m, z3.Not(tgt_ok)) if not v.contain_failures else has_m),
    )
    return Did(_guard(b, when, new, w, pre), z3.And(when, unwritten) if when is not None else unwritten)


def _takes(w: World, buf: Term) -> Term:
    """Context.set_data accepts the buffer: completely filled, or with unwritten bytes (it
    "succeeds" with garbage); a short zero-filled buffer is rejected as corrupt."""
    return z3.Or(w.full[buf], z3.Not(w.zeroed[buf]))


def evict(b: Build, so: Sorts, w: World, e: Term, when: Term | None = None) -> Did:
    """An entry leaves the cache (make room, the limits, obsolete, pop_back, sleep)."""
    new = w.set(cache=z3.Store(w.cache, e, False), holds=z3.Store(w.holds, e, _nothing(so, b)))
    return Did(_guard(b, when, new, w, [w.cache[e]]), b.false)


def restore(b: Build, w: World, s: Term, c: Term, when: Term | None = None) -> Did:
    """Restoring a held checkpoint at prompt start reads its payload into the context."""
    read = z3.And(w.holds[s][c], z3.Not(initialized(w, w.pay[c])))
    return Did(_guard(b, when, w, w, [w.slot[s], w.holds[s][c]]), z3.And(when, read) if when is not None else read)


def file_write(b: Build, w: World, s: Term, c: Term) -> Did:
    """A slot save writes every held checkpoint's payload to the file (``c`` stands for any)."""
    read = z3.And(w.holds[s][c], z3.Not(initialized(w, w.pay[c])))
    return Did(_guard(b, None, w, w, [w.slot[s]]), read)
