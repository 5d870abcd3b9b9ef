"""REF family: reference counts agree with the holders (counted afresh from the state, not
from the counts the model keeps), nothing referenced is freed, nothing unreferenced stays
live. (The same holder graph as ``pcspec.model.ownership.graph``, counted without building
a networkx graph: this check runs after every operation of every fuzzing step.)"""

from __future__ import annotations

from collections.abc import Sequence

from pcspec.model.events import Event
from pcspec.model.heap import Buffer
from pcspec.properties.base import held_checkpoints, holders_of, on_storage
from pcspec.properties.view import StateView


@on_storage
def ref1_refcounts_match_holders(srv: StateView, events: Sequence[Event]) -> list[str]:
    # buffer id -> (the buffer, its holders' names): holders' data buffers in holder order,
    # then each checkpoint's payload (as ``pcspec.model.ownership.graph`` lists the edges)
    bufs: dict[int, tuple[Buffer, list[str]]] = {}
    for h in holders_of(srv, events):
        for b in h.data:
            got = bufs.get(b.id)
            if got is None:
                bufs[b.id] = (b, [h.name])
            else:
                bufs[b.id] = (b, got[1])  # (the last object of an id is the one judged)
                got[1].append(h.name)
    ckpts = held_checkpoints(srv, events)
    for ck, _names in ckpts.values():
        name = f"ckpt:{ck.id}"
        for pb in (ck.tgt, ck.dft, ck.spec):
            if pb is None:
                continue
            got = bufs.get(pb.id)
            if got is None:
                bufs[pb.id] = (pb, [name])
            else:
                bufs[pb.id] = (pb, got[1])
                got[1].append(name)
    out: list[str] = []
    for ck, who in ckpts.values():
        if ck.refs != len(who):
            out.append(f"{ck.describe()} has refcount {ck.refs} but {len(who)} holders {who}")
    for b, who in bufs.values():
        if b.freed:
            out.append(f"buffer #{b.id} ({b.role}, {b.size} B) is freed but still held by {who}")
        elif b.refs != len(who):
            out.append(f"buffer #{b.id} ({b.role}) has refcount {b.refs} but {len(who)} holders {who}")
    for b in srv.heap.live.values():
        if b.id not in bufs:
            out.append(f"buffer #{b.id} ({b.role}, {b.size} B) is live but nothing holds it (leak)")
    return out
