"""The cache operations over bounded masks: save, update, removal, a load's failure path.

``save`` is ``server_slot::prompt_save`` of one slot: ``server_prompt_cache::alloc`` then the
fill (``baseline``, ``pr30137``, ``pr27451``), or ``PromptCache.save_transactional``
(``fixed``), chosen by the variant's seams exactly as ``model/cache.py`` chooses; the
decisions are the rules of ``pcspec.proofs.rules`` (``model/policy.py``). The candidate's
checkpoints are the slot's (``Cache.slot``); which entries are prefixes of its tokens
(``obsolete``) and whether it is a prefix of one (``contained``) are inputs, as are the
sizes and the fault (one site of ``FAULTS``, or none). The result carries what the
properties judge: the events the model emits (rejection, each eviction with the unique
bytes at that moment, the publication) as terms.

Bridges (``Build.bridge``): after an operation, what its post-state holds is stated in terms
of what the pre-state held (the same bytes, or those from where the FIFO loop stopped).
They follow from the definitions; each operation's lemma query proves them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import z3

from pcspec.model.design import AllocScope, Sharing
from pcspec.proofs import rules
from pcspec.proofs.build import Build, Term
from pcspec.proofs.cache_state import Cache, Holdings, accounted, holdings, object_refs, size
from pcspec.proofs.encoded import Encoded

# Fault sites of a save (pcspec.model.heap.Faults.SITES), by code; 0 is no fault.
FAULTS = ("none", "save.alloc.main", "save.alloc.drft", "save.alloc.entry", "save.read.tgt", "save.read.dft")
ALLOC_SITES = (1, 2, 3)


@dataclass
class Candidate:
    tgt: Term  # llama_state_seq_get_size_ext(ctx_tgt)
    dft: Term  # ... of ctx_dft (0 without a draft)
    obsolete: list[Term]  # entry i's tokens are a prefix of the candidate's
    contained: Term  # the candidate's tokens are a prefix of some entry's
    fault: Term  # index into FAULTS


@dataclass
class Eviction:
    """One ``entry_evict`` the ACC-3 check judges: the unique bytes the model records."""

    popped: Term
    unique_total: Term
    limit: Term


@dataclass
class Saved:
    post: Cache
    ok: Term  # prompt_save's result
    crash: Term  # an uncaught bad_alloc (the process dies)
    rejected: Term  # save_reject_oversize
    published: Term  # entry_insert
    consumed: Term  # the armed fault was hit (a trace must not leave it armed)
    own_unique: Term
    publish_unique: Term  # unique bytes right after the entry joined the list
    publish_limit: Term
    fault: Term
    evictions: list[Eviction] = field(default_factory=list)


def _site(fault: Term, name: str) -> Term:
    return fault == FAULTS.index(name)


def _remove(c: Cache, gone: list[Term]) -> Cache:
    return c.with_present([z3.And(p, z3.Not(g)) for p, g in zip(c.present, gone, strict=True)])


def _bridge_same(b: Build, when: Term, post: Holdings, pre: Holdings) -> None:
    """``when`` the masks did not change, the post-state holds what the pre-state held."""
    for k, (x, y) in enumerate(zip(post.heldb[0], pre.heldb[0], strict=True)):
        b.bridge(z3.Implies(when, x == y), group=k)
    for x, y in zip(post.data, pre.data, strict=True):
        b.bridge(z3.Implies(when, x == y), group="data")


def _bridge_stop(b: Build, stop: list[Term], post: Holdings, room: Holdings, at: int | None) -> None:
    """After a FIFO loop that stopped at ``m`` (and, if ``at`` is given, the new entry joined
    at ``at``), the post-state holds what the entries from ``m`` on (plus the candidate)
    held; positions before ``m`` hold nothing."""
    for m, s in enumerate(stop):
        for k, (x, y) in enumerate(zip(post.heldb[0], room.heldb[m], strict=True)):
            b.bridge(z3.Implies(s, x == y), group=k)
        for j, x in enumerate(post.data):
            if j != at:
                b.bridge(z3.Implies(s, x == (room.data[j] if j >= m else 0)), group="data")


def _bridge_removed(b: Build, post: Holdings, pre: Holdings) -> None:
    """A removal only lets go: the post-state holds at most what the pre-state held."""
    for k, (x, y) in enumerate(zip(post.heldb[0], pre.heldb[0], strict=True)):
        b.bridge(x <= y, group=k)
    for x, y in zip(post.data, pre.data, strict=True):
        b.bridge(x <= y, group="data")


def _evictions(popped: list[Term], h: Holdings, extra: Term, limit: Term) -> list[Eviction]:
    """The unique bytes at each pop: the entries from this position on (the earlier ones are
    gone), plus the candidate's shared checkpoints and data (``_evict_front``)."""
    return [Eviction(p, h.uniq[i] + extra, limit) for i, p in enumerate(popped)]


