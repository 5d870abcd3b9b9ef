"""Encoding conformance, cache side: concrete model states through the Python model and
through the Z3 relation of ``cache_ops``; they must agree.

A ``Scene`` is a concrete state small enough to draw: checkpoint payloads, entries (tokens,
which checkpoints, whether their data was filled), the slot's tokens and checkpoints, the
limit, a fault. ``stage`` builds it as model objects on a real ``Server`` (entries hold the
checkpoints as the variant's sharing seam holds them); the model operation then runs
(``Slot.prompt_save``, ``PromptCache.update``); ``abstract`` reads pre- and post-state as the
encoding's values. A ``Relation`` is the operation's encoding built once, with every input
free; each scene is checked in a ``push``/``pop``: the relation must allow exactly the
post-state the model produced (allowed, and no other post-state allowed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import z3

from pcspec.model import events as ev
from pcspec.model.cache import CacheEntry, PromptCache, lcp
from pcspec.model.checkpoint import Checkpoint, Prompt, copy_checkpoints, hold
from pcspec.model.config import STATE_HEADER, Config, MemoryKind
from pcspec.model.context import Context
from pcspec.model.design import Design, Sharing
from pcspec.model.heap import Abort, Buffer
from pcspec.model.memory import Tokens
from pcspec.model.server import Server
from pcspec.proofs import cache_ops as co
from pcspec.proofs.build import Build, Term
from pcspec.proofs.cache_state import Cache, fresh
from pcspec.proofs.encoded import encode

N, K = 4, 4  # positions (the last one free for the new entry) and checkpoint payloads


@dataclass
class Scene:
    rs: int  # target state: STATE_HEADER + rs bytes (recurrent)
    draft_rs: int | None  # draft state, or no draft
    limit: int  # cache_ram bytes (0: no byte limit)
    payloads: list[int]  # checkpoint payload sizes (up to K)
    entries: list[tuple[tuple[int, ...], list[int], bool]]  # tokens, payloads held, data filled
    slot: tuple[tuple[int, ...], list[int]]  # tokens, payloads held
    fault: str = "none"


@dataclass
class Staged:
    srv: Server
    pool: list[Checkpoint]
    slot_groups: list[int]


def stage(scene: Scene, v: Design) -> Staged:
    cfg = Config(
        memory=MemoryKind.RECURRENT,
        rs_bytes=scene.rs,
        has_draft=scene.draft_rs is not None,
        draft_memory=MemoryKind.RECURRENT,
        draft_rs_bytes=scene.draft_rs or 1,
        cache_ram=scene.limit if scene.limit > 0 else -1,
    )
    srv = Server(cfg, v)
    heap = srv.heap
    pool: list[Checkpoint] = []
    for i, size in enumerate(scene.payloads):
        ck = Checkpoint(heap.new_id(), i + 1, 0, i, i)
        ck.tgt = heap.allocate(size, "ckpt_tgt", v.zero_init)
        heap.fill(ck.tgt, ("payload", i), size)
        pool.append(ck)
    tokens, held = scene.slot
    slot = srv.slots[0]
    slot.prompt.tokens = tokens
    for i in held:
        hold(heap, slot.prompt, pool[i])
    for ctx in srv.contexts():
        ctx.seqs[0].decode(tokens)
    for toks, groups, filled in scene.entries:
        stage_entry(srv, v, toks, [pool[i] for i in groups], filled,
                    lambda ctx: STATE_HEADER + (scene.rs if ctx.name == "tgt" else scene.draft_rs or 0))
    if scene.fault != "none":
        heap.faults.arm(scene.fault)
    return Staged(srv, pool, list(held))


def stage_entry(srv: Server, v: Design, tokens: Tokens, ckpts: list[Checkpoint], filled: bool,
                size_of: Callable[[Context], int]) -> None:
    """A cache entry as a save leaves it (both sides stage so): ``ckpts`` copied by the sharing
    seam; per context ``size_of(ctx)`` bytes of the slot's state image (a load of it can
    succeed), all or (not ``filled``) half of them written."""
    heap = srv.heap
    assert srv.cache is not None
    copies = copy_checkpoints(heap, ckpts, v.sharing, v.zero_init, None)
    data: list[Buffer | None] = []
    for ctx in srv.contexts():
        size = size_of(ctx)
        buf = heap.allocate(size, "main" if ctx.name == "tgt" else "drft", v.zero_init)
        heap.fill(buf, ctx.seqs[0].image(0), size if filled else size // 2)
        data.append(buf)
    e = CacheEntry(heap.new_id(), Prompt(tokens), data[0], data[1] if len(data) > 1 else None)
    for ck in copies:
        hold(heap, e.prompt, ck)
    srv.cache.entries.append(e)


def _groups(ck: Checkpoint, pool: list[Checkpoint]) -> int | None:
    bufs = [b.id for b in ck.buffers()]
    for i, p in enumerate(pool):
        if [b.id for b in p.buffers()] == bufs:
            return i
    return None  # a private copy


def abstract(st: Staged, at_ids: list[int], v: Design) -> dict[str, Any]:
    """The cache as the encoding's values: ``at_ids[i]`` is the entry id at position ``i``
    (0: a gap)."""
    assert st.srv.cache is not None
    by_id = {e.id: e for e in st.srv.cache.entries}
    vals: dict[str, Any] = {"limit": st.srv.cache.limit_size}
    for i, eid in enumerate(at_ids):
        e = by_id.get(eid)
        vals[f"p{i}"] = e is not None
        if e is None:  # what a gap's fields hold is no one's business
            continue
        vals[f"main{i}"] = e.main.size if e.main is not None else 0
        vals[f"drft{i}"] = e.drft.size if e.drft is not None else 0
        vals[f"main_full{i}"] = e.main is None or e.main.complete
        vals[f"drft_full{i}"] = e.drft is None or e.drft.complete
        private = 0
        refs = [False] * K
        for ck in e.prompt.checkpoints:
            g = _groups(ck, st.pool)
            if g is None or v.sharing == Sharing.DEEP_COPY:
                private += ck.size()
            else:
                refs[g] = True
        vals[f"private{i}"] = private
        for j in range(K):
            vals[f"r{i}_{j}"] = refs[j]
    for j in range(K):
        vals[f"s{j}"] = st.pool[j].size() if j < len(st.pool) else 0
        vals[f"h{j}"] = j in st.slot_groups
    return vals


def _fields(c: Cache) -> dict[str, Term]:
    out: dict[str, Term] = {}
    for i in range(c.n):
        for name, xs in (
            ("p", c.present),
            ("main", c.main),
            ("drft", c.drft),
            ("main_full", c.main_full),
            ("drft_full", c.drft_full),
            ("private", c.private),
        ):
            out[f"{name}{i}"] = xs[i]
        for j in range(c.k):
            out[f"r{i}_{j}"] = c.refs[i][j]
    for j in range(c.k):
        out[f"s{j}"] = c.size[j]
        out[f"h{j}"] = c.slot[j]
    out["limit"] = c.limit
    return out


class Relation:
    """One operation's encoding with every input free, checked against many scenes."""

    def __init__(self, v: Design, op: str) -> None:  # op: "save" | "update" | "remove" | "clear_main"
        self.v, self.op = v, op
        self.e = encode(v)[0]  # what the encodings read of the design
        b = self.b = Build(f"conformance {self.op} {self.v.name}")
        c = fresh(b, "pre", N, K)
        b.assume(z3.Not(c.present[N - 1]))
        self.pre = _fields(c)
        self.inputs, self.outputs = {}, {}
        if self.op == "save":
            cand = co.Candidate(
                b.int("tgt"), b.int("dft"), [b.bool(f"obs{i}") for i in range(N)], b.bool("contained"), b.int("fault")
            )
            s = co.save(b, "save", self.e, c, cand, N - 1)
            post = s.post
            self.inputs = {"tgt": cand.tgt, "dft": cand.dft, "contained": cand.contained, "fault": cand.fault}
            self.inputs.update({f"obs{i}": o for i, o in enumerate(cand.obsolete)})
            self.outputs = {"ok": s.ok, "crash": s.crash, "rejected": s.rejected, "published": s.published}
            self._evictions(s.evictions[:N], "room")
            self._evictions(s.evictions[N:], "limit_bytes")
        elif self.op == "update":
            post, evictions = co.update(b, "update", self.e, c)
            self._evictions(evictions, "limit_bytes")
        else:  # which entries go, or lose their main state, is the encoding's free choice: an input
            post = co.remove(b, "remove", c) if self.op == "remove" else co.clear_main(b, "clear_main", c)
            flag = "gone" if self.op == "remove" else "cleared"
            self.inputs = {f"{flag}{i}": z3.Bool(f"{self.op}.{flag}{i}", b.ctx) for i in range(N)}
        self.post = _fields(post)
        self.solver = z3.Solver(ctx=b.ctx)
        self.solver.add(*b.facts)

    def _evictions(self, evictions: list[co.Eviction], reason: str) -> None:
        """Each position's eviction (popped?) and the unique bytes the model records then."""
        for i, e in enumerate(evictions):
            self.outputs[f"{reason}.pop{i}"] = e.popped
            self.outputs[f"{reason}.unique{i}"] = e.unique_total

    def agrees(self, pre: dict[str, Any], inputs: dict[str, Any], post: dict[str, Any], outputs: dict[str, Any]) -> str:
        """'' when the relation, given ``pre`` and ``inputs``, allows exactly this ``post`` and
        these ``outputs``; otherwise what differs."""
        given = [*(self.pre[k] == v for k, v in pre.items()), *(self.inputs[k] == v for k, v in inputs.items())]
        known = {**self.post, **self.outputs}
        return agreement(self.solver, given, {k: (known[k], v) for k, v in {**post, **outputs}.items() if k in known})


