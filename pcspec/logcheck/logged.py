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

from collections.abc import Iterable, Iterator

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
        elif isinstance(e, ev.LoadRestoreFailed):
            yield CacheLoadFailed()
        elif isinstance(e, ev.SlotSelected):
            yield Selected(e.slot, e.how)
        elif isinstance(e, ev.PromptSave):
            yield CacheSaved(e.length)
        elif isinstance(e, ev.CacheAlreadyCached):
            yield CacheSkipped("contained")
        elif isinstance(e, ev.CacheOversize):
            yield CacheSkipped("oversize")
        elif isinstance(e, ev.CacheObsoleteRemoved):
            yield CacheEvicted("obsolete", e.length)
        elif isinstance(e, ev.CacheMakeRoom):
            yield CacheEvicted("make_room", None)
        elif isinstance(e, ev.CacheLimitEvict):
            yield CacheEvicted("limit_bytes", None)
        elif isinstance(e, ev.CacheTokenEvict):
            yield CacheEvicted("limit_tokens", None)
        elif isinstance(e, ev.CheckpointRestored):
            yield CkptRestored(e.slot, e.n_tokens, e.pos_min, e.pos_max, e.n_past)
        elif isinstance(e, ev.FullReprocess):
            yield FullReprocess(e.slot)
        elif isinstance(e, ev.CheckpointCreated):
            yield CkptCreated(e.slot, e.n_tokens, e.pos_min, e.pos_max)
        elif isinstance(e, ev.CheckpointErasedOld):
            yield CkptErased(e.slot, "cap", e.n_tokens)
        elif isinstance(e, ev.CheckpointErasedTooClose):
            yield CkptErased(e.slot, "too_close", e.n_tokens)
        elif isinstance(e, ev.CheckpointSuperseded):
            yield CkptErased(e.slot, "supersede", e.n_tokens)
        elif isinstance(e, ev.CheckpointInvalidated):
            yield CkptErased(e.slot, "invalidated", e.n_tokens)
        elif isinstance(e, ev.ContextShift):
            yield CkptErased(e.slot, "context_shift", None)
        elif isinstance(e, ev.PromptCleared):
            yield PromptCleared(e.slot, e.n_tokens)
        elif isinstance(e, ev.SlotReleased):
            yield Released(e.slot, e.n_tokens)
