"""STATE, NOABORT and PERF-1: memory agrees with bookkeeping, the server never aborts, and
copies of a prompt copy no checkpoint payload."""

from __future__ import annotations

from collections.abc import Sequence

from pcspec.model import events as ev
from pcspec.model.events import Event
from pcspec.properties.base import events_of, on_events
from pcspec.properties.view import StateView


def state1_memory_matches_tokens(srv: StateView, events: Sequence[Event]) -> list[str]:
    out: list[str] = []
    contexts = srv.contexts()
    for s in srv.slots:
        for ctx in contexts:
            mem = ctx.seqs[s.id]
            if not mem.is_state_of(s.prompt.tokens):
                what = (
                    "garbage"
                    if mem.garbage
                    else f"{mem.n_tokens} tokens"
                    + ("" if mem.attn == mem.part or not mem.has_part or not mem.has_attn else " (parts disagree)")
                )
                out.append(
                    f"slot {s.id}: context {ctx.name} memory holds {what}, but the slot bookkeeps "
                    f"{s.prompt.n_tokens} tokens"
                    + ("" if mem.n_tokens != s.prompt.n_tokens or mem.garbage else " (different tokens)")
                )
    return out


@on_events(ev.Crash)
def noabort1_no_crash(srv: StateView, events: Sequence[Event]) -> list[str]:
    return [f"the server aborted at {e.where}: {e.message}" for e in events_of(events, ev.Crash)]


@on_events(ev.Stall)
def progress1_no_stall(srv: StateView, events: Sequence[Event]) -> list[str]:
    """A ``stall`` is a pass in which a slot processing a prompt added no token and did not
    finish: the model is deterministic and nothing but that slot's release changes its
    state, so every later pass repeats it (the real server loops forever, answering
    nothing, docs/FINDINGS.md, F1)."""
    return [
        f"slot {e.slot} holds {e.n_tokens} tokens for a prompt of {e.n_prompt}: "
        f"task {e.task} never finishes (the server loops without decoding)"
        for e in events_of(events, ev.Stall)
    ]


@on_events(ev.CopyPayload)
def perf1_no_payload_copies(srv: StateView, events: Sequence[Event]) -> list[str]:
    copies = events_of(events, ev.CopyPayload)
    if not copies:
        return []
    total = sum(e.bytes for e in copies)
    return [f"{len(copies)} checkpoint payload buffers deep-copied ({total} bytes)"]
