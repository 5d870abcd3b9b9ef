"""Typed events read from a llama-server log, one class per log line kind.

Every event carries ``line`` (1-based line number in the log) and ``level`` (the printed level
letter, ``""`` when the log has no prefix). Slot events also carry ``slot`` and ``task`` (the
``id %2d | task %d`` fields of ``SLT_x``; ``task`` is -1 when the slot has no task). Each class
names the C++ format string it is read from (server-common.h ``SLT_x``/``SRV_x`` prefixes, then
the message); the ``kind`` class attribute is the event's name in ``--json`` counts and in
``--trace`` files.

Fields a log line may lack in older builds (``n_tokens``, ``n_past``, ``n_swa``, ``pos_next``,
the ``k of N`` numbers, the per-entry checkpoint count) are ``None`` when absent. Sizes are the
logged MiB values (``%.3f``); see ``pcspec.logcheck.mib`` for the rounding tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(slots=True, frozen=True)
class Event:
    line: int
    level: str
    kind: ClassVar[str] = "event"


@dataclass(slots=True, frozen=True)
class SlotEvent(Event):
    slot: int
    task: int


# --------------------------------------------------------------------------------------------
# start-up (server-context.cpp: load_model / init)


@dataclass(slots=True, frozen=True)
class ServerInit(Event):
    """``initializing, n_slots = %d, n_ctx_slot = %d, kv_unified = '%s'`` (load_model). Starts a
    server run: a wake from sleep also re-runs load_model and loses every cached prompt."""

    n_slots: int
    n_ctx_slot: int
    kv_unified: bool
    kind: ClassVar[str] = "server_init"


@dataclass(slots=True, frozen=True)
class CacheConfig(Event):
    """``prompt cache is enabled, size limit: %d MiB`` / ``no limit`` / ``prompt cache is
    disabled ...`` (load_model). ``limit_mib`` is None for "no limit" and when disabled."""

    enabled: bool
    limit_mib: int | None
    kind: ClassVar[str] = "cache_config"


@dataclass(slots=True, frozen=True)
class CheckpointConfig(Event):
    """``context checkpoints enabled, max = %d, min spacing = %d`` / ``... disabled``."""

    enabled: bool
    max: int
    min_spacing: int
    kind: ClassVar[str] = "checkpoint_config"


@dataclass(slots=True, frozen=True)
class IdleSlotConfig(Event):
    """``idle slots will be saved to prompt cache [and cleared] upon starting a new task`` (init)
    or ``--cache-idle-slots requires --cache-ram, disabling``."""

    enabled: bool
    clear: bool
    kind: ClassVar[str] = "idle_slot_config"


@dataclass(slots=True, frozen=True)
class SlotInit(SlotEvent):
    """``new slot, n_ctx = %d`` (load_model, one per slot)."""

    n_ctx: int
    kind: ClassVar[str] = "slot_init"


@dataclass(slots=True, frozen=True)
class BuildLine(Event):
    """TRACE ``cmn common_param: common_params_print_info: build %d (%s) with %s for %s%s``
    (common/common.cpp:402): the server binary's build number and commit. Printed once per
    process before load_model, so it belongs to every server run after it (a wake from sleep
    re-runs load_model without printing it again). ``commit`` is as printed (a short hash, or
    ``unknown`` for a build without git)."""

    number: int
    commit: str
    kind: ClassVar[str] = "build_line"


# --------------------------------------------------------------------------------------------
# sequence state reads (src/llama-kv-cache.cpp: state_read_meta)


@dataclass(slots=True, frozen=True)
class StateRead(Event):
    """DEBUG ``state_read_meta: cell_count = %d, dest_seq_id = %d`` (src/llama-kv-cache.cpp:2452):
    one KV cache of a sequence state was read into sequence ``seq_id`` (the slot id). One line
    per non-empty cache: an iSWA memory prints the full cache, then the SWA one; a partial read
    (a checkpoint) prints the SWA one only; a recurrent memory prints none
    (llama-memory-recurrent.cpp: state_read_meta has no such line). A cache load, a checkpoint
    restore, a speculative checkpoint and a slot-file restore all print it; only the lines
    around it tell which (``pcspec.logcheck.checker``)."""

    cell_count: int
    seq_id: int
    kind: ClassVar[str] = "state_read"


# --------------------------------------------------------------------------------------------
# slot selection (server-context.cpp: get_available_slot) and task life cycle


@dataclass(slots=True, frozen=True)
class SimChecked(SlotEvent):
    """``- checking sim = %.3f (%zu/%zu) > %.3f``: the slot's lcp with the new prompt."""

    f_sim: float
    lcp: int
    n_new: int
    thold: float
    kind: ClassVar[str] = "sim_checked"