def agreement(s: Any, given: list[Term], want: dict[Any, tuple[Term, Any]]) -> str:
    """'' when the relation on solver ``s``, under ``given``, allows a result with every term of
    ``want`` at its value (the model's), and no other result; otherwise what differs, as
    (key, the encoding's value, the model's) at the keys where a result of the encoding differs.
    Both conformance checks (this module's and ``conform_world``'s) judge by it."""

    def differing(m: Any) -> list[tuple[Any, str, Any]]:
        return [
            (k, str(m.eval(t, model_completion=True)), v)
            for k, (t, v) in want.items()
            if not z3.is_true(m.eval(t == v, model_completion=True))
        ][:6]

    pinned = [t == v for t, v in want.values()]
    s.push()
    try:
        s.add(*given)
        if s.check() != z3.sat:
            return "the encoding allows no result at all from this state"
        if s.check(*pinned) != z3.sat:
            s.check()
            return f"the encoding does not allow the model's result; (key, encoding, model): {differing(s.model())}"
        if s.check(z3.Not(z3.And(*pinned))) != z3.unsat:
            return f"the encoding also allows a result the model did not produce: {differing(s.model())}"
        return ""
    finally:
        s.pop()


Values = tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]  # pre, inputs, post, outputs


def _staged(scene: Scene, v: Design) -> tuple[Staged, PromptCache, list[int], dict[str, Any]]:
    """The scene staged, its cache, the entry id at each position (0: a gap) and the pre-state."""
    st = stage(scene, v)
    cache = st.srv.cache
    assert cache is not None
    ids = [e.id for e in cache.entries] + [0] * (N - len(cache.entries))
    return st, cache, ids, abstract(st, ids, v)


