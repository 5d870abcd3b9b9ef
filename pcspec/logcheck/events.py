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

import re
import sys
from dataclasses import dataclass
from typing import Any, ClassVar, dataclass_transform


@dataclass_transform(frozen_default=True)
@dataclass(frozen=True)
class Event:
    """Every subclass is a frozen dataclass of its fields, and its ``kind`` is its name in
    snake case (``CheckpointCreated`` -> ``checkpoint_created``): renaming a class renames its
    events in ``--json`` and ``--trace``."""

    line: int
    level: str
    kind: ClassVar[str] = "event"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.kind = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()
        dataclass(frozen=True)(cls)


class SlotEvent(Event):
    slot: int
    task: int


# --------------------------------------------------------------------------------------------
# start-up (server-context.cpp: load_model / init)


class ServerInit(Event):
    """``initializing, n_slots = %d, n_ctx_slot = %d, kv_unified = '%s'`` (load_model). Starts a
    server run: a wake from sleep also re-runs load_model and loses every cached prompt."""

    n_slots: int
    n_ctx_slot: int
    kv_unified: bool


class CacheConfig(Event):
    """``prompt cache is enabled, size limit: %d MiB`` / ``no limit`` / ``prompt cache is
    disabled ...`` (load_model). ``limit_mib`` is None for "no limit" and when disabled."""

    enabled: bool
    limit_mib: int | None


class CheckpointConfig(Event):
    """``context checkpoints enabled, max = %d, min spacing = %d`` / ``... disabled``."""

    enabled: bool
    max: int
    min_spacing: int


class IdleSlotConfig(Event):
    """``idle slots will be saved to prompt cache [and cleared] upon starting a new task`` (init)
    or ``--cache-idle-slots requires --cache-ram, disabling``."""

    enabled: bool
    clear: bool


class SlotInit(SlotEvent):
    """``new slot, n_ctx = %d`` (load_model, one per slot)."""

    n_ctx: int


class BuildLine(Event):
    """TRACE ``cmn common_param: common_params_print_info: build %d (%s) with %s for %s%s``
    (common/common.cpp:402; 406 of b11434 and b11549), or the same two values in another form
    (``pcspec.logcheck.builds.parse_build``): the server binary's build number and commit. Printed once per
    process before load_model, so it belongs to every server run after it (a wake from sleep
    re-runs load_model without printing it again). ``commit`` is as printed (a short hash, or
    ``unknown`` for a build without git)."""

    number: int
    commit: str


class VerbosityLine(Event):
    """INFO ``cmn common_param: common_params_print_info: verbosity = %d (adjust with the `-lv N`
    CLI arg)`` (common/common.cpp:405 at 0c1e570): the log's verbosity threshold, printed once
    per process before load_model at every verbosity (``pcspec.logcheck.levels``)."""

    verbosity: int


# --------------------------------------------------------------------------------------------
# sequence state reads (src/llama-kv-cache.cpp: state_read_meta)


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


# --------------------------------------------------------------------------------------------
# slot selection (server-context.cpp: get_available_slot) and task life cycle


class SimChecked(SlotEvent):
    """``- checking sim = %.3f (%zu/%zu) > %.3f``: the slot's lcp with the new prompt."""

    f_sim: float
    lcp: int
    n_new: int
    thold: float


class SlotSkipped(SlotEvent):
    """``- skipping, is_processing = %d`` / ``- skipping, slot is empty``."""

    empty: bool


class SlotSelected(SlotEvent):
    """``selected slot by id (%d)`` / ``by LCP similarity, f_sim_best = ...`` / ``by LRU``.
    ``how`` is ``"id"``, ``"lcp"`` or ``"lru"``; ``f_keep`` (LCP picks only) is None when the
    server printed ``nan`` (an empty pinned slot)."""

    how: str
    f_keep: float | None


class TaskLaunched(SlotEvent):
    """``processing task, is_child = %d`` (launch_slot_with_task)."""

    is_child: bool


class NewPrompt(SlotEvent):
    """``new prompt, n_ctx_slot = %d, n_keep = %d, task.n_tokens = %d`` (update_slots)."""

    n_tokens: int


class CacheReuse(SlotEvent):
    """``reusing chunk with size %zu, shifting KV cache ...``: n_past exceeds the plain lcp."""



class CheckpointChecked(SlotEvent):
    """``checking checkpoint with [%d, %d] against %d...`` (``Checking`` before #25078); the
    last number is ``pos_min_thold``."""

    pos_min: int
    pos_max: int
    thold: int
    legacy: bool


class CheckpointRestored(SlotEvent):
    """``restored context checkpoint (pos_min = %d, pos_max = %d, n_tokens = %d, n_past = %d,
    size = %.3f MiB)``."""

    pos_min: int
    pos_max: int
    n_tokens: int | None
    n_past: int | None
    size: float


class FullReprocess(SlotEvent):
    """``forcing full prompt re-processing due to lack of cache data ...``."""