@dataclass(slots=True, frozen=True)
class SlotSkipped(SlotEvent):
    """``- skipping, is_processing = %d`` / ``- skipping, slot is empty``."""

    empty: bool
    kind: ClassVar[str] = "slot_skipped"


@dataclass(slots=True, frozen=True)
class SlotSelected(SlotEvent):
    """``selected slot by id (%d)`` / ``by LCP similarity, f_sim_best = ...`` / ``by LRU``.
    ``how`` is ``"id"``, ``"lcp"`` or ``"lru"``; ``f_keep`` (LCP picks only) is None when the
    server printed ``nan`` (an empty pinned slot)."""

    how: str
    f_keep: float | None
    kind: ClassVar[str] = "slot_selected"


@dataclass(slots=True, frozen=True)
class TaskLaunched(SlotEvent):
    """``processing task, is_child = %d`` (launch_slot_with_task)."""

    is_child: bool
    kind: ClassVar[str] = "task_launched"


@dataclass(slots=True, frozen=True)
class NewPrompt(SlotEvent):
    """``new prompt, n_ctx_slot = %d, n_keep = %d, task.n_tokens = %d`` (update_slots)."""

    n_tokens: int
    kind: ClassVar[str] = "new_prompt"


@dataclass(slots=True, frozen=True)
class CacheReuse(SlotEvent):
    """``reusing chunk with size %zu, shifting KV cache ...``: n_past exceeds the plain lcp."""

    kind: ClassVar[str] = "cache_reuse"


@dataclass(slots=True, frozen=True)
class CheckpointChecked(SlotEvent):
    """``checking checkpoint with [%d, %d] against %d...`` (``Checking`` before #25078); the
    last number is ``pos_min_thold``."""

    pos_min: int
    pos_max: int
    thold: int
    legacy: bool
    kind: ClassVar[str] = "checkpoint_checked"


@dataclass(slots=True, frozen=True)
class CheckpointRestored(SlotEvent):
    """``restored context checkpoint (pos_min = %d, pos_max = %d, n_tokens = %d, n_past = %d,
    size = %.3f MiB)``."""

    pos_min: int
    pos_max: int
    n_tokens: int | None
    n_past: int | None
    size: float
    kind: ClassVar[str] = "checkpoint_restored"


@dataclass(slots=True, frozen=True)
class FullReprocess(SlotEvent):
    """``forcing full prompt re-processing due to lack of cache data ...``."""

    kind: ClassVar[str] = "full_reprocess"


@dataclass(slots=True, frozen=True)
class CheckpointInvalidated(SlotEvent):
    """``erased invalidated context checkpoint (pos_min, pos_max, n_tokens, n_swa, pos_next,
    size)``."""

    pos_min: int
    pos_max: int
    n_tokens: int | None
    n_swa: int | None
    pos_next: int | None
    size: float
    kind: ClassVar[str] = "checkpoint_invalidated"


@dataclass(slots=True, frozen=True)
class NeedEvaluate(SlotEvent):
    """``need to evaluate at least 1 token for each active slot (n_past = %d, task.n_tokens() =
    %d)`` ([TAG_PROMPT_LOGITS])."""

    n_past: int
    n_task: int
    kind: ClassVar[str] = "need_evaluate"


@dataclass(slots=True, frozen=True)
class NPastSet(SlotEvent):
    """``n_past was set to %d``."""

    n_past: int
    kind: ClassVar[str] = "n_past_set"


@dataclass(slots=True, frozen=True)
class CachedTokens(SlotEvent):
    """``cached n_tokens = %d, memory_seq_rm [%d, end)``: logged at every prompt step."""

    n_tokens: int
    seq_rm_from: int
    kind: ClassVar[str] = "cached_tokens"


@dataclass(slots=True, frozen=True)
class DoCheckpoint(SlotEvent):
    """DEBUG ``main/do_checkpoint = %s, pos_min = %d, pos_max = %d``: the memory's range read
    before the batch."""

    yes: bool
    pos_min: int
    pos_max: int
    kind: ClassVar[str] = "do_checkpoint"


@dataclass(slots=True, frozen=True)
class CheckpointCreated(SlotEvent):
    """``created context checkpoint %d of %d (pos_min, pos_max, n_tokens, size)``: ``index`` is
    the list length after insertion, ``cap`` is ``--ctx-checkpoints``."""

    index: int | None
    cap: int | None
    pos_min: int
    pos_max: int
    n_tokens: int | None
    size: float
    kind: ClassVar[str] = "checkpoint_created"


@dataclass(slots=True, frozen=True)
class CheckpointErasedOld(SlotEvent):
    """WARN ``erasing old context checkpoint (pos_min, pos_max, n_tokens, size)``: the cap."""

    pos_min: int
    pos_max: int
    n_tokens: int | None
    size: float
    kind: ClassVar[str] = "checkpoint_erased_old"


