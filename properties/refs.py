"""REF family: reference counts agree with the holders (the ownership graph rebuilt from
the state), nothing referenced is freed, nothing unreferenced stays live."""

from __future__ import annotations

from collections.abc import Sequence

from pcspec.model.checkpoint import Checkpoint
from pcspec.model.heap import Buffer, Event
from pcspec.model.ownership import graph
from pcspec.model.server import Server


def ref1_refcounts_match_holders(srv: Server, events: Sequence[Event]) -> list[str]:
    g = graph(srv)
    out: list[str] = []
    referenced: set[int] = set()
    for node, data in g.nodes(data=True):
        obj = data.get("obj")
        holders = sorted(g.predecessors(node))
        if isinstance(obj, Checkpoint) and obj.refs != len(holders):
            out.append(f"{obj.describe()} has refcount {obj.refs} but {len(holders)} holders {holders}")
        elif isinstance(obj, Buffer):
            referenced.add(obj.id)
            if obj.freed:
                out.append(f"buffer #{obj.id} ({obj.role}, {obj.size} B) is freed but still held by {holders}")
            elif obj.refs != len(holders):
                out.append(
                    f"buffer #{obj.id} ({obj.role}) has refcount {obj.refs} but {len(holders)} holders {holders}"
                )
    for b in srv.heap.live.values():
        if b.id not in referenced:
            out.append(f"buffer #{b.id} ({b.role}, {b.size} B) is live but nothing holds it (leak)")
    return out
