"""Bounded search for an IMM or UNINIT violation, from the server's start, over the canvas.

The same ``World`` builders as the proofs (``world_ops``), over the same uninterpreted sorts,
with every object a request can create designated in advance: the slot ``S``; entry ``E[t]``
(the prompt of step ``t``, saved by request ``t + 1``) with data buffers ``MB[t]``,
``DB[t]``; checkpoint ``K[t]`` (created by request ``t``) with payload ``PB[t]``; and the
entry's copies of each checkpoint the slot may hold (``shared_payload``, ``deep_copy``).
Designated objects are distinct constants, so every operation is quantifier-free; only the
violated property is an existential, which the solver skolemizes.

Which objects the slot may hold at a step is over-approximated in Python (anything it could
have come to hold); which it does hold is the search's. The canvas has no byte limit here:
nothing is evicted but obsolete entries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import z3

from pcspec.model.design import Sharing
from pcspec.proofs import world_ops as ops
from pcspec.proofs import world_props as props
from pcspec.proofs.build import Build, Term
from pcspec.proofs.cache_ops import FAULTS
from pcspec.proofs.canvas import BACK, EXTEND, FORK, LOAD_DFT, LOAD_TGT, NEW, Controls, ancestry, controls
from pcspec.proofs.encoded import Encoded
from pcspec.proofs.world import Sorts, World, initial, sorts

READ_TGT, READ_DFT = FAULTS.index("save.read.tgt"), FAULTS.index("save.read.dft")


@dataclass
class _Objects:
    b: Build
    so: Sorts
    holders: list[Term] = field(default_factory=list)
    ckpts: list[Term] = field(default_factory=list)
    bufs: list[Term] = field(default_factory=list)
    rank: dict[int, int] = field(default_factory=dict)  # checkpoint -> its place in any list

    def holder(self, name: str) -> Term:
        x = self.b.const(name, self.so.H)
        self.holders.append(x)
        return x

    def ckpt(self, name: str, rank: int) -> Term:
        x = self.b.const(name, self.so.C)
        self.ckpts.append(x)
        self.rank[x.get_id()] = rank
        return x

    def buf(self, name: str) -> Term:
        x = self.b.const(name, self.so.B)
        self.bufs.append(x)
        return x


# Which property, judged on the world after the last request (and its unwritten reads).
Check = Callable[[Build, Sorts, World, props.Domain], Term]
CHECKS: dict[str, Check] = {
    "IMM-1": props.imm1,
    "IMM-2": props.imm2,
    "UNINIT-1": props.uninit1,
}


def build(v: Encoded, pid: str, depth: int) -> tuple[Build, Term, Controls]:
    b = Build(f"search {pid} {v.name} depth {depth}")
    so = sorts(b)
    ctl = controls(
        b, depth, (NEW, EXTEND, FORK, BACK), (0, READ_TGT, READ_DFT, LOAD_TGT, LOAD_DFT), limit=False, cap=None
    )
    o = _Objects(b, so)
    S = o.holder("S")
    w = initial(b, so, [S])
    anc = ancestry(b, ctl, depth)
    possible: list[list[Term]] = []  # the checkpoints the slot may hold after each step
    entry_objs: list[list[Term]] = []  # ... that entry t may hold
    entries: list[Term] = []
    reads: list[Term] = []
    for t in range(depth + 1):
        kind, fault = ctl.kind[t], ctl.fault[t]
        may = list(possible[-1]) if possible else []
        if t >= 1:
            e = o.holder(f"E{t - 1}")
            entries.append(e)
            w, objs = _save(b, v, so, o, w, S, e, t, may, entries, fault, ctl, anc)
            entry_objs.append(objs)
            # back(a): the entry of step a is loaded, if the save left it in the cache
            w = _back(b, v, so, ctl, w, S, t, entries, fault, reads)
            for a in range(t - 1):
                may += [x for x in entry_objs[a] if x not in may]
        k = o.ckpt(f"K{t}", t)
        w = _process(b, v, so, o, ctl, w, S, t, kind, may, k, reads)
        possible.append([*may, k])
    distinct = [xs for xs in (o.holders, o.ckpts, o.bufs) if len(xs) > 1]
    b.assume(*(z3.Distinct(*xs) for xs in distinct))
    b.assume(z3.Not(w.crash))
    last_read = reads[-1] if reads else b.false
    dom = props.Domain(o.holders, o.ckpts)
    goal = last_read if pid == "UNINIT-2" else z3.Not(CHECKS[pid](b, so, w, dom))
    return b, goal, ctl


def _save(
    b: Build,
    v: Encoded,
    so: Sorts,
    o: _Objects,
    w: World,
    S: Term,
    e: Term,
    t: int,
    may: list[Term],
    entries: list[Term],
    fault: Term,
    ctl: Controls,
    anc: list[list[Term]],
) -> tuple[World, list[Term]]:
    """Request ``t`` saves the slot's prompt (step ``t - 1``) as entry ``e``."""
    b.assume(z3.Implies(fault == READ_DFT, ctl.draft))
    ok_main, ok_drft = fault != READ_TGT, fault != READ_DFT
    w = ops.entry_build(b, v, so, w, S, e, o.buf(f"MB{t - 1}"), o.buf(f"DB{t - 1}"), ctl.draft, ok_main, ok_drft).world
    objs = list(may)
    if v.sharing != Sharing.SHARED_OBJECT:
        objs = []
        for x in may:
            copy = o.ckpt(f"X{t - 1}.{len(objs)}", o.rank[x.get_id()])
            w = ops.entry_copy(b, v, w, S, e, x, copy, o.buf(f"XB{t - 1}.{len(objs)}"), when=w.holds[S][x]).world
            objs.append(copy)
    before = w
    w = ops.entry_publish(b, v, so, w, e).world
    # Obsolete entries (a prefix of this prompt) go: inside alloc for the C++, only once the
    # entry is in for the transactional save.
    removes = b.true if v.save_protocol != "transactional" else w.cache[e]
    for a, old in enumerate(entries[:-1]):
        w = ops.evict(b, so, w, old, when=z3.And(removes, anc[a][t - 1], before.cache[old])).world
    return w, objs