@dataclass(slots=True, frozen=True)
class CheckpointErasedTooClose(SlotEvent):
    """``erasing context checkpoint too close to an earlier one (...)``: the #25472 sweep."""

    pos_min: int
    pos_max: int
    n_tokens: int | None
    size: float
    kind: ClassVar[str] = "checkpoint_erased_too_close"


@dataclass(slots=True, frozen=True)
class CheckpointSuperseded(SlotEvent):
    """``superseding context checkpoint at n_tokens = %d`` (November 2026 code)."""

    n_tokens: int
    kind: ClassVar[str] = "checkpoint_superseded"


@dataclass(slots=True, frozen=True)
class SlotFileCheckpoints(SlotEvent):
    """``restored %zu context checkpoint(s) from '%s'`` or ``... context checkpoint appendix ...
    - ignored`` (slot file restore, #26004): the list is replaced (``count`` may be 0)."""

    count: int
    kind: ClassVar[str] = "slot_file_checkpoints"


@dataclass(slots=True, frozen=True)
class ContextShift(SlotEvent):
    """WARN ``slot context shift, n_keep = %d, n_left = %d, n_discard = %d``: drops all
    checkpoints (``prompt.clear()``)."""

    n_discard: int
    kind: ClassVar[str] = "context_shift"


@dataclass(slots=True, frozen=True)
class PromptCleared(SlotEvent):
    """``clearing prompt with %zu tokens`` (prompt_clear: tokens and checkpoints)."""

    n_tokens: int
    kind: ClassVar[str] = "prompt_cleared"


@dataclass(slots=True, frozen=True)
class LoraCleared(SlotEvent):
    """``clearing cache for lora change. %zu loras -> %zu loras``: ``prompt.clear()``."""

    kind: ClassVar[str] = "lora_cleared"


@dataclass(slots=True, frozen=True)
class SlotReleased(SlotEvent):
    """``stop processing: n_tokens = %d, truncated = %d`` (release)."""

    n_tokens: int
    kind: ClassVar[str] = "slot_released"


@dataclass(slots=True, frozen=True)
class PromptLoadFailed(SlotEvent):
    """WARN ``failed to load prompt from cache`` (prompt_load): the slot is then cleared."""

    kind: ClassVar[str] = "prompt_load_failed"


@dataclass(slots=True, frozen=True)
class IdleSlotSave(SlotEvent):
    """``saving idle slot to prompt cache`` (process_single_task)."""

    kind: ClassVar[str] = "idle_slot_save"


@dataclass(slots=True, frozen=True)
class SaveFailed(SlotEvent):
    """ERROR ``failed to save complete prompt state`` (prompt_save, #30137): the new cache entry
    is popped again."""

    kind: ClassVar[str] = "save_failed"


@dataclass(slots=True, frozen=True)
class SlotPurged(Event):
    """WARN ``purging slot %d with %zu tokens`` (try_clear_idle_slots): cleared, not saved."""

    slot: int
    n_tokens: int
    kind: ClassVar[str] = "slot_purged"


# --------------------------------------------------------------------------------------------
# prompt cache (server-task.cpp: server_prompt_cache, srv lines)


@dataclass(slots=True, frozen=True)
class CacheUpdateStart(Event):
    """``updating prompt cache`` (get_available_slot)."""

    kind: ClassVar[str] = "cache_update_start"


@dataclass(slots=True, frozen=True)
class CacheUpdateDone(Event):
    """``prompt cache update took %.2f ms`` (get_available_slot)."""

    kind: ClassVar[str] = "cache_update_done"


@dataclass(slots=True, frozen=True)
class PromptSave(Event):
    """``- saving prompt with length %d, total state size = %.3f MiB (draft: %.3f MiB)``."""

    length: int
    state_mib: float
    draft_mib: float
    kind: ClassVar[str] = "prompt_save"


@dataclass(slots=True, frozen=True)
class CacheAlreadyCached(Event):
    """``- prompt is already in the cache, skipping`` (alloc step 1)."""

    kind: ClassVar[str] = "cache_already_cached"


@dataclass(slots=True, frozen=True)
class CacheOversize(Event):
    """WARN ``- prompt state size %.3f MiB exceeds cache size limit %.3f MiB, skipping``."""

    size_mib: float
    limit_mib: float
    kind: ClassVar[str] = "cache_oversize"


@dataclass(slots=True, frozen=True)
class CacheObsoleteRemoved(Event):
    """``- removing obsolete cached prompt with length %d`` (alloc step 4)."""

    length: int
    kind: ClassVar[str] = "cache_obsolete_removed"


@dataclass(slots=True, frozen=True)
class CacheMakeRoom(Event):
    """WARN ``- making room for prompt cache entry, removing oldest entry (size = %.3f MiB)``."""

    size_mib: float
    kind: ClassVar[str] = "cache_make_room"


