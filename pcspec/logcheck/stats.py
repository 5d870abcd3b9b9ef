"""Statistics people ask about a llama-server log, and the unique-accounting estimate.

Counts come from what the log shows (a "created" line is a created checkpoint) or from what the
checker infers (a "saving prompt" line not followed by a skip or failure is a saved entry).

Full re-processings and why:

* ``no_usable_checkpoint``: "forcing full prompt re-processing" after checking at least one
  checkpoint (none was old enough or all lay beyond the new prompt's shared prefix);
* ``no_checkpoints``: the same line with nothing to check (the slot held no checkpoint);
* ``cache_miss``: a prompt that started from position 0 without that line: nothing in the slot
  or the prompt cache shared a prefix with it (a cold start, or a load that found nothing).

Unique accounting (*unique bytes* are the distinct buffers reachable from cache entries, each
counted once: ``pcspec.model.cache.distinct_total``). The server accounts every entry at ``data + sum of its
checkpoint sizes`` (server_prompt_cache_state::size), so a checkpoint held by several entries
counts once per entry. The checker tracks each checkpoint by identity: the "created" line that
made it; a cache save or a load hand-over copies references, so two entries that hold "the same"
checkpoint hold one created at the same line (hence the same slot, n_tokens and positions).
Checkpoints that only happen to have equal n_tokens and positions but were created by different
lines hold different data and are not merged. An entry whose checkpoints the log did not show
counts in full (no sharing assumed). Estimates:

* at every ``cache state`` line: accounted MiB (as logged) versus unique MiB; the largest gap;
* ``shared_with_slots``: checkpoint MiB in the cache that a slot also holds (bytes that shared
  ownership, #30137, stores once while the accounting above counts them per holder);
* at every eviction (``making room`` in alloc, ``cache size limit reached`` in update): how many
  of the evicted entries would have stayed under unique accounting at that moment, and their
  size. Each eviction is judged on its own against the cache as logged; later evictions are not
  re-simulated, so the total is an estimate of what unique accounting keeps, not a replay.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from pcspec.logcheck.state import Ckpt, Entry
from pcspec.model import policy
from pcspec.model.cache import distinct_total, unique_sizes

MAX_LISTED = 100  # restored-then-erased checkpoints listed (all are counted)


@dataclass(slots=True)
class Stats:
    requests: int = 0
    # checkpoints
    ckpt_created: int = 0
    ckpt_restored: int = 0
    ckpt_invalidated: int = 0
    ckpt_erased_old: int = 0
    ckpt_erased_too_close: int = 0
    ckpt_superseded: int = 0
    ckpt_dropped_by_clear: int = 0
    restored_then_erased: list[dict[str, Any]] = field(default_factory=list)  # the first few
    restored_then_erased_count: int = 0
    # slots
    slot_file_restores: int = 0
    # prompt starts
    full_reprocess: int = 0
    reprocess_no_usable: int = 0
    reprocess_no_checkpoints: int = 0
    cache_miss: int = 0
    # prompt cache
    cache_updates: int = 0
    cache_saves: int = 0
    cache_skipped_already: int = 0
    cache_skipped_oversize: int = 0
    cache_save_failed: int = 0
    cache_alloc_failed: int = 0
    cache_lookups: int = 0
    cache_loads: int = 0
    cache_load_failed: int = 0
    evict_make_room: int = 0
    evict_limit_bytes: int = 0
    evict_limit_tokens: int = 0
    obsolete_removed: int = 0
    peak_cache_mib: float = 0.0
    peak_cache_line: int = 0
    peak_cache_prompts: int = 0
    # unique accounting
    unique_summaries: int = 0
    unique_max_gap_mib: float = 0.0
    unique_max_gap_line: int = 0
    unique_accounted_at_gap: float = 0.0
    unique_at_gap: float = 0.0
    shared_with_slots_max_mib: float = 0.0
    evictions_avoidable: int = 0
    evictions_avoidable_mib: float = 0.0

    def restored_then_erased_add(self, item: dict[str, Any]) -> None:
        self.restored_then_erased_count += 1
        if len(self.restored_then_erased) < MAX_LISTED:
            self.restored_then_erased.append(item)

    def cache_evicted(self) -> int:
        return self.evict_make_room + self.evict_limit_bytes + self.evict_limit_tokens

    def event_counts(self) -> dict[str, int]:
        """The ``events`` object of ``--json``."""
        return {
            "requests": self.requests,
            "checkpoint_created": self.ckpt_created,
            "checkpoint_restored": self.ckpt_restored,
            "checkpoint_invalidated": self.ckpt_invalidated,
            "checkpoint_erased_old": self.ckpt_erased_old,
            "checkpoint_erased_too_close": self.ckpt_erased_too_close,
            "checkpoint_superseded": self.ckpt_superseded,
            "full_reprocess": self.full_reprocess,
            "cache_saved": self.cache_saves,
            "cache_loaded": self.cache_loads,
            "cache_evicted": self.cache_evicted(),
            "cache_obsolete_removed": self.obsolete_removed,
        }

    def as_dict(self) -> dict[str, Any]:
        lookups = self.cache_lookups
        return {
            "requests": self.requests,
            "checkpoints": {
                "created": self.ckpt_created,
                "restored": self.ckpt_restored,
                "erased": {
                    "invalidated": self.ckpt_invalidated,
                    "old": self.ckpt_erased_old,
                    "too_close": self.ckpt_erased_too_close,
                    "superseded": self.ckpt_superseded,
                    "cleared": self.ckpt_dropped_by_clear,
                },
                "erased_after_restore_by_same_task": self.restored_then_erased_count,
                "erased_after_restore": self.restored_then_erased,
            },
            "slots": {
                "file_restores": self.slot_file_restores,
            },
            "full_reprocess": {
                "forced": self.full_reprocess,
                "no_usable_checkpoint": self.reprocess_no_usable,
                "no_checkpoints": self.reprocess_no_checkpoints,
                "cache_miss": self.cache_miss,
            },
            "cache": {
                "updates": self.cache_updates,
                "saves": self.cache_saves,
                "skipped_already_cached": self.cache_skipped_already,
                "skipped_oversize": self.cache_skipped_oversize,
                "save_failed": self.cache_save_failed,
                "alloc_failed": self.cache_alloc_failed,
                "lookups": lookups,
                "loads": self.cache_loads,
                "load_failed": self.cache_load_failed,
                "hit_rate": round(self.cache_loads / lookups, 4) if lookups else None,
                "evictions": {
                    "make_room": self.evict_make_room,
                    "limit_bytes": self.evict_limit_bytes,
                    "limit_tokens": self.evict_limit_tokens,
                    "total": self.cache_evicted(),
                },
                "obsolete_removed": self.obsolete_removed,
                "peak_mib": round(self.peak_cache_mib, 3),
                "peak_line": self.peak_cache_line,
                "peak_prompts": self.peak_cache_prompts,
            },
            "unique_accounting": {
                "summaries": self.unique_summaries,
                "max_saving_mib": round(self.unique_max_gap_mib, 3),
                "max_saving_line": self.unique_max_gap_line,
                "accounted_mib_there": round(self.unique_accounted_at_gap, 3),
                "unique_mib_there": round(self.unique_at_gap, 3),
                "shared_with_slots_max_mib": round(self.shared_with_slots_max_mib, 3),
                "evictions_avoidable": self.evictions_avoidable,
                "evictions_avoidable_mib": round(self.evictions_avoidable_mib, 3),
            },
        }

    def merge(self, other: Stats) -> None:
        """Add another log's statistics (counts add; a peak is the larger one, with the figures
        recorded where it was)."""
        peaks = {name for group in _PEAKS for name in group}
        for name in self.__slots__:
            mine = getattr(self, name)
            if isinstance(mine, list):
                mine.extend(getattr(other, name)[:max(0, MAX_LISTED - len(mine))])
            elif name not in peaks:
                setattr(self, name, mine + getattr(other, name))
        for key, *rest in _PEAKS:
            if getattr(other, key) > getattr(self, key):
                for name in (key, *rest):
                    setattr(self, name, getattr(other, name))


# the peaks of ``Stats``: the figure that decides, then those recorded with it
_PEAKS = (
    ("peak_cache_mib", "peak_cache_line", "peak_cache_prompts"),
    ("unique_max_gap_mib", "unique_max_gap_line", "unique_accounted_at_gap", "unique_at_gap"),
    ("shared_with_slots_max_mib",),
)


# ---- unique accounting ----------------------------------------------------------------------
# The model's accounting (``pcspec.model.cache``) over what the log shows: an entry holds its own
# data and its checkpoints, each checkpoint by identity (the line that created it).


def held(e: Entry) -> list[tuple[Hashable, float]]:
    """What an entry holds, in MiB: its data, and each of its checkpoints once whoever else holds
    it (all of it as its own data when the log did not show which checkpoints it holds)."""
    if e.ckpts is None:
        return [(id(e), e.size.mid)]
    return [(id(e), e.state_size().mid), *((c.uid, c.size.mid) for c in e.ckpts)]


def unique_mib(entries: Iterable[Entry]) -> float:
    """The unique size of ``entries``: every checkpoint identity counted once."""
    return 0.0 + distinct_total(chain.from_iterable(map(held, entries)))


def shared_with_slots_mib(entries: Iterable[Entry], slot_ckpts: Iterable[Ckpt]) -> float:
    """Checkpoint MiB in the cache that a slot holds too."""
    slots = {c.uid for c in slot_ckpts}
    return 0.0 + distinct_total((c.uid, c.size.mid) for e in entries for c in e.ckpts or () if c.uid in slots)


def avoidable_evictions(
    before: Sequence[Entry],
    n_evicted: int,
    limit_mib: float,
    new_state: float | None = None,
    new_ckpts: Sequence[Ckpt] = (),
) -> tuple[int, float]:
    """Of the ``n_evicted`` front entries, how many (and how many accounted MiB) unique
    accounting would have kept: ``policy.make_room`` over the entries' unique sizes (update():
    ``size() > limit``; alloc(): ``size() + new_size > limit``, with the new entry of
    ``new_state`` MiB of data and the checkpoints ``new_ckpts`` when it is given)."""
    if n_evicted <= 0 or limit_mib <= 0:
        return 0, 0.0
    new: list[tuple[Hashable, float]] = [] if new_state is None else [
        ("new", new_state), *((c.uid, c.size.mid) for c in new_ckpts)]
    sizes = unique_sizes([held(e) for e in before], (k for k, _ in new))
    n_unique = min(n_evicted, policy.make_room(sizes, distinct_total(new), limit_mib))
    kept = before[n_unique:n_evicted]
    return len(kept), sum(e.size.mid for e in kept)
