"""Encoding conformance, safety side: the model's create, save, load and evict against the
``world_ops`` relations.

A scene is staged on a real ``Server`` (the slot's checkpoints, cache entries with their
checkpoints held as the variant's sharing seam holds them and data filled or not, armed
faults); the model operation runs; both states are read as the world's arrays at the
objects that exist (``Designation`` gives every holder, checkpoint object and buffer a
constant of its sort). Ghost arrays (snapshots) are not model state and are not compared.
The relation, built once per (variant, operation) with free arrays and free parameters,
must allow exactly the model's post-state at every designated element (judged as the cache side
judges: ``conform_cache.agreement``). (``drop`` runs the model's private ``processing.erase_checkpoint``:
the one place every single erasure goes through.)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import z3

from pcspec.model import events as ev
from pcspec.model.cache import CacheEntry
from pcspec.model.checkpoint import Checkpoint, hold
from pcspec.model.config import Config, MemoryKind
from pcspec.model.design import Design, Sharing
from pcspec.model.heap import Abort, Buffer
from pcspec.model.processing import create_checkpoint, erase_checkpoint
from pcspec.model.server import Server
from pcspec.model.slot import Task
from pcspec.proofs import world_ops as ops
from pcspec.proofs.build import Build, Term
from pcspec.proofs.encoded import encode
from pcspec.proofs.world import World, fresh, sorts
from tests.proofs.conform_cache import agreement, stage_entry

NH, NC, NB = 5, 14, 24  # designated holders, checkpoint objects, buffers
# The model-state arrays of a World that conformance compares, and the sorts indexing them.
INDEXED_BY = {
    **dict.fromkeys(("slot", "cache", "building", "has_main", "has_drft", "main", "drft"), "H"),
    "holds": "HC",
    **dict.fromkeys(("made", "meta", "pay"), "C"),
    **dict.fromkeys(("alloc", "ver", "zeroed", "full"), "B"),
}
COPIES = 3  # the slot holds at most this many checkpoints when it saves


@dataclass
class WorldScene:
    slot_ckpts: int  # the slot's checkpoints (complete payloads)
    entries: list[tuple[int, bool]]  # per entry: its checkpoints (fresh), data filled
    draft: bool
    cap: int  # n_ctx_checkpoints (create)
    fault: str = "none"  # ckpt.read.tgt | save.read.tgt | save.read.dft | load.write.tgt | load.write.dft


# -- the concrete side -------------------------------------------------------------------------


def stage(scene: WorldScene, v: Design) -> Server:
    cfg = Config(
        memory=MemoryKind.RECURRENT,
        rs_bytes=32,
        has_draft=scene.draft,
        draft_memory=MemoryKind.RECURRENT,
        draft_rs_bytes=16,
        n_ctx_checkpoints=scene.cap,
        checkpoint_min_step=0,
        cache_ram=-1,
    )
    srv = Server(cfg, v)
    heap = srv.heap
    slot = srv.slots[0]
    tokens = tuple(range(1, 40))
    slot.prompt.tokens = tokens
    for ctx in srv.contexts():
        ctx.seqs[0].decode(tokens)
    for i in range(scene.slot_ckpts):
        hold(heap, slot.prompt, _ckpt(srv, v, 2 + 2 * i))
    for n, (k, filled) in enumerate(scene.entries):
        own = [_ckpt(srv, v, 3 + 2 * i) for i in range(k)]
        stage_entry(srv, v, (500 + n,), own, filled, lambda ctx: ctx.get_size(0, 0))
    if scene.fault != "none":
        heap.faults.arm(scene.fault)
    return srv


def _ckpt(srv: Server, v: Design, n_tokens: int) -> Checkpoint:
    heap = srv.heap
    ck = Checkpoint(heap.new_id(), n_tokens, 0, n_tokens - 1, n_tokens - 1)
    ck.tgt = heap.allocate(48, "ckpt_tgt", v.zero_init)
    heap.fill(ck.tgt, ("payload", n_tokens), 48)
    return ck


@dataclass
class Designation:
    """Model objects (by id) to the designated constants' indices, assigned on first sight."""

    holders: dict[str, int] = field(default_factory=dict)  # "slot" | "entry:ID"
    ckpts: dict[int, int] = field(default_factory=dict)
    bufs: dict[int, int] = field(default_factory=dict)

    def h(self, key: str) -> int:
        return self.holders.setdefault(key, len(self.holders))

    def c(self, ck: Checkpoint) -> int:
        return self.ckpts.setdefault(ck.id, len(self.ckpts))

    def b(self, buf: Buffer) -> int:
        return self.bufs.setdefault(buf.id, len(self.bufs))

    def spare_b(self) -> int:
        """A buffer no model object is: for a parameter the model did not use."""
        return self.bufs.setdefault(-len(self.bufs) - 1, len(self.bufs))

    def spare_c(self) -> int:
        """A checkpoint object no model object is."""
        return self.ckpts.setdefault(-len(self.ckpts) - 1, len(self.ckpts))


