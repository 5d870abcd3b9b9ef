"""The log level of every line kind the reader recognises, as the C++ prints it.

``common/log.h`` (0c1e570 and b11549 alike) gives each macro a verbosity: ``LOG_ERR`` 1,
``LOG_WRN`` 2, ``LOG_INF`` 3, ``LOG_TRC`` 4 (printed with the letter ``I``), ``LOG_DBG`` 5
(``log.h:24-28, 120-124``); a line is printed when its verbosity is at most the threshold, which
is 3 (``LOG_DEFAULT_LLAMA``, ``log.h:32``; ``common.h:536`` ``verbosity = 3``) unless the server
is started with ``-lv N`` or ``-v`` (``INT_MAX``, ``arg.cpp:3924-3949`` at 0c1e570). libllama's own
lines reach the same log through ``common_log_default_callback``, which maps its ``INFO`` to
``LOG_LEVEL_TRACE`` and its ``DEBUG`` to ``LOG_LEVEL_DEBUG`` (``log.cpp:529-544``).

The server's ``SLT_x`` / ``SRV_x`` macros (``tools/server/server-common.h:26-38``) and the
``COM_x`` macros of ``common.cpp`` wrap these. ``LEVELS`` gives, for each event kind of
``pcspec.logcheck.events``, the macro of its call site(s) (server-context.cpp and server-task.cpp
at 0c1e570; b11549 prints every one of them at the same level, at the lines given second).
A kind whose call sites differ in level (``IdleSlotConfig``: TRC when enabled, WRN when refused;
``LoadRestoreFailed``: ERR or WRN) is listed at its lowest level with an ``I``: the level letter
of a ``W``/``E`` line is shown at every verbosity.
"""

from __future__ import annotations

from pcspec.logcheck import events as ev

ERR, WRN, INF, TRC, DBG = 1, 2, 3, 4, 5
NAMES = {ERR: "ERR", WRN: "WRN", INF: "INF", TRC: "TRC", DBG: "DBG"}
DEFAULT_VERBOSITY = INF  # common.h:536, log.h:32
EVERYTHING = 2**31 - 1  # -v: INT_MAX (arg.cpp:3927)