class CheckpointInvalidated(SlotEvent):
    """``erased invalidated context checkpoint (pos_min, pos_max, n_tokens, n_swa, pos_next,
    size)``."""

    pos_min: int
    pos_max: int
    n_tokens: int | None
    n_swa: int | None
    pos_next: int | None
    size: float


class NeedEvaluate(SlotEvent):
    """``need to evaluate at least 1 token for each active slot (n_past = %d, task.n_tokens() =
    %d)`` ([TAG_PROMPT_LOGITS])."""

    n_past: int
    n_task: int


class NPastSet(SlotEvent):
    """``n_past was set to %d``."""

    n_past: int


class CachedTokens(SlotEvent):
    """``cached n_tokens = %d, memory_seq_rm [%d, end)``: logged at every prompt step."""

    n_tokens: int
    seq_rm_from: int


class DoCheckpoint(SlotEvent):
    """DEBUG ``main/do_checkpoint = %s, pos_min = %d, pos_max = %d``: the memory's range read
    before the batch."""

    yes: bool
    pos_min: int
    pos_max: int


class CheckpointCreated(SlotEvent):
    """``created context checkpoint %d of %d (pos_min, pos_max, n_tokens, size)``: ``index`` is
    the list length after insertion, ``cap`` is ``--ctx-checkpoints``."""

    index: int | None
    cap: int | None
    pos_min: int
    pos_max: int
    n_tokens: int | None
    size: float


class CheckpointErasedOld(SlotEvent):
    """WARN ``erasing old context checkpoint (pos_min, pos_max, n_tokens, size)``: the cap."""

    pos_min: int
    pos_max: int
    n_tokens: int | None
    size: float


class CheckpointErasedTooClose(SlotEvent):
    """``erasing context checkpoint too close to an earlier one (...)``: the #25472 sweep."""

    pos_min: int
    pos_max: int
    n_tokens: int | None
    size: float


class CheckpointSuperseded(SlotEvent):
    """``superseding context checkpoint at n_tokens = %d`` (November 2026 code)."""

    n_tokens: int


class SlotFileCheckpoints(SlotEvent):
    """``restored %zu context checkpoint(s) from '%s'`` or ``... context checkpoint appendix ...
    - ignored`` (slot file restore, #26004): the list is replaced (``count`` may be 0)."""

    count: int


class ContextShift(SlotEvent):
    """WARN ``slot context shift, n_keep = %d, n_left = %d, n_discard = %d``: drops all
    checkpoints (``prompt.clear()``)."""

    n_discard: int


class PromptCleared(SlotEvent):
    """``clearing prompt with %zu tokens`` (prompt_clear: tokens and checkpoints)."""

    n_tokens: int


class LoraCleared(SlotEvent):
    """``clearing cache for lora change. %zu loras -> %zu loras``: ``prompt.clear()``."""



class SlotReleased(SlotEvent):
    """``stop processing: n_tokens = %d, truncated = %d`` (release)."""

    n_tokens: int


class PromptLoadFailed(SlotEvent):
    """WARN ``failed to load prompt from cache`` (prompt_load): the slot is then cleared."""



class IdleSlotSave(SlotEvent):
    """``saving idle slot to prompt cache`` (process_single_task)."""



class SaveFailed(SlotEvent):
    """ERROR ``failed to save complete prompt state`` (prompt_save, #30137): the new cache entry
    is popped again."""



class SlotPurged(Event):
    """WARN ``purging slot %d with %zu tokens`` (try_clear_idle_slots): cleared, not saved."""

    slot: int
    n_tokens: int


# --------------------------------------------------------------------------------------------
# prompt cache (server-task.cpp: server_prompt_cache, srv lines)


class CacheUpdateStart(Event):
    """``updating prompt cache`` (get_available_slot)."""



class CacheUpdateDone(Event):
    """``prompt cache update took %.2f ms`` (get_available_slot): what ``pcspec bench`` reports
    as the update's time (None in a ``--trace`` file written before the time was read: the
    trace format is unchanged otherwise, and such a file still loads)."""

    ms: float | None = None


class PromptSave(Event):
    """``- saving prompt with length %d, total state size = %.3f MiB (draft: %.3f MiB)``."""

    length: int
    state_mib: float
    draft_mib: float


class CacheAlreadyCached(Event):
    """``- prompt is already in the cache, skipping`` (alloc step 1)."""



class CacheOversize(Event):
    """WARN ``- prompt state size %.3f MiB exceeds cache size limit %.3f MiB, skipping``."""

    size_mib: float
    limit_mib: float


class CacheObsoleteRemoved(Event):
    """``- removing obsolete cached prompt with length %d`` (alloc step 4)."""

    length: int


class CacheMakeRoom(Event):
    """WARN ``- making room for prompt cache entry, removing oldest entry (size = %.3f MiB)``."""

    size_mib: float


class CacheAllocFailed(Event):
    """ERROR ``failed to allocate memory for prompt cache state: %s`` (std::bad_alloc)."""



class CacheLimitReduced(Event):
    """WARN ``- cache size limit reduced to %.3f MiB`` (after bad_alloc)."""

    limit_mib: float