def read(srv: Server, d: Designation, made: set[int]) -> dict[tuple[Any, ...], Any]:
    """The world's non-ghost arrays at every existing element."""
    vals: dict[tuple[Any, ...], Any] = {}
    holders: list[tuple[int, list[Checkpoint], CacheEntry | None, bool]] = [
        (d.h("slot"), srv.slots[0].prompt.checkpoints, None, True)
    ]
    assert srv.cache is not None
    for e in srv.cache.entries:
        holders.append((d.h(f"entry:{e.id}"), e.prompt.checkpoints, e, False))
    for _, ckpts, _, _ in holders:  # designate every object before reading who holds what
        for ck in ckpts:
            d.c(ck)
    for hi, ckpts, entry, is_slot in holders:
        vals[("slot", hi)] = is_slot
        vals[("cache", hi)] = entry is not None
        vals[("building", hi)] = False
        held = {d.c(ck) for ck in ckpts}
        for ck in ckpts:
            made.add(d.c(ck))
            vals[("meta", d.c(ck))] = ck.n_tokens
            assert ck.tgt is not None
            vals[("pay", d.c(ck))] = d.b(ck.tgt)
            _buf(vals, d, ck.tgt)
        for ci in list(d.ckpts.values()):
            vals[("holds", hi, ci)] = ci in held
        if entry is not None:
            vals[("has_main", hi)] = entry.main is not None
            vals[("has_drft", hi)] = entry.drft is not None
            for key, buf in (("main", entry.main), ("drft", entry.drft)):
                if buf is not None:
                    vals[(key, hi)] = d.b(buf)
                    _buf(vals, d, buf)
    for ci in d.ckpts.values():
        vals[("made", ci)] = ci in made
    return vals


def _buf(vals: dict[tuple[Any, ...], Any], d: Designation, buf: Buffer) -> None:
    bi = d.b(buf)
    vals[("alloc", bi)] = True
    vals[("ver", bi)] = buf.version
    vals[("zeroed", bi)] = buf.zeroed
    vals[("full", bi)] = buf.complete


# -- the encoding side ------------------------------------------------------------------------