def update(b: Build, name: str, v: Encoded, c: Cache, when: Term | None = None) -> tuple[Cache, list[Eviction]]:
    """server_prompt_cache::update, its byte loop (FIFO while ``size() > limit_size``).
    ``when`` guards the whole call (it runs inside a save only after a bad_alloc)."""
    h = holdings(b, name + ".pre", c)
    acc = accounted(b, name, v, c, h)
    popped, stop = rules.update_byte_evictions(b, name, c.present, acc, c.limit, when)
    post = _remove(c, popped)
    h_post = holdings(b, name + ".post", post)
    if when is None:
        _bridge_stop(b, stop, h_post, h, None)
    else:
        _bridge_same(b, z3.Not(when), h_post, h)
    return post, _evictions(popped, h, b.val(0), c.limit)


def remove(b: Build, name: str, c: Cache) -> Cache:
    """Any set of entries leaves the cache: a load (the entry is moved into the slot), an
    eviction by the token limit, ``pop_back``, sleep. Which ones is left free."""
    post = _remove(c, [b.bool(f"{name}.gone{i}") for i in range(c.n)])
    _bridge_removed(b, holdings(b, name + ".post", post), holdings(b, name + ".pre", c))
    return post


def clear_main(b: Build, name: str, c: Cache) -> Cache:
    """The C++ ``load`` after a failed draft load: the entry stays, its main state cleared
    (``main.clear()`` came first). Any set of entries, left free."""
    hit = [b.bool(f"{name}.cleared{i}") for i in range(c.n)]
    post = replace(
        c,
        main=[z3.If(h, 0, m) for h, m in zip(hit, c.main, strict=True)],
        main_full=[z3.Or(h, f) for h, f in zip(hit, c.main_full, strict=True)],
    )
    _bridge_removed(b, holdings(b, name + ".post", post), holdings(b, name + ".pre", c))
    return post


def _bad_alloc(b: Build, name: str, v: Encoded, c: Cache, bad: Term) -> tuple[Cache, list[Eviction]]:
    """alloc's ``catch (std::bad_alloc)``: with the shrink seam, ``limit_size = 0.4 * size()``
    for good, then ``update()``."""
    if not v.shrink_limit_on_bad_alloc:
        return c, []
    shrunk = rules.limit_after_bad_alloc(b, name + ".limit", size(b, name, v, c))
    c = replace(c, limit=b.int(name + ".new_limit", z3.If(bad, shrunk, c.limit)))
    return update(b, name + ".update", v, c, bad)


def _candidate_size(b: Build, name: str, v: Encoded, c: Cache, cand: Candidate, h: Holdings) -> Term:
    """PromptCache.candidate_size: the new entry as this accounting counts it."""
    data = cand.tgt + cand.dft
    if v.accounting == "per_holder":
        parts = [z3.If(c.slot[j], c.size[j], 0) for j in range(c.k)]
    elif v.accounting == "undercount":  # counted only when no one holds it yet: never, the slot does
        parts = [z3.If(z3.And(c.slot[j], object_refs(b, v, c, j) == 0), c.size[j], 0) for j in range(c.k)]
    else:
        parts = h.seenb
    return b.int(name + ".new_size", data + b.sum(parts))


