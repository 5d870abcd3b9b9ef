"""The mutants: designs broken at one extension point each, to show that each property can fail.

A mutant is a verification artefact, not a design a user picks from: ``pcspec verify`` runs
every one against the properties that must catch it (``oracle.MUTANT_TARGETS``). Each is a
subclass of the design it is planted in (``base``) that overrides one point, written in plain
Python through the same points a user's design overrides. A mutant is *caught* by a target
property it violates where its base does not, on the same trace (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from pcspec.model import policy
from pcspec.model.design import Design
from pcspec.model.designs import PR27451, PR30137, Baseline, Fixed, register

if TYPE_CHECKING:
    from pcspec.model.cache import CacheEntry, PromptCache
    from pcspec.model.checkpoint import Checkpoint
    from pcspec.model.heap import Buffer
    from pcspec.model.server import Server


class InplaceUpdate(PR27451):
    name = "mutant:inplace-update"
    summary = "the cap eviction recycles the oldest checkpoint's shared payload buffer in place"
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "pr27451"

    def reuse_payload(self, victim: Checkpoint) -> bool:
        return True


class NoinitUnchecked(Fixed):
    name = "mutant:noinit-unchecked"
    summary = "no-init buffers without fill validation (the append-then-fill save of baseline)"
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "fixed"
    prompt_save = Design.prompt_save


class FreeShared(Fixed):
    name = "mutant:free-shared"
    summary = "evicting an entry frees its checkpoint payloads even when a slot still holds them"
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "fixed"

    def release_evicted(self, cache: PromptCache, entry: CacheEntry) -> None:
        for ck in entry.prompt.checkpoints:
            for b in ck.buffers():
                cache.heap.free(b)
        super().release_evicted(cache, entry)


class Undercount(Fixed):
    name = "mutant:undercount"
    summary = "a checkpoint shared with another holder is counted zero times"
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "fixed"

    def entry_sizes(self, cache: PromptCache, new_bufs: Sequence[Buffer] = ()) -> list[int]:
        return [sum(b.size for b in e.data_buffers()) + sum(ck.size() for ck in e.prompt.checkpoints if ck.refs <= 1)
                for e in cache.entries]

    def candidate_size(self, cache: PromptCache, data: int, ckpts: list[Checkpoint]) -> tuple[int, list[Buffer]]:
        # The slot already holds every one of them: "shared", so counted zero times.
        return data + sum(ck.size() for ck in ckpts if ck.refs == 0), [b for ck in ckpts for b in ck.buffers()]


class NoMakeRoom(Fixed):
    name = "mutant:no-make-room"
    summary = "an entry that would fit after eviction is rejected instead"
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "fixed"

    def is_oversize(self, new_size: int, sizes: Sequence[int], limit: int) -> bool:
        return limit > 0 and (new_size > limit or sum(sizes) + new_size > limit)


class KeepInvalidated(Fixed):
    name = "mutant:keep-invalidated"
    summary = "checkpoints beyond pos_next survive a new prompt"
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "fixed"

    def invalidated(self, ckpts: Sequence[tuple[int, int, int]], pos_next: int, n_prefix: int, thold: int) -> list[int]:
        return []


class NoCap(Fixed):
    name = "mutant:no-cap"
    summary = "the checkpoint list is not capped"
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "fixed"

    def cap_evictions(self, n_ckpts: int, cap: int) -> int:
        return 0


class NeedlessRestore(Fixed):
    name = "mutant:needless-restore"
    summary = "the restore threshold ignores new tokens (before #24110): a strict extension restores"
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "fixed"
    resume = Design.resume  # (the threshold is the C++ resume's; fixed's own resume has none)

    def pos_min_threshold(self, pos_next: int, n_swa: int, has_new_tokens: bool) -> int:
        return policy.pos_min_threshold(pos_next, n_swa, False)


class AppendixUncounted(Fixed):
    name = "mutant:appendix-uncounted"
    summary = "n_written and n_read leave the checkpoint appendix out (the acknowledged #26004 bug)"
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "fixed"

    def bytes_reported(self, n_total: int, n_appendix: int) -> int:
        return n_total - n_appendix


class SweepAlways(Fixed):
    name = "mutant:sweep-always"
    summary = "the too-close sweep runs even when the list is not full (the August 2026 code)"
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "fixed"

    def sweep_too_close(self, ckpts: Sequence[tuple[int, int]], id_task: int, min_step: int, cap: int) -> list[int]:
        return policy.sweep_too_close(ckpts, id_task, min_step, cap, only_when_full=False)


class InvalidatePosMin(PR30137):
    name = "mutant:invalidate-pos-min"
    summary = ("#30137 with the invalidation by pos_min > pos_min_thold of 2025 server code (its recorded SWA"
               " pos_min can be far below pos_max), not by pos_max and n_prefix")
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "pr30137"

    def invalidated(self, ckpts: Sequence[tuple[int, int, int]], pos_next: int, n_prefix: int, thold: int) -> list[int]:
        return policy.invalidated_by_pos_min([c[0] for c in ckpts], thold)


class SweepFullOnce(Fixed):
    name = "mutant:sweep-full-once"
    summary = "the too-close sweep decides the list is full once, then sweeps all of it"
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "fixed"

    def sweep_too_close(self, ckpts: Sequence[tuple[int, int]], id_task: int, min_step: int, cap: int) -> list[int]:
        return policy.sweep_too_close(ckpts, id_task, min_step, cap, recheck_full=False)


class BusySlotUpdate(Fixed):
    name = "mutant:busy-slot-update"
    summary = ("the C++'s cache update on a busy pinned slot (get_available_slot before the defer): a failed"
               " load clears the running task's prompt and the checkpoint it restored")
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "fixed"
    cache_update_busy_slot: ClassVar[bool] = True


class RestoreUncapped(Fixed):
    name = "mutant:restore-uncapped"
    summary = ("a slot restore installs every checkpoint of the file, beyond the --ctx-checkpoints of the server"
               " restoring it (#26004's first version read the whole appendix)")
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "fixed"

    def appendix_cap(self, n_ctx_checkpoints: int) -> int | None:
        return None


class LiveThold(Fixed):
    name = "mutant:live-thold"
    summary = ("the resume of the C++ (#24110's pos_min < pos_next - n_swa for live memory, the newest usable"
               " checkpoint): an SWA window that still serves is dropped, a recurrent rollback depth unused")
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "fixed"
    resume = Design.resume


class EmptyPinnedSkipsCache(Fixed):
    name = "mutant:empty-pinned-skips-cache"
    summary = ("the C++'s selection of a task pinned to an empty slot: f_keep is NaN, so the cache is never"
               " consulted (server-context.cpp:1578-1588)")
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "fixed"
    update_cache_on_select = Design.update_cache_on_select


class NoTailBreak(Fixed):
    name = "mutant:no-tail-break"
    summary = ("the prompt's last tokens are not batched apart (before #20288): no checkpoint 4 + n_ubatch and"
               " 4 tokens before the end")
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "fixed"

    def tail_breaks(self, n_batch: int, n_ubatch: int) -> tuple[int, ...]:
        return ()


class TrustSizeField(Fixed):
    name = "mutant:trust-size-field"
    summary = "the slot-file reader allocates from an unchecked length field"
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "fixed"

    def file_read(self, srv: Server, data: bytes, appendix_offset: int | None) -> None:
        from pcspec.model.slot_files import trusting_walk

        trusting_walk(srv, data, appendix_offset)


class BreakEveryUserMessage(Fixed):
    name = "mutant:break-every-user-message"
    summary = ("the prompt batch fill breaks at every user-message start, ignoring --checkpoint-min-step"
               " (server-context.cpp:3531-3538 without its spacing test)")
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "fixed"

    def breaks_at_user_message(self, pos: int, last_user: int, last_n_tokens: int | None, min_step: int) -> bool:
        return True


class LoadNanFKeep(Fixed):
    name = "mutant:load-nan-f-keep"
    summary = ("a cache load onto an empty slot starts from f_keep = 0 / 0 (NaN) instead of -1"
               " (server-task.cpp:1796): every comparison is false and nothing is loaded")
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "fixed"

    def load_baseline(self, lcp0: int, n_slot: int, n_new: int) -> tuple[float, float]:
        return policy.load_baseline(lcp0, n_slot, n_new, empty_minus_one=False)


# The historical restore-choice bugs, planted in baseline's path (the C++ resume, which fixed does
# not take), each named after its rule (server-context.cpp:3274-3364 of 0c1e570). The clamp of
# n_past to the checkpoint's n_tokens (3356) has no mutant: it binds only for a checkpoint whose
# positions run past its tokens (pos_max > n_tokens, or pos_min >= n_tokens), and the model's
# checkpoints (text tokens, one position each) never do: where baseline breaks CKPT-1, pos_max
# falls short of n_tokens - 1. Dropping the clamp is an equivalent mutant here
# (tests/model/test_restore_rules.py shows the arithmetic).


class TholdMinusOneAlways(Baseline):
    name = "mutant:thold-minus-one-always"
    summary = ("the restore threshold's - 1 applied whatever the prompt (before #24110): pos_min_thold ="
               " pos_next - n_swa - 1 for a prompt with new tokens too")
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "baseline"

    def pos_min_threshold(self, pos_next: int, n_swa: int, has_new_tokens: bool) -> int:
        return policy.pos_min_threshold(pos_next, n_swa, False)


class TholdMinusOneNever(Baseline):
    name = "mutant:thold-minus-one-never"
    summary = ("the restore threshold's - 1 never applied: for a prompt without new tokens, live memory or a"
               " checkpoint at the prompt's end is taken though the prompt-logits rule resumes a token earlier")
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "baseline"

    def pos_min_threshold(self, pos_next: int, n_swa: int, has_new_tokens: bool) -> int:
        return policy.pos_min_threshold(pos_next, n_swa, True)


class RestorePosMinZeroRejected(Baseline):
    name = "mutant:restore-pos-min-zero-rejected"
    summary = ("the checkpoint scan without the pos_min == 0 escape: a checkpoint of the prompt's start is"
               " not restored when the threshold is 0")
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "baseline"

    def restore_choice(self, ckpts: Sequence[tuple[int, int, int]], pos_next: int, thold: int, n_prefix: int,
                       n_prompt: int, n_swa: int) -> int | None:
        return policy.restore_choice([(c[0], c[1]) for c in ckpts], pos_next, thold, accept_pos_min_zero=False)


class RestorePosMaxUnchecked(Baseline):
    name = "mutant:restore-pos-max-unchecked"
    summary = ("the checkpoint scan without its pos_max > pos_next rejection ([TAG_CHECKPOINTS_FIX_POS_MIN]):"
               " a checkpoint beyond the shared prefix is restored")
    mutant: ClassVar[bool] = True
    base: ClassVar[str | None] = "baseline"

    def restore_choice(self, ckpts: Sequence[tuple[int, int, int]], pos_next: int, thold: int, n_prefix: int,
                       n_prompt: int, n_swa: int) -> int | None:
        return policy.restore_choice([(c[0], c[1]) for c in ckpts], pos_next, thold, reject_beyond_pos_next=False)


MUTANT_CLASSES: tuple[type[Design], ...] = (
    InplaceUpdate, NoinitUnchecked, FreeShared, Undercount, NoMakeRoom, KeepInvalidated, NoCap, NeedlessRestore,
    AppendixUncounted, SweepAlways, InvalidatePosMin, SweepFullOnce, BusySlotUpdate, RestoreUncapped, LiveThold,
    EmptyPinnedSkipsCache, NoTailBreak, TrustSizeField, BreakEveryUserMessage, LoadNanFKeep, TholdMinusOneAlways,
    TholdMinusOneNever, RestorePosMinZeroRejected, RestorePosMaxUnchecked,
)
MUTANTS: dict[str, Design] = {cls.name: cls() for cls in MUTANT_CLASSES}
for _m in MUTANTS.values():
    register(_m)  # (a trace naming a mutant reads back wherever pcspec.properties is imported)