class Relation:
    """One world operation with free pre-state and parameters (see the module docstring)."""

    def __init__(self, v: Design, op: str) -> None:
        self.v, self.op = v, op
        self.e = encode(v)[0]  # what the encodings read of the design
        b = self.b = Build(f"world conformance {op} {v.name}")
        so = self.so = sorts(b)
        self.H = [b.const(f"H{i}", so.H) for i in range(NH)]
        self.C = [b.const(f"C{i}", so.C) for i in range(NC)]
        self.B = [b.const(f"B{i}", so.B) for i in range(NB)]
        b.assume(z3.Distinct(*self.H), z3.Distinct(*self.C), z3.Distinct(*self.B))
        self.pre = fresh(b, "pre", so)
        self.params: dict[str, Term] = {}

        def h(n: str) -> Term:
            return self.params.setdefault(n, b.const(n, so.H))

        def c(n: str) -> Term:
            return self.params.setdefault(n, b.const(n, so.C))

        def buf(n: str) -> Term:
            return self.params.setdefault(n, b.const(n, so.B))

        def flag(n: str) -> Term:
            return self.params.setdefault(n, b.bool(n))

        w, read_flag = self.pre, b.false
        if op in ("create", "create_short"):
            meta = self.params["meta"] = b.int("meta")
            w = ops.create(
                b, self.e, w, h("s"), c("c"), buf("buf"), meta, op == "create", c("victim"), flag("has_victim")
            ).world
        elif op == "save":
            w = ops.entry_build(
                b, self.e, so, w, h("s"), h("e"), buf("mb"), buf("db"), flag("has_drft"), flag("ok_main"),
                flag("ok_drft"),
            ).world
            if v.sharing != Sharing.SHARED_OBJECT:
                for i in range(COPIES):
                    w = ops.entry_copy(
                        b, self.e, w, h("s"), h("e"), c(f"src{i}"), c(f"copy{i}"), buf(f"xb{i}"), when=flag(f"do{i}")
                    ).world
            w = ops.entry_publish(b, self.e, so, w, h("e")).world
        elif op == "load":
            did = ops.load(b, self.e, so, w, h("e"), h("s"), flag("fail_tgt"), flag("fail_dft"))
            w, read_flag = did.world, did.unwritten_read
        elif op == "drop":
            w = ops.drop(b, w, h("s"), c("c")).world
        elif op == "clear":
            w = ops.clear(b, so, w, h("s")).world
        else:  # evict
            w = ops.evict(b, so, w, h("e")).world
        self.post = w
        self.read_flag = read_flag
        self.solver = z3.Solver(ctx=b.ctx)
        self.solver.add(*b.facts)

    def term(self, w: World, key: tuple[Any, ...]) -> Term:
        """The world's array ``key[0]`` at the designated elements ``key[1:]``."""
        name, *idx = key
        arr = getattr(w, name)
        for kind, i in zip(INDEXED_BY[name], idx, strict=True):
            arr = arr[{"H": self.H, "C": self.C, "B": self.B}[kind][i]]
        return arr

    def value(self, key: tuple[Any, ...], v: Any) -> Term:
        if key[0] in ("pay", "main", "drft"):
            return self.B[v]
        return v

    def agrees(
        self,
        pre: dict[tuple[Any, ...], Any],
        params: dict[str, Any],
        post: dict[tuple[Any, ...], Any],
        read: bool,
        crash: bool,
    ) -> str:
        given = [self.term(self.pre, k) == self.value(k, v) for k, v in pre.items()]
        for name, val in params.items():
            if name not in self.params:  # this operation does not take it
                continue
            p = self.params[name]
            kind = p.sort().name()
            given.append(p == ({"H": self.H, "C": self.C, "B": self.B}[kind][val] if kind in "HCB" else val))
        want: dict[Any, tuple[Term, Any]] = {k: (self.term(self.post, k), self.value(k, v)) for k, v in post.items()}
        want.update({"unwritten read": (self.read_flag, read), "crash": (self.post.crash, crash)})
        return agreement(self.solver, given, want)


def run(
    scene: WorldScene, v: Design, op: str
) -> tuple[dict[tuple[Any, ...], Any], dict[str, Any], dict[tuple[Any, ...], Any], bool, bool]:
    """(pre, params, post, unwritten read, crash) of the model running ``op`` on the scene."""
    srv = stage(scene, v)
    d = Designation()
    made: set[int] = set()
    pre = read(srv, d, made)
    params: dict[str, Any] = {"s": d.h("slot")}
    start = len(srv.heap.events)
    run_op = {"create": _create, "create_short": _create, "save": _save, "load": _load, "evict": _evict}
    run_op.update({"drop": _drop, "clear": _clear})
    crash = run_op[op](srv, scene, d, params)
    unwritten = any(isinstance(e, ev.UninitLoaded) for e in srv.heap.events[start:])
    # Objects the operation created did not exist before: nobody held them.
    for ci in d.ckpts.values():
        if ("made", ci) not in pre:
            pre[("made", ci)] = False
            for hi in range(len(d.holders)):
                pre[("holds", hi, ci)] = False
    if crash:  # the process is gone: nothing else is compared
        return pre, params, {}, unwritten, True
    post = read(srv, d, made)
    for key in list(pre):  # a holder no longer listed (an entry gone) holds nothing, is cached nowhere
        if key[0] == "cache" and key not in post:
            post[key] = False
    for hi, ci in itertools.product(range(len(d.holders)), d.ckpts.values()):
        post.setdefault(("holds", hi, ci), False)
    return pre, params, post, unwritten, False


