"""The log's typed line events as the shared vocabulary's records (``pcspec.model.logged``).

The model's events give their records through ``Event.logged()``; this is the log checker's
side of the same boundary: the lines a server logs of those happenings, read as the same
``Logged`` classes, so ``pcspec live`` compares the server with the model as a diff of two
streams of one vocabulary.

A cache line (``srv``) carries no slot id; the records that need none (cache saves, loads,
evictions) leave it out. The length of a loaded entry is not on the "found better prompt"
line: it is the candidate line's (``prompt with length N``) whose ``f_keep``/``f_sim`` it
repeats, when exactly one candidate does. A context shift drops every checkpoint in one line:
one ``CkptErased`` with no length.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pcspec.logcheck import events as ev
from pcspec.model.logged import (
    CacheEvicted,
    CacheLoaded,
    CacheLoadFailed,
    CacheSaved,
    CacheSkipped,
    CkptCreated,
    CkptErased,
    CkptRestored,
    FullReprocess,
    Logged,
    PromptCleared,
    Released,
    Selected,
)

_SAME = 5e-4  # two fractions printed with %.3f are the same number

# the record of each line kind that needs no other line
_RECORDS: dict[type[ev.Event], Callable[[Any], Logged]] = {
    ev.LoadRestoreFailed: lambda e: CacheLoadFailed(),
    ev.SlotSelected: lambda e: Selected(e.slot, e.how),
    ev.PromptSave: lambda e: CacheSaved(e.length),
    ev.CacheAlreadyCached: lambda e: CacheSkipped("contained"),
    ev.CacheOversize: lambda e: CacheSkipped("oversize"),
    ev.CacheObsoleteRemoved: lambda e: CacheEvicted("obsolete", e.length),
    ev.CacheMakeRoom: lambda e: CacheEvicted("make_room", None),
    ev.CacheLimitEvict: lambda e: CacheEvicted("limit_bytes", None),
    ev.CacheTokenEvict: lambda e: CacheEvicted("limit_tokens", None),
    ev.CheckpointRestored: lambda e: CkptRestored(e.slot, e.n_tokens, e.pos_min, e.pos_max, e.n_past),
    ev.FullReprocess: lambda e: FullReprocess(e.slot),
    ev.CheckpointCreated: lambda e: CkptCreated(e.slot, e.n_tokens, e.pos_min, e.pos_max),
    ev.CheckpointErasedOld: lambda e: CkptErased(e.slot, "cap", e.n_tokens),
    ev.CheckpointErasedTooClose: lambda e: CkptErased(e.slot, "too_close", e.n_tokens),
    ev.CheckpointSuperseded: lambda e: CkptErased(e.slot, "supersede", e.n_tokens),
    ev.CheckpointInvalidated: lambda e: CkptErased(e.slot, "invalidated", e.n_tokens),
    ev.ContextShift: lambda e: CkptErased(e.slot, "context_shift", None),
    ev.PromptCleared: lambda e: PromptCleared(e.slot, e.n_tokens),
    ev.SlotReleased: lambda e: Released(e.slot, e.n_tokens),
}


def logged(events: Iterable[ev.Event]) -> Iterator[Logged]:
    """The records of ``events``, in log order."""
    candidates: list[ev.LoadCandidate] = []
    for e in events:
        if isinstance(e, ev.LoadLookup):
            candidates = []
        elif isinstance(e, ev.LoadCandidate):
            candidates.append(e)
        elif isinstance(e, ev.LoadFound):
            same = [c for c in candidates if abs(c.f_keep - e.f_keep) < _SAME and abs(c.f_sim - e.f_sim) < _SAME]
            yield CacheLoaded(same[0].length if len(same) == 1 else None)
        elif (record := _RECORDS.get(type(e))) is not None:
            yield record(e)
