"""The log checker's typed events (``pcspec.logcheck.events``) as comparison records.

A cache line (``srv``) carries no slot id; the records that need none (cache saves, loads,
evictions) leave it out. The length of a loaded entry is not on the "found better prompt" line:
it is the candidate line (``prompt with length N``) whose ``f_keep``/``f_sim`` it repeats.
"""

from __future__ import annotations

from collections.abc import Iterable

from pcspec.live import records as r
from pcspec.logcheck import events as ev


def records(events: Iterable[ev.Event]) -> list[r.Record]:
    out: list[r.Record] = []
    candidates: list[ev.LoadCandidate] = []
    loading: int | None = None  # length of the entry being loaded, once "found better" is seen
    for e in events:
        if isinstance(e, ev.LoadLookup):
            candidates = []
        elif isinstance(e, ev.LoadCandidate):
            candidates.append(e)
        elif isinstance(e, ev.LoadFound):
            same = [c for c in candidates if abs(c.f_keep - e.f_keep) < 5e-4 and abs(c.f_sim - e.f_sim) < 5e-4]
            loading = same[0].length if len(same) == 1 else None
            out.append(r.CacheLoaded(loading))
        elif isinstance(e, ev.LoadRestoreFailed):
            out.append(r.CacheLoadFailed())
        elif isinstance(e, ev.SlotSelected):
            out.append(r.Selected(e.slot, e.how))
        elif isinstance(e, ev.PromptSave):
            out.append(r.CacheSaved(e.length))
        elif isinstance(e, ev.CacheAlreadyCached):
            out.append(r.CacheSkipped("contained"))
        elif isinstance(e, ev.CacheOversize):
            out.append(r.CacheSkipped("oversize"))
        elif isinstance(e, ev.CacheObsoleteRemoved):
            out.append(r.CacheEvicted("obsolete", e.length))
        elif isinstance(e, ev.CacheMakeRoom):
            out.append(r.CacheEvicted("make_room", None))
        elif isinstance(e, ev.CacheLimitEvict):
            out.append(r.CacheEvicted("limit_bytes", None))
        elif isinstance(e, ev.CacheTokenEvict):
            out.append(r.CacheEvicted("limit_tokens", None))
        elif isinstance(e, ev.CheckpointRestored):
            out.append(r.CkptRestored(e.slot, e.n_tokens, e.pos_min, e.pos_max, e.n_past))
        elif isinstance(e, ev.FullReprocess):
            out.append(r.FullReprocess(e.slot))
        elif isinstance(e, ev.CheckpointCreated):
            out.append(r.CkptCreated(e.slot, e.n_tokens, e.pos_min, e.pos_max))
        elif isinstance(e, ev.CheckpointErasedOld):
            out.append(r.CkptErased(e.slot, "cap", e.n_tokens))
        elif isinstance(e, ev.CheckpointErasedTooClose):
            out.append(r.CkptErased(e.slot, "too_close", e.n_tokens))
        elif isinstance(e, ev.CheckpointSuperseded):
            out.append(r.CkptErased(e.slot, "supersede", e.n_tokens))
        elif isinstance(e, ev.CheckpointInvalidated):
            out.append(r.CkptErased(e.slot, "invalidated", e.n_tokens))
        elif isinstance(e, ev.ContextShift):
            out.append(r.CkptErased(e.slot, "context_shift", None))
        elif isinstance(e, ev.PromptCleared):
            out.append(r.PromptCleared(e.slot, e.n_tokens))
        elif isinstance(e, ev.SlotReleased):
            out.append(r.Released(e.slot, e.n_tokens))
    return out