@dataclass(slots=True, frozen=True)
class CacheAllocFailed(Event):
    """ERROR ``failed to allocate memory for prompt cache state: %s`` (std::bad_alloc)."""

    kind: ClassVar[str] = "cache_alloc_failed"


@dataclass(slots=True, frozen=True)
class CacheLimitReduced(Event):
    """WARN ``- cache size limit reduced to %.3f MiB`` (after bad_alloc)."""

    limit_mib: float
    kind: ClassVar[str] = "cache_limit_reduced"


@dataclass(slots=True, frozen=True)
class LoadLookup(Event):
    """``- looking for better prompt, base f_keep = %.3f, f_sim = %.3f`` (``sim`` before
    #26271)."""

    f_keep: float
    f_sim: float
    legacy: bool
    kind: ClassVar[str] = "load_lookup"


@dataclass(slots=True, frozen=True)
class LoadCandidate(Event):
    """``  - prompt with length %7zu, lcp = %7d, f_keep = %.3f, f_sim = %.3f`` (#26218)."""

    length: int
    lcp: int
    f_keep: float
    f_sim: float
    kind: ClassVar[str] = "load_candidate"


@dataclass(slots=True, frozen=True)
class LoadFound(Event):
    """``- found better prompt with f_keep = %.3f, f_sim = %.3f``."""

    f_keep: float
    f_sim: float
    kind: ClassVar[str] = "load_found"


@dataclass(slots=True, frozen=True)
class LoadRestoreFailed(Event):
    """``failed to restore state with size %zu``: ERROR for the target, WARN for the draft."""

    draft: bool
    kind: ClassVar[str] = "load_restore_failed"


@dataclass(slots=True, frozen=True)
class CacheLimitEvict(Event):
    """WARN ``- cache size limit reached, removing oldest entry (size = %.3f MiB)`` (update)."""

    size_mib: float
    kind: ClassVar[str] = "cache_limit_evict"


@dataclass(slots=True, frozen=True)
class CacheTokenEvict(Event):
    """WARN ``- cache token limit (%zu, est: %zu) reached, removing oldest entry (size = %.3f
    MiB)`` (update)."""

    limit_tokens: int
    est: int
    size_mib: float
    kind: ClassVar[str] = "cache_token_evict"


@dataclass(slots=True, frozen=True)
class CacheSummary(Event):
    """``- cache state: %zu prompts, %.3f MiB (limits: %.3f MiB, %zu tokens, %zu est)``."""

    n_prompts: int
    total_mib: float
    limit_mib: float
    limit_tokens: int
    est: int | None
    kind: ClassVar[str] = "cache_summary"


@dataclass(slots=True, frozen=True)
class CacheSummaryEntry(Event):
    """``  - prompt %p: %7d tokens, checkpoints: %2zu, %9.3f MiB`` (one per entry, front
    first)."""

    n_tokens: int
    n_ckpts: int | None
    size_mib: float
    kind: ClassVar[str] = "cache_summary_entry"


ALL_EVENT_TYPES: tuple[type[Event], ...] = (
    ServerInit,
    BuildLine,
    StateRead,
    CacheConfig,
    CheckpointConfig,
    IdleSlotConfig,
    SlotInit,
    SimChecked,
    SlotSkipped,
    SlotSelected,
    TaskLaunched,
    NewPrompt,
    CacheReuse,
    CheckpointChecked,
    CheckpointRestored,
    FullReprocess,
    CheckpointInvalidated,
    NeedEvaluate,
    NPastSet,
    CachedTokens,
    DoCheckpoint,
    CheckpointCreated,
    CheckpointErasedOld,
    CheckpointErasedTooClose,
    CheckpointSuperseded,
    SlotFileCheckpoints,
    ContextShift,
    PromptCleared,
    LoraCleared,
    SlotReleased,
    PromptLoadFailed,
    IdleSlotSave,
    SaveFailed,
    SlotPurged,
    CacheUpdateStart,
    CacheUpdateDone,
    PromptSave,
    CacheAlreadyCached,
    CacheOversize,
    CacheObsoleteRemoved,
    CacheMakeRoom,
    CacheAllocFailed,
    CacheLimitReduced,
    LoadLookup,
    LoadCandidate,
    LoadFound,
    LoadRestoreFailed,
    CacheLimitEvict,
    CacheTokenEvict,
    CacheSummary,
    CacheSummaryEntry,
)

# the erasures of one create_checkpoint, before its "created" line
Erasure = CheckpointErasedTooClose | CheckpointErasedOld | CheckpointSuperseded
# the lines of a prompt start between "new prompt" and the first "cached n_tokens"
StartLine = (CheckpointChecked | CheckpointRestored | FullReprocess | CheckpointInvalidated | NeedEvaluate | NPastSet
             | CacheReuse)
