"""REF family: reference counts agree with the holders (counted afresh from the state, not
from the counts the model keeps), nothing referenced is freed, nothing unreferenced stays
live. (The same holder graph as ``pcspec.model.ownership.graph``, counted without building
a networkx graph: this check runs after every operation of every fuzzing step.)"""

from __future__ import annotations

from collections.abc import Sequence

from pcspec.model.checkpoint import Checkpoint
from pcspec.model.heap import Buffer, Event
from pcspec.model.server import Server
from pcspec.properties.base import holders_of


def ref1_refcounts_match_holders(srv: Server, events: Sequence[Event]) -> list[str]:
    ckpt_holders: dict[int, list[str]] = {}
    ckpts: dict[int, Checkpoint] = {}
    buf_holders: dict[int, list[str]] = {}
    bufs: dict[int, Buffer] = {}
    for h in holders_of(srv, events):
        for b in h.data:
            bufs[b.id] = b
            buf_holders.setdefault(b.id, []).append(h.name)
        for ck in h.checkpoints:
            ckpts[ck.id] = ck
            ckpt_holders.setdefault(ck.id, []).append(h.name)
    for ck in ckpts.values():
        for b in ck.buffers():
            bufs[b.id] = b
            buf_holders.setdefault(b.id, []).append(f"ckpt:{ck.id}")
    out: list[str] = []
    for cid, ck in ckpts.items():
        if ck.refs != len(ckpt_holders[cid]):
            who = ckpt_holders[cid]
            out.append(f"{ck.describe()} has refcount {ck.refs} but {len(who)} holders {who}")
    for bid, b in bufs.items():
        who = buf_holders[bid]
        if b.freed:
            out.append(f"buffer #{b.id} ({b.role}, {b.size} B) is freed but still held by {who}")
        elif b.refs != len(who):
            out.append(f"buffer #{b.id} ({b.role}) has refcount {b.refs} but {len(who)} holders {who}")
    for b in srv.heap.live.values():
        if b.id not in bufs:
            out.append(f"buffer #{b.id} ({b.role}, {b.size} B) is live but nothing holds it (leak)")
    return out