def _create(srv: Server, scene: WorldScene, d: Designation, params: dict[str, Any]) -> bool:
    """processing.create_checkpoint for a task on the slot; the parameters are what it did:
    which checkpoint the cap dropped, the new object, its buffer (unless recycled)."""
    slot = srv.slots[0]
    before = list(slot.prompt.checkpoints)
    slot.task = Task(7, slot.prompt.tokens)
    n = len(slot.prompt.tokens)
    try:
        create_checkpoint(srv, slot, 4, n - 5, n - 5)
    except Abort:
        return True
    finally:
        gone = [ck for ck in before if ck not in slot.prompt.checkpoints]
        new = [ck for ck in slot.prompt.checkpoints if ck not in before]
        params["has_victim"] = bool(gone)
        params["victim"] = d.c(gone[0]) if gone else d.spare_c()
        params["c"] = d.c(new[0]) if new else d.spare_c()
        recycled = bool(new and gone) and new[0].tgt is gone[0].tgt
        tgt = new[0].tgt if new else None
        params["buf"] = d.b(tgt) if tgt is not None and not recycled else d.spare_b()
        params["meta"] = n - 4
    return False


def _save(srv: Server, scene: WorldScene, d: Designation, params: dict[str, Any]) -> bool:
    """Slot.prompt_save; the parameters: the entry, its data buffers, what was copied."""
    assert srv.cache is not None
    slot = srv.slots[0]
    before = {e.id for e in srv.cache.entries}
    slot_list = list(slot.prompt.checkpoints)
    start = len(srv.heap.events)
    slot.prompt_save(srv)
    created = [e for e in srv.cache.entries if e.id not in before]
    allocs = [(e.buf, e.role) for e in srv.heap.events[start:] if isinstance(e, ev.Alloc)]
    data = {role: bid for bid, role in allocs if role in ("main", "drft")}
    params["e"] = d.h(f"entry:{created[0].id}") if created else d.h("entry:new")
    params["mb"] = d.bufs.setdefault(data["main"], len(d.bufs)) if "main" in data else d.spare_b()
    params["db"] = d.bufs.setdefault(data["drft"], len(d.bufs)) if "drft" in data else d.spare_b()
    params["has_drft"] = scene.draft
    params["ok_main"] = scene.fault != "save.read.tgt"
    params["ok_drft"] = scene.fault != "save.read.dft"
    if srv.design.sharing != Sharing.SHARED_OBJECT:
        copies = created[0].prompt.checkpoints if created else []  # a dropped entry's are gone
        copied = [bid for bid, role in allocs if role not in ("main", "drft")]
        for i in range(COPIES):
            params[f"do{i}"] = i < len(slot_list)
            params[f"src{i}"] = d.c(slot_list[i]) if i < len(slot_list) else d.spare_c()
            params[f"copy{i}"] = d.c(copies[i]) if i < len(copies) else d.spare_c()
            params[f"xb{i}"] = d.bufs.setdefault(copied[i], len(d.bufs)) if i < len(copied) else d.spare_b()
    return False


def _load(srv: Server, scene: WorldScene, d: Designation, params: dict[str, Any]) -> bool:
    """The slot loads the first entry (a prompt extending it), as get_available_slot does:
    Slot.prompt_load, and prompt_clear when it fails."""
    assert srv.cache is not None
    slot = srv.slots[0]
    e = srv.cache.entries[0]
    params["e"] = d.h(f"entry:{e.id}")
    params["fail_tgt"] = scene.fault == "load.write.tgt"
    params["fail_dft"] = scene.fault == "load.write.dft"
    if not slot.prompt_load(srv, (*e.prompt.tokens, 999)):
        slot.prompt_clear(srv)
    return False


def _drop(srv: Server, scene: WorldScene, d: Designation, params: dict[str, Any]) -> bool:
    """processing's erasure of one of the slot's checkpoints (cap, sweep, supersede, ...)."""
    slot = srv.slots[0]
    if not slot.prompt.checkpoints:
        params["c"] = d.spare_c()
        return False
    ck = slot.prompt.checkpoints[-1]
    params["c"] = d.c(ck)
    slot.task = Task(7, slot.prompt.tokens)
    erase_checkpoint(srv, slot, ck, "invalidated")
    return False


def _clear(srv: Server, scene: WorldScene, d: Designation, params: dict[str, Any]) -> bool:
    srv.slots[0].prompt_clear(srv)
    return False


def _evict(srv: Server, scene: WorldScene, d: Designation, params: dict[str, Any]) -> bool:
    assert srv.cache is not None
    e = srv.cache.entries[0]
    params["e"] = d.h(f"entry:{e.id}")
    srv.cache.evict(e, "conformance")
    return False