def save(b: Build, name: str, v: Encoded, c: Cache, cand: Candidate, at: int) -> Saved:
    """server_slot::prompt_save into a cache whose position ``at`` is free and after every
    present entry (the caller asserts it)."""
    deep = v.sharing == Sharing.DEEP_COPY
    seen = [b.bool(f"{name}.seen{j}", z3.And(c.slot[j], b.val(not deep))) for j in range(c.k)]
    h_pre = holdings(b, name + ".pre", c)
    h_seen = holdings(b, name + ".cand", c, seen)
    seen_bytes = b.int(name + ".seen_bytes", b.sum(h_seen.seenb))
    ckpt_bytes = b.int(name + ".ckpt_bytes", b.sum([z3.If(c.slot[j], c.size[j], 0) for j in range(c.k)]))
    own_unique = b.int(name + ".own_unique", cand.tgt + cand.dft + ckpt_bytes)
    new_size = _candidate_size(b, name, v, c, cand, h_seen)
    data_new = b.int(name + ".data_new", z3.If(new_size - seen_bytes > 0, new_size - seen_bytes, 0))
    # alloc step 3 (and the no-make-room mutant): judged on the whole cache, before any removal
    acc_pre = accounted(b, name + ".cand", v, c, h_seen)
    crowded = z3.And(b.val(not v.make_room), c.limit > 0, b.sum(acc_pre) + new_size > c.limit)
    rejected = b.bool(
        name + ".rejected", z3.And(z3.Not(cand.contained), z3.Or(rules.is_oversize(b, new_size, c.limit), crowded))
    )
    go = b.bool(name + ".go", z3.And(z3.Not(cand.contained), z3.Not(rejected)))
    f = cand.fault
    main_fail = b.bool(name + ".main_fail", z3.And(go, _site(f, "save.alloc.main"), cand.tgt > 0))
    drft_fail = b.bool(name + ".drft_fail", z3.And(go, z3.Not(main_fail), _site(f, "save.alloc.drft"), cand.dft > 0))
    data_fail = z3.Or(main_fail, drft_fail)
    entry_fault = b.bool(name + ".entry_fault", z3.And(go, z3.Not(data_fail), _site(f, "save.alloc.entry")))
    evictions: list[Eviction] = []
    new_data = cand.tgt + cand.dft + (ckpt_bytes if deep else 0)

    def make_room(c0: Cache, when: Term) -> tuple[Cache, Holdings, list[Term]]:
        """Obsolete removal then make room, both only ``when``."""
        c1 = _remove(c0, [z3.And(when, o) for o in cand.obsolete])
        h = holdings(b, name + ".room", c1, seen)
        acc = accounted(b, name + ".room", v, c1, h)
        popped, stop = rules.make_room(b, name + ".room", c1.present, acc, new_size, c1.limit, when)
        evictions.extend(_evictions(popped, h, data_new, c1.limit))
        return _remove(c1, popped), h, stop

    if v.save_protocol == "transactional":
        # Build and fill off the list; only a whole entry touches the cache.
        bad = b.bool(name + ".bad", z3.Or(data_fail, entry_fault))
        crash = b.false
        built = z3.And(go, z3.Not(bad))
        short_main = b.bool(name + ".short_main", z3.And(built, _site(f, "save.read.tgt"), cand.tgt > 0))
        short_drft = b.bool(name + ".short_drft", z3.And(built, _site(f, "save.read.dft"), cand.dft > 0))
        published = b.bool(name + ".published", z3.And(built, z3.Not(short_main), z3.Not(short_drft)))
        c1, ev = _bad_alloc(b, name + ".bad_alloc", v, c, bad)
        evictions.extend(ev)
        c2, h_room, stop = make_room(c1, published)
        kept = published
    else:
        # alloc: remove obsolete entries, make room, allocate (bad_alloc caught around the
        # resizes, or the whole entry), append; then the caller fills.
        c1, h_room, stop = make_room(c, go)
        if v.alloc_scope == AllocScope.ENTRY:
            bad, crash = b.bool(name + ".bad", z3.Or(data_fail, entry_fault)), b.false
        else:
            bad, crash = b.bool(name + ".bad", data_fail), b.bool(name + ".crash", entry_fault)
        c2, ev = _bad_alloc(b, name + ".bad_alloc", v, c1, bad)
        evictions.extend(ev)
        published = b.bool(name + ".published", z3.And(go, z3.Not(bad), z3.Not(crash)))
        short_main = b.bool(name + ".short_main", z3.And(published, _site(f, "save.read.tgt"), cand.tgt > 0))
        short_drft = b.bool(name + ".short_drft", z3.And(published, _site(f, "save.read.dft"), cand.dft > 0))
        if v.validates_save:  # pop_back() when the fill came up short
            kept = b.bool(name + ".kept", z3.And(published, z3.Not(short_main), z3.Not(short_drft)))
        else:
            kept = published
    full = (z3.Not(short_main), z3.Not(short_drft))
    at_publish = _insert(b, c2, at, b.true, cand, deep, ckpt_bytes, full)
    h_publish = holdings(b, name + ".at_publish", at_publish)
    post = _insert(b, c2, at, kept, cand, deep, ckpt_bytes, full)
    h_post = holdings(b, name + ".post", post)
    if v.save_protocol == "transactional" and not v.shrink_limit_on_bad_alloc:
        # Published: the cache from where make-room stopped, plus the new entry; otherwise
        # the cache as it was.
        b.bridge(h_publish.data[at] == new_data, z3.Implies(kept, h_post.data[at] == new_data), group="data")
        _bridge_stop(b, stop, h_publish, h_room, at)
        _bridge_stop(b, stop, h_post, h_room, at)
        _bridge_same(b, z3.Not(published), h_post, h_pre)
    consumed = b.bool(
        name + ".consumed",
        z3.Or(_site(f, "none"), main_fail, drft_fail, entry_fault, short_main, short_drft),
    )
    return Saved(
        post=post,
        ok=b.bool(name + ".ok", kept),
        crash=crash,
        rejected=rejected,
        published=published,
        consumed=consumed,
        own_unique=own_unique,
        publish_unique=h_publish.uniq[0],
        publish_limit=c2.limit,
        fault=f,
        evictions=evictions,
    )


def _insert(
    b: Build, c: Cache, at: int, kept: Term, cand: Candidate, deep: bool, ckpt_bytes: Term, full: tuple[Term, Term]
) -> Cache:
    """``states.push_back``: the new entry at position ``at`` (present iff ``kept``)."""

    def put(xs: list[Term], x: Term) -> list[Term]:
        return [x if i == at else y for i, y in enumerate(xs)]

    return replace(
        c,
        present=put(c.present, kept),
        main=put(c.main, cand.tgt),
        drft=put(c.drft, cand.dft),
        main_full=put(c.main_full, full[0]),
        drft_full=put(c.drft_full, full[1]),
        private=put(c.private, ckpt_bytes if deep else b.val(0)),
        refs=[[z3.And(s, b.val(not deep)) for s in c.slot] if i == at else row for i, row in enumerate(c.refs)],
    )
