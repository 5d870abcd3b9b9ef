"""UNINIT family: no uninitialized heap byte is reachable, loaded, or written to a file.

#30137 stopped zero-filling state buffers; that is safe only while every fill is validated
(the security note of the #30137 review). Zero-filled bytes are initialized (they are not the
state, which RB-1 and STATE-1 judge); unwritten bytes of a no-init buffer are not.
"""

from __future__ import annotations

from collections.abc import Sequence

from pcspec.model import events as ev
from pcspec.model.events import Event
from pcspec.properties.base import events_of, holders_of, on_events, on_storage
from pcspec.properties.view import StateView


@on_storage
def uninit1_no_unwritten_reachable(srv: StateView, events: Sequence[Event]) -> list[str]:
    out: list[str] = []
    for h in holders_of(srv, events):
        for b in h.data:
            if b.unwritten:
                out.append(f"{h.name} holds {b.role} buffer #{b.id} with {b.unwritten} of {b.size} bytes never written")
        for ck in h.checkpoints:
            for pb in (ck.tgt, ck.dft, ck.spec):  # ``ck.buffers()``, without building its list
                if pb is not None and pb.unwritten:
                    out.append(
                        f"{h.name} holds {ck.describe()} whose {pb.role} buffer #{pb.id} has "
                        f"{pb.unwritten} of {pb.size} bytes never written"
                    )
    return out


@on_events(ev.UninitLoaded, ev.FileWrite)
def uninit2_no_unwritten_loaded_or_written(srv: StateView, events: Sequence[Event]) -> list[str]:
    out = [
        f"{u.unwritten} unwritten bytes of buffer #{u.buf} loaded into context {u.ctx} sequence {u.seq}"
        for u in events_of(events, ev.UninitLoaded)
    ]
    out += [
        f"slot file {w.filename!r} written with {w.unwritten} unwritten bytes"
        for w in events_of(events, ev.FileWrite)
        if w.unwritten
    ]
    return out
