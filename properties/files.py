"""FILE family: slot files round-trip, and corrupted ones are rejected cleanly (#26004's
appendix reader: every length checked against the bytes left before allocating). What a file
held when the server wrote it is the judge's to remember (``pcspec.properties.history``)."""

from __future__ import annotations

from collections.abc import Sequence

from pcspec.model import events as ev
from pcspec.model.events import Event
from pcspec.properties.base import events_of, history_of, needs, on_events
from pcspec.properties.view import StateView


@on_events(ev.Crash, ev.FileRestore, ev.FileRestoreFailed)
@needs("files")
def file1_round_trip_and_rejection(srv: StateView, events: Sequence[Event]) -> list[str]:
    out: list[str] = []
    ops = events_of(events, ev.Op)
    restoring = bool(ops) and ops[0].name == "slot_restore"
    if restoring:
        for c in events_of(events, ev.Crash):
            out.append(f"restoring slot file {ops[0].args.get('filename')!r} crashed the server: {c.message}")
    cap = srv.cfg.n_ctx_checkpoints
    for e in history_of(events).restores:
        saved = e.saved
        if saved is None:
            continue
        tokens, ckpts = saved
        want = (tokens, tuple(ckpts)[-cap:] if cap > 0 else ())
        got = e.restored
        if got[0] != want[0]:
            out.append(f"slot file {e.filename!r} restored {len(got[0])} tokens, not the {len(want[0])} it holds")
        elif _meta(got[1]) != _meta(want[1]):
            out.append(
                f"slot file {e.filename!r} restored checkpoints {_meta(got[1])},"
                f" not the {_meta(want[1])} it holds"
            )
    if srv.crash is None:
        # Consistent: whatever the slot holds after the rejection (cleared, or untouched when
        # the file could not even be opened), its memory is the state of its tokens.
        for f in events_of(events, ev.FileRestoreFailed):
            slot = srv.slots[f.slot]
            if any(not c.seqs[slot.id].is_state_of(slot.prompt.tokens) for c in srv.contexts()):
                out.append(f"a rejected slot file ({f.reason}) left slot {slot.id} inconsistent")
    return out


@on_events(ev.FileWrite, ev.FileRestore)
def file2_reported_bytes(srv: StateView, events: Sequence[Event]) -> list[str]:
    out = [
        f"saving {w.filename!r} reported n_written {w.n_written} for a file of {w.size} bytes"
        for w in events_of(events, ev.FileWrite)
        if w.n_written != w.size
    ]
    out += [
        f"restoring {r.filename!r} reported n_read {r.n_read} but the reader consumed {r.consumed} bytes"
        for r in events_of(events, ev.FileRestore)
        if r.n_read != r.consumed
    ]
    return out


def _meta(ckpts: Sequence[tuple[object, ...]]) -> list[tuple[object, ...]]:
    return [c[:3] for c in ckpts]