class LoadLookup(Event):
    """``- looking for better prompt, base f_keep = %.3f, f_sim = %.3f`` (``sim`` before
    #26271)."""

    f_keep: float
    f_sim: float
    legacy: bool


class LoadCandidate(Event):
    """``  - prompt with length %7zu, lcp = %7d, f_keep = %.3f, f_sim = %.3f`` (#26218)."""

    length: int
    lcp: int
    f_keep: float
    f_sim: float


class LoadFound(Event):
    """``- found better prompt with f_keep = %.3f, f_sim = %.3f``."""

    f_keep: float
    f_sim: float


class LoadRestoreFailed(Event):
    """``failed to restore state with size %zu``: ERROR for the target, WARN for the draft."""

    draft: bool


class CacheLimitEvict(Event):
    """WARN ``- cache size limit reached, removing oldest entry (size = %.3f MiB)`` (update)."""

    size_mib: float


class CacheTokenEvict(Event):
    """WARN ``- cache token limit (%zu, est: %zu) reached, removing oldest entry (size = %.3f
    MiB)`` (update)."""

    limit_tokens: int
    est: int
    size_mib: float


class CacheSummary(Event):
    """``- cache state: %zu prompts, %.3f MiB (limits: %.3f MiB, %zu tokens, %zu est)``."""

    n_prompts: int
    total_mib: float
    limit_mib: float
    limit_tokens: int
    est: int | None


class CacheSummaryEntry(Event):
    """``  - prompt %p: %7d tokens, checkpoints: %2zu, %9.3f MiB`` (one per entry, front
    first)."""

    n_tokens: int
    n_ckpts: int | None
    size_mib: float


# --------------------------------------------------------------------------------------------
# how the server runs its tasks: lines the checker does not replay, read by ``pcspec live`` to
# follow the server's schedule and its decision tasks (``pcspec.logcheck.tasks``; the checker's
# reader never yields them, so ``check-log`` counts and judges what it did before them)


class TaskPosted(Event):
    """DEBUG ``que post: new task, id = %d[/%d], front = %d`` (server-queue.cpp:37, 62): a task
    queued; ``front`` for a task queued ahead of the others (a cancel)."""

    task: int
    front: bool


class TaskTaken(Event):
    """DEBUG ``que <func>: processing task, id = %d`` (server-queue.cpp:152): the loop takes a
    task from the queue (again, for a deferred one)."""

    task: int


class UpdateSlots(Event):
    """DEBUG ``que start_loop: update slots`` (server-queue.cpp:306): one call of
    update_slots."""



class TaskDeclined(Event):
    """DEBUG ``decoding, decline task, id_task = %d`` (server-context.cpp:2359; 2720 of b11549):
    a task offered while a decode runs, offered again after it."""

    task: int


class NextResponsePosted(Event):
    """DEBUG ``posting NEXT_RESPONSE`` (server-context.cpp:2807; 3178 of b11549): the task
    update_slots posts for itself, whose id is no request's."""



class ParentLaunched(Event):
    """TRACE ``launching slots for parent task id_task = %d with %zu child tasks``
    (server-context.cpp:2252; 2483 of b11549)."""

    task: int
    n_children: int


class WaitingForParent(SlotEvent):
    """DEBUG ``waiting for parent slot to complete`` (server-context.cpp:3109; 3488 of b11549): a
    child task waits for its parent's shared prefix."""



class SharedPromptCopied(SlotEvent):
    """TRACE ``- copying shared prompt (%d tokens) to child %d`` (3842 of b11549): the parent's
    prefix copied to the slot of a waiting child."""

    n_tokens: int
    child: int


class DecisionSent(SlotEvent):
    """DEBUG ``sending decision result`` (2404 of b11549)."""



class SwaCacheCreated(Event):
    """libllama's INFO ``<func>: creating     SWA KV cache, size = %u cells``
    (src/llama-kv-cache-iswa.cpp:100; ``creating SWA KV cache`` in
    src/llama-kv-cache-dsa-iswa.cpp:70): the SWA cache's cells, a fact the model's
    configuration needs."""

    cells: int


class KvStreamCopied(Event):
    """libllama's DEBUG ``<func>: copying KV buffer: stream %d to stream %d``
    (src/llama-kv-cache.cpp:841; 859 of b11549): a sequence copied across KV streams."""

    src: int
    dst: int


ALL_EVENT_TYPES: tuple[type[Event], ...] = tuple(
    t for t in vars(sys.modules[__name__]).values()
    if isinstance(t, type) and issubclass(t, Event) and t not in (Event, SlotEvent))

# the erasures of one create_checkpoint, before its "created" line
Erasure = CheckpointErasedTooClose | CheckpointErasedOld | CheckpointSuperseded
# the lines of a prompt start between "new prompt" and the first "cached n_tokens"
StartLine = (CheckpointChecked | CheckpointRestored | FullReprocess | CheckpointInvalidated | NeedEvaluate | NPastSet
             | CacheReuse)