# event kind -> the verbosity of its call site as an I/D line (server-context.cpp "sc",
# server-task.cpp "st", common.cpp "cm"; 0c1e570 line, then b11549 line)
LEVELS: dict[type[ev.Event], int] = {
    ev.ServerInit: INF,  # sc:1231 / 1383 SRV_INF "initializing, n_slots"
    ev.BuildLine: TRC,  # cm:402 COM_TRC "common_params_print_info: build"
    ev.CacheConfig: TRC,  # sc:1334-1342 / 1486-1494 SRV_TRC "prompt cache is enabled|disabled"
    ev.CheckpointConfig: TRC,  # sc:1347-1350 / 1499-1502 SRV_TRC "context checkpoints enabled"
    ev.IdleSlotConfig: TRC,  # sc:1407-1411 / 1559-1563 SRV_TRC (the refusal, 1403 / 1555, is WRN)
    ev.SlotInit: TRC,  # sc:1281 / 1433 SLT_TRC "new slot, n_ctx"
    ev.StateRead: DBG,  # libllama LLAMA_LOG_DEBUG "state_read_meta" (log.cpp:531)
    ev.SimChecked: TRC,  # sc:1568 / 1720 SLT_TRC "checking sim"
    ev.SlotSkipped: TRC,  # sc:1552-1560 / 1704-1712 SLT_TRC "skipping, ..."
    ev.SlotSelected: INF,  # sc:1537, 1582, 1611 / 1689, 1734, 1763 SLT_INF "selected slot by"
    ev.TaskLaunched: INF,  # sc:1810 / 1962 SLT_INF "processing task, is_child"
    ev.NewPrompt: TRC,  # sc:3126 / 3505 SLT_TRC "new prompt, n_ctx_slot"
    ev.CacheReuse: TRC,  # sc:3243 / 3639 SLT_TRC "reusing chunk with size"
    ev.CheckpointChecked: TRC,  # sc:3337 / 3733 SLT_TRC "checking checkpoint with"
    ev.CheckpointRestored: TRC,  # sc:3357 / 3763 SLT_TRC "restored context checkpoint"
    ev.FullReprocess: TRC,  # sc:3361 / 3767 SLT_TRC "forcing full prompt re-processing"
    ev.CheckpointInvalidated: TRC,  # sc:3374 / 3780 SLT_TRC "erased invalidated context checkpoint"
    ev.NeedEvaluate: WRN,  # sc:3385 / 3791 SLT_WRN "need to evaluate at least 1 token"
    ev.NPastSet: WRN,  # sc:3387 / 3793 SLT_WRN "n_past was set to"
    ev.CachedTokens: TRC,  # sc:3423 / 3829 SLT_TRC "cached n_tokens"
    ev.DoCheckpoint: DBG,  # sc:3610 / 4056 SLT_DBG "main/do_checkpoint"
    ev.CheckpointCreated: TRC,  # sc:2349 / 2580 SLT_TRC "created context checkpoint k of N"
    ev.CheckpointErasedOld: WRN,  # sc:2316 / 2547 SLT_WRN "erasing old context checkpoint"
    ev.CheckpointErasedTooClose: TRC,  # sc:2301 / 2532 SLT_TRC "... too close to an earlier one"
    ev.CheckpointSuperseded: TRC,  # sc:2327 / 2558 SLT_TRC "superseding context checkpoint"
    ev.SlotFileCheckpoints: INF,  # b11549 sc:2712 SLT_INF "restored N context checkpoint(s)" (appendix: WRN)
    ev.ContextShift: WRN,  # sc:2928 / 3299 SLT_WRN "slot context shift"
    ev.PromptCleared: TRC,  # sc:294 / 344 SLT_TRC "clearing prompt with"
    ev.LoraCleared: TRC,  # sc:1695 / 1847 SLT_TRC "clearing cache for lora change"
    ev.SlotReleased: INF,  # sc:518 / 586 SLT_INF "stop processing"
    ev.PromptLoadFailed: WRN,  # sc:287 / 337 SLT_WRN "failed to load prompt from cache"
    ev.IdleSlotSave: TRC,  # sc:2420 / 2782 SLT_TRC "saving idle slot to prompt cache"
    ev.SaveFailed: ERR,  # #30137's SLT_ERR "failed to save complete prompt state"
    ev.SlotPurged: WRN,  # sc:1661 / 1813 SRV_WRN "purging slot"
    ev.CacheUpdateStart: TRC,  # sc:1624 / 1776 SRV_TRC "updating prompt cache"
    ev.CacheUpdateDone: TRC,  # sc:1636 / 1788 SRV_TRC "prompt cache update took"
    ev.PromptSave: TRC,  # sc:268 / 318 SRV_TRC "saving prompt with length"
    ev.CacheAlreadyCached: TRC,  # st:1717 / 1720 SRV_TRC "prompt is already in the cache"
    ev.CacheOversize: WRN,  # st:1732 / 1735 SRV_WRN "prompt state size ... exceeds"
    ev.CacheObsoleteRemoved: TRC,  # st:1742 / 1745 SRV_TRC "removing obsolete cached prompt"
    ev.CacheMakeRoom: WRN,  # st:1753 / 1756 SRV_WRN "making room for prompt cache entry"
    ev.CacheAllocFailed: ERR,  # st:1768 / 1771 SRV_ERR "failed to allocate memory"
    ev.CacheLimitReduced: WRN,  # st:1772 / 1775 SRV_WRN "cache size limit reduced"
    ev.LoadLookup: TRC,  # st:1799 / 1802 SRV_TRC "looking for better prompt"
    ev.LoadCandidate: TRC,  # st:1810 / 1813 SRV_TRC "prompt with length, lcp"
    ev.LoadFound: TRC,  # st:1826 / 1829 SRV_TRC "found better prompt"
    ev.LoadRestoreFailed: WRN,  # st:1834 / 1837 SRV_ERR, st:1852 / 1855 SRV_WRN
    ev.CacheLimitEvict: WRN,  # st:1873 / 1876 SRV_WRN "cache size limit reached"
    ev.CacheTokenEvict: WRN,  # st:1887 / 1890 SRV_WRN "cache token limit"
    ev.CacheSummary: TRC,  # st:1894 / 1897 SRV_TRC "cache state:"
    ev.CacheSummaryEntry: TRC,  # st:1898 / 1901 SRV_TRC "prompt %p: tokens, checkpoints"
    ev.VerbosityLine: INF,  # cm:405 COM_INF "common_params_print_info: verbosity = N"
    # the lines of pcspec.logcheck.tasks (server-queue.cpp "sq")
    ev.TaskPosted: DBG,  # sq:37, 62 QUE_DBG "new task, id"
    ev.TaskTaken: DBG,  # sq:152 QUE_DBG "processing task, id"
    ev.UpdateSlots: DBG,  # sq:306 QUE_DBG "update slots"
    ev.TaskDeclined: DBG,  # sc:2359 / 2720 SRV_DBG "decoding, decline task"
    ev.NextResponsePosted: DBG,  # sc:2807 / 3178 SRV_DBG "posting NEXT_RESPONSE"
    ev.ParentLaunched: TRC,  # sc:2252 / 2483 SRV_TRC "launching slots for parent task"
    ev.WaitingForParent: DBG,  # sc:3109 / 3488 SLT_DBG "waiting for parent slot to complete"
    ev.SharedPromptCopied: TRC,  # b11549 sc:3842 SLT_TRC "copying shared prompt"
    ev.DecisionSent: DBG,  # b11549 sc:2404 SLT_DBG "sending decision result"
    ev.SwaCacheCreated: TRC,  # libllama LLAMA_LOG_INFO "creating SWA KV cache" (log.cpp:532)
    ev.KvStreamCopied: DBG,  # libllama LLAMA_LOG_DEBUG "copying KV buffer" (log.cpp:531)
}


def level_of(e: ev.Event) -> int:
    """The verbosity at which ``e``'s line is printed: its printed letter ``W``/``E`` when it
    has one (those lines are shown at every verbosity), else its call site's."""
    if e.level == "W":
        return WRN
    if e.level == "E":
        return ERR
    return LEVELS[type(e)]


def shown(kind: type[ev.Event], verbosity: int) -> bool:
    """Whether lines of ``kind`` are printed at ``verbosity`` (the lowest level of its sites)."""
    return LEVELS[kind] <= verbosity


def describe(verbosity: int) -> str:
    if verbosity >= DBG:
        return f"{verbosity} (-v: every line)"
    if verbosity == TRC:
        return "4 (-lv 4: TRACE lines, no DEBUG)"
    return f"{verbosity} (the default: INFO, WARN and ERROR lines only)"
