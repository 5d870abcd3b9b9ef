"""Designs a user might write, each through the documented extension points only
(``pcspec.model.design``): no private name of pcspec, no monkeypatching. ``test_user_designs.py``
fuzzes each; the broken ones must be caught by the property their bug breaks.

They live in an importable module (``tests.tools.user_designs``) as a user's would: a trace
records ``MODULE:CLASS`` and replays under the design that made it.
"""

from __future__ import annotations

from collections.abc import Sequence

from pcspec.model.cache import CacheEntry, PromptCache
from pcspec.model.design import Design
from pcspec.model.designs import Fixed
from pcspec.model.server import Server
from pcspec.model.slot import Slot


def _largest(sizes: Sequence[int]) -> int:
    return max(range(len(sizes)), key=lambda i: (sizes[i], -i))


class LargestFirstNeedless(Fixed):
    """Make room by evicting the largest entry, whether or not anything needs room."""

    name = "largest-first-needless"

    def make_room(self, sizes: Sequence[int], new_size: int, limit: int) -> list[int]:
        return [_largest(sizes)] if sizes else []


class LargestFirst(Fixed):
    """Make room by evicting the largest entry first (the oldest of equals), while needed."""

    name = "largest-first"

    def make_room(self, sizes: Sequence[int], new_size: int, limit: int) -> list[int]:
        if not sizes or sum(sizes) + new_size <= limit:
            return []
        return [_largest(sizes)]


class LruByUse(Fixed):
    """A prompt found cached already counts as a use: its entry becomes the newest, so the
    oldest-first eviction evicts the least recently used."""

    name = "lru-by-use"

    def on_contained(self, cache: PromptCache, entry: CacheEntry) -> None:
        cache.refresh(entry)


class PublishBeforeFill(Fixed):
    """Save by appending the entry to the cache, then filling it: whatever the fill reads."""

    name = "publish-before-fill"

    def prompt_save(self, srv: Server, slot: Slot, size_tgt: int, size_dft: int) -> bool:
        cache = srv.cache
        assert cache is not None
        entry = cache.alloc(slot.prompt, size_tgt, size_dft)
        if entry is None:
            return False
        cache.fill(entry, srv.ctx_tgt, srv.ctx_dft, slot.id, size_tgt, size_dft)
        return True


class NewestCheckpoint(Fixed):
    """At a prompt start, resume as the C++ does but restore the newest checkpoint, wherever it
    lies."""

    name = "newest-checkpoint"
    resume = Design.resume

    def restore_choice(self, ckpts: Sequence[tuple[int, int, int]], pos_next: int, thold: int, n_prefix: int,
                       n_prompt: int, n_swa: int) -> int | None:
        return len(ckpts) - 1 if ckpts else None


class PerHolderShared(Fixed):
    """Count a checkpoint once per entry holding it, though the entries share it."""

    name = "per-holder-shared"

    def entry_sizes(self, cache: PromptCache, new_bufs: Sequence[object] = ()) -> list[int]:
        return [e.per_holder_size() for e in cache.entries]


# The broken ones, each with the property its bug breaks (and the design it starts from holds).
BROKEN: dict[type[Design], str] = {
    LargestFirstNeedless: "ACC-3",
    PublishBeforeFill: "RB-1",
    NewestCheckpoint: "STATE-1",
    PerHolderShared: "ACC-1",
}
CORRECT: tuple[type[Design], ...] = (LargestFirst, LruByUse)