def _back(
    b: Build,
    v: Encoded,
    so: Sorts,
    ctl: Controls,
    w: World,
    S: Term,
    t: int,
    entries: list[Term],
    fault: Term,
    reads: list[Term],
) -> World:
    """A ``back(a)`` move loads entry ``a`` (which must still be in the cache)."""
    b.assume(z3.Implies(fault == LOAD_DFT, ctl.draft))
    b.assume(z3.Implies(z3.Or(fault == LOAD_TGT, fault == LOAD_DFT), ctl.kind[t] == BACK))
    read = b.false
    for a in range(t - 1):
        go = z3.And(ctl.kind[t] == BACK, ctl.back[t] == a)
        b.assume(z3.Implies(go, w.cache[entries[a]]))
        did = ops.load(b, v, so, w, entries[a], S, fault == LOAD_TGT, fault == LOAD_DFT, when=go)
        w, read = did.world, z3.Or(read, did.unwritten_read)
    reads.append(read)
    return w


def _process(
    b: Build,
    v: Encoded,
    so: Sorts,
    o: _Objects,
    ctl: Controls,
    w: World,
    S: Term,
    t: int,
    kind: Term,
    may: list[Term],
    k: Term,
    reads: list[Term],
) -> World:
    """The prompt is processed: ``new`` invalidates every checkpoint, ``fork`` restores the
    oldest and invalidates the rest; then checkpoint ``t`` is created, the cap dropping the
    oldest (whose buffer ``inplace-update`` recycles) -- but never, under ``keep_restored``,
    the checkpoint this task restored."""
    if may:
        w = ops.clear(b, so, w, S, when=kind == NEW).world
        oldest = [
            b.bool(f"root{t}.{i}", z3.And(w.holds[S][x], a == 0))
            for i, (x, a) in enumerate(
                zip(may, _ahead(b, o, [w.holds[S][y] for y in may], may, f"before_fork{t}"), strict=True)
            )
        ]
        fork = kind == FORK
        read = b.false
        for x, first in zip(may, oldest, strict=True):
            did = ops.restore(b, w, S, x, when=z3.And(fork, first))
            read = z3.Or(read, did.unwritten_read)
            w = ops.drop(b, w, S, x, when=z3.And(fork, z3.Not(first), w.holds[S][x])).world
        if reads:
            reads[-1] = z3.Or(reads[-1], read)
        else:
            reads.append(read)
        # the cap: while size >= n_ctx_checkpoints, erase the front
        held = b.int(f"held{t}", b.sum([z3.If(w.holds[S][x], 1, 0) for x in may]))
        excess = b.int(f"excess{t}", z3.If(held - ctl.cap + 1 > 0, held - ctl.cap + 1, 0))
        kept = [z3.And(fork, r, b.val(v.keep_restored)) for r in oldest]
        cands = [
            b.bool(f"evictable{t}.{i}", z3.And(w.holds[S][x], z3.Not(k_)))
            for i, (x, k_) in enumerate(zip(may, kept, strict=True))
        ]
        ahead = _ahead(b, o, cands, may, f"ahead{t}")
        victims = [b.bool(f"victim{t}.{i}", z3.And(c_, ahead[i] < excess)) for i, c_ in enumerate(cands)]
        first = [z3.And(vi, ahead[i] == 0) for i, vi in enumerate(victims)]
        for x, vi, f in zip(may, victims, first, strict=True):
            w = ops.drop(b, w, S, x, when=z3.And(vi, z3.Not(f))).world
        has_victim = b.any(first)
        victim = may[0]
        for x, f in zip(may[1:], first[1:], strict=True):
            victim = z3.If(f, x, victim)
        did = ops.create(b, v, w, S, k, o.buf(f"PB{t}"), b.val(t), True, victim, has_victim)
    else:
        reads.append(b.false)
        did = ops.create(b, v, w, S, k, o.buf(f"PB{t}"), b.val(t), True)
    return did.world


def _ahead(b: Build, o: _Objects, member: list[Term], may: list[Term], name: str) -> list[Term]:
    """For each possible object: how many members (held, or evictable) come before it in the
    slot's list."""
    out = []
    for i, x in enumerate(may):
        r = o.rank[x.get_id()]
        before = [z3.If(m, 1, 0) for y, m in zip(may, member, strict=True) if o.rank[y.get_id()] < r]
        out.append(b.int(f"{name}.{i}", b.sum(before)))
    return out