def _kept(ids: list[int], cache: PromptCache) -> list[int]:
    """``ids`` with the entries no longer in the cache as gaps: the positions after the operation."""
    present = {e.id for e in cache.entries}
    return [i if i in present else 0 for i in ids]


def run_save(scene: Scene, v: Design) -> Values:
    """The model's save of the scene: (pre, inputs, post, outputs) as the encoding's values."""
    st, cache, ids, pre = _staged(scene, v)
    srv = st.srv
    tokens = srv.slots[0].prompt.tokens
    inputs: dict[str, Any] = {
        "tgt": srv.ctx_tgt.get_size(0, 0),
        "dft": srv.ctx_dft.get_size(0, 0) if srv.ctx_dft is not None else 0,
        "contained": any(lcp(e.prompt.tokens, tokens) == len(tokens) for e in cache.entries),
        "fault": co.FAULTS.index(scene.fault) if scene.fault in co.FAULTS else 0,
    }
    for i in range(N):
        e = cache.entries[i] if i < len(cache.entries) else None
        inputs[f"obs{i}"] = e is not None and lcp(e.prompt.tokens, tokens) == e.prompt.n_tokens
    start = len(srv.heap.events)
    crash = False
    ok = False
    try:
        ok = srv.slots[0].prompt_save(srv)
    except Abort:
        crash = True
    events = srv.heap.events[start:]
    new = [e for e in cache.entries if e.id not in ids]
    post = abstract(st, [*_kept(ids, cache)[: N - 1], new[0].id if new else 0], v)
    outputs: dict[str, Any] = {
        "ok": ok,
        "crash": crash,
        "rejected": any(isinstance(e, ev.SaveRejectOversize) for e in events),
        "published": any(isinstance(e, ev.EntryInsert) for e in events),
    }
    outputs.update(_evicted(events, ids, "make_room", "room"))
    outputs.update(_evicted(events, ids, "limit_bytes", "limit_bytes"))
    return pre, inputs, post, outputs


