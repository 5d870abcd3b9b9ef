"""FILE family: slot files round-trip, and corrupted ones are rejected cleanly (#26004's
appendix reader, seed 001: every length checked against the bytes left before allocating)."""

from __future__ import annotations

from collections.abc import Sequence

from pcspec.model.heap import Event
from pcspec.model.server import Server
from pcspec.properties.base import events_of, on_events


@on_events("crash", "file_restore", "file_restore_failed")
def file1_round_trip_and_rejection(srv: Server, events: Sequence[Event]) -> list[str]:
    out: list[str] = []
    ops = events_of(events, "op")
    restoring = bool(ops) and ops[0].data.get("name") == "slot_restore"
    if restoring:
        for e in events_of(events, "crash"):
            out.append(f"restoring slot file {ops[0].data.get('filename')!r} crashed the server: {e.data['message']}")
    cap = srv.cfg.n_ctx_checkpoints
    for e in events_of(events, "file_restore"):
        saved = e.data["saved"]
        if saved is None:
            continue
        tokens, ckpts = saved
        want = (tokens, tuple(ckpts)[-cap:] if cap > 0 else ())
        got = e.data["restored"]
        if got[0] != want[0]:
            out.append(
                f"slot file {e.data['filename']!r} restored {len(got[0])} tokens, not the {len(want[0])} it holds"
            )
        elif _meta(got[1]) != _meta(want[1]):
            out.append(
                f"slot file {e.data['filename']!r} restored checkpoints {_meta(got[1])},"
                f" not the {_meta(want[1])} it holds"
            )
    if srv.crash is None:
        # Consistent: whatever the slot holds after the rejection (cleared, or untouched when
        # the file could not even be opened), its memory is the state of its tokens.
        for e in events_of(events, "file_restore_failed"):
            slot = srv.slots[e.data["slot"]]
            if any(not c.seqs[slot.id].is_state_of(slot.prompt.tokens) for c in srv.contexts()):
                out.append(f"a rejected slot file ({e.data['reason']}) left slot {slot.id} inconsistent")
    return out


@on_events("file_write", "file_restore")
def file2_reported_bytes(srv: Server, events: Sequence[Event]) -> list[str]:
    out = [
        f"saving {e.data['filename']!r} reported n_written {e.data['n_written']} for a file of {e.data['size']} bytes"
        for e in events_of(events, "file_write")
        if e.data["n_written"] != e.data["size"]
    ]
    out += [
        f"restoring {e.data['filename']!r} reported n_read {e.data['n_read']} but the reader consumed "
        f"{e.data['consumed']} bytes"
        for e in events_of(events, "file_restore")
        if e.data["n_read"] != e.data["consumed"]
    ]
    return out


def _meta(ckpts: Sequence[tuple[object, ...]]) -> list[tuple[object, ...]]:
    return [c[:3] for c in ckpts]
