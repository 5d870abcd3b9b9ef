"""RB family: a failed save rolls back (#30137 pops the entry; point 3 of the #30137 review).

RB-1 is judged on the state (no entry holds a partial or zero-filled state), RB-2 on each save
that returned false (the cache as the judge saw it before and after the save,
``pcspec.properties.history``; a save skipped because the prompt is cached already may reorder
the entries, a design's count of a use, and nothing else), RB-3 on crashes inside a save.
"""

from __future__ import annotations

from collections.abc import Sequence

from pcspec.model import events as ev
from pcspec.model.events import Event
from pcspec.properties.base import events_of, history_of, needs, on_events, on_storage
from pcspec.properties.view import StateView


@on_storage
def rb1_no_partial_entry(srv: StateView, events: Sequence[Event]) -> list[str]:
    if srv.cache is None:
        return []
    out: list[str] = []
    for e in srv.cache.entries:
        for b in e.data_buffers():
            if not b.complete:
                out.append(
                    f"cache entry #{e.id} ({e.prompt.n_tokens} tokens) holds a partial {b.role} state: "
                    f"{b.filled} of {b.size} bytes filled"
                    + (" (rest zero-filled)" if b.zeroed else " (rest never written)")
                )
    return out


@on_events(ev.SaveEnd)
@needs("saves")
def rb2_failed_save_changes_nothing(srv: StateView, events: Sequence[Event]) -> list[str]:
    out: list[str] = []
    for e in history_of(events).saves:
        if e.ok or e.before == e.after:
            continue
        if e.skipped and e.before and e.after and e.before[0] == e.after[0] and sorted(e.before[1]) == sorted(
                e.after[1]):
            continue  # a save skipped as cached already may count a use: the same entries, reordered
        before, after = e.before, e.after
        ids_before = [t[0] for t in before[1]] if before else []
        ids_after = [t[0] for t in after[1]] if after else []
        gone = [i for i in ids_before if i not in ids_after]
        limit = "" if not before or before[0] == after[0] else f"; {_limit_change(before[0], after[0])}"
        out.append(
            f"a failed save of slot {e.slot} changed the cache: entries {ids_before} -> "
            f"{ids_after} (lost {gone}){limit}"
        )
    return out


@on_events(ev.Crash)
def rb3_alloc_failure_contained(srv: StateView, events: Sequence[Event]) -> list[str]:
    return [
        f"allocation failure during a save crashed the server at {e.where}: {e.message}"
        for e in events_of(events, ev.Crash)
        if "bad_alloc" in e.message and "alloc" in e.where
    ]


def _limit_change(old: int, new: int) -> str:
    """A byte limit's change in words (0 is no limit)."""
    was = "no byte limit" if old == 0 else f"a byte limit of {old}"
    now = "none" if new == 0 else f"{new}"
    return f"the cache had {was}, now {now}"