def _evicted(events: list[ev.Event], ids: list[int], reason: str, key: str) -> dict[str, Any]:
    """Which positions the model evicted for ``reason``, and the unique bytes it recorded."""
    out: dict[str, Any] = {}
    gone = {e.entry: e.unique_total for e in events if isinstance(e, ev.EntryEvict) and e.reason == reason}
    for i, eid in enumerate(ids):
        out[f"{key}.pop{i}"] = eid in gone
        if eid in gone:
            out[f"{key}.unique{i}"] = gone[eid]
    return out


def run_remove(scene: Scene, v: Design) -> Values:
    """The model loads the first entry (a prompt that extends it): on success the entry leaves
    the cache -- a removal; under the C++ designs with the draft load failing, it stays with its
    main state cleared (``clear_main``)."""
    st, cache, ids, pre = _staged(scene, v)
    assert cache.entries
    first = cache.entries[0]
    mains = {e.id: e.main for e in cache.entries}
    st.srv.slots[0].prompt_load(st.srv, (*first.prompt.tokens, 99_999))
    post_ids = _kept(ids, cache)
    post = abstract(st, post_ids, v)
    gone = {f"gone{i}": eid != 0 and eid not in post_ids for i, eid in enumerate(ids)}
    cleared = {
        f"cleared{i}": eid != 0
        and eid in post_ids
        and mains[eid] is not None
        and next(e for e in cache.entries if e.id == eid).main is None
        for i, eid in enumerate(ids)
    }
    return pre, {**gone, **cleared}, post, {}


def run_update(scene: Scene, v: Design) -> Values:
    st, cache, ids, pre = _staged(scene, v)
    start = len(st.srv.heap.events)
    cache.update()
    post = abstract(st, _kept(ids, cache), v)
    return pre, {}, post, _evicted(st.srv.heap.events[start:], ids, "limit_bytes", "limit_bytes")
