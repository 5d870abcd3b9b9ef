"""Decision coverage: which of the model's decisions a run reached, and how often.

A verifier is only as good as the states it reaches: a property that holds because the
fuzzer never took the branch where it could fail says nothing. Every rule of
``model/policy.py`` and every deciding branch of the operations (slot selection, restore or
re-processing, invalidation, the sweep, the cap, supersede, load selection, make-room,
obsolete removal, the limits, each fault site, each file outcome) shows in the events the
model emits; ``decisions_of`` names the decision each event records. The names are the
coverage vocabulary: ``pcspec verify --coverage`` prints them per design, the fuzzing
machine reports them through Hypothesis's ``event()`` (``pytest
--hypothesis-show-statistics``), and a test fails when a decision is never reached by the
default budget on any design unless ``UNREACHABLE`` says why it cannot be (per design, the
verify table marks what that design's runs did not reach).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from pcspec.model import events as ev
from pcspec.model.events import Event
from pcspec.model.heap import Faults

# decision -> what it is and where the rule lives (policy.py function, or the operation).
DECISIONS: dict[str, str] = {
    "select.pinned": "get_available_slot: the task's id_slot picks the slot",
    "select.lcp": "get_available_slot: the most similar idle slot (policy: slot_prompt_similarity)",
    "select.lru": "get_available_slot: the least recently used idle slot",
    "select.none": "get_available_slot: no idle slot (the task is deferred)",
    "select.update_cache": "policy.update_cache_on_lcp / LRU: the slot is saved and a better prompt loaded",
    "task.deferred": "process_single_task: the slot is busy or none is free",
    "task.requeued": "pop_deferred_task: a release re-queues one deferred task",
    "task.context_exceeded": "prompt start: a prompt of n_ctx tokens or more is refused",
    "start.fresh": "prompt start: nothing shared with the slot (n_prefix 0)",
    "start.resume_live": "prompt start: the live memory serves the prefix (no restore)",
    "start.restore": "policy.restore_choice: a checkpoint is restored",
    "start.reprocess.no_checkpoints": "prompt start: the memory cannot serve and the slot has no checkpoint",
    "start.reprocess.no_usable_checkpoint": "policy.restore_choice: none passes pos_max <= pos_next and the threshold",
    "start.reprocess.checkpoint_failed_to_load": "a restore's set_data failed (file checkpoints, fixed)",
    "start.reprocess.seq_rm_refused": "fixed: the memory refused seq_rm; the prompt is re-processed",
    "ckpt.create": "create_checkpoint: a checkpoint is made (batch break at a user message or the tail)",
    "ckpt.create_failed": "create_checkpoint: bad_alloc (fixed contains it; the C++ releases the slot)",
    "ckpt.kept_restored": "fixed: the restored checkpoint is not superseded by an identical one",
    "ckpt.skipped_full": "fixed: the list is full of the checkpoint the task restored; none is made",
    "ckpt.erase.invalidated": "policy.invalidated: pos_max > pos_next or n_tokens > n_prefix",
    "ckpt.erase.cap": "policy.cap_evictions: the list is at --ctx-checkpoints",
    "ckpt.erase.too_close": "policy.sweep_too_close: within --checkpoint-min-step of the previous one",
    "ckpt.erase.supersede": "create_checkpoint: a new checkpoint at the same n_tokens",
    "ckpt.erase.context_shift": "context shift: prompt.clear() drops every checkpoint",
    "gen.context_shift": "pre_decode: a generating slot at n_ctx shifts its context",
    "gen.truncated": "a generating slot at n_ctx stops (context shift off or not possible)",
    "slot.stall": "a slot holds more tokens than its prompt and never finishes (PROGRESS-1)",
    "save.skip_contained": "alloc step 1: the prompt is contained in an entry",
    "save.reject_oversize": "policy.is_oversize: the entry alone exceeds the limit",
    "save.bad_alloc": "alloc: std::bad_alloc while building the entry",
    "save.limit_shrunk": "policy.limit_after_bad_alloc: the limit is reduced for good",
    "save.fill_short": "prompt_save: get_data came up short (#30137 pops the entry)",
    "save.inserted": "a cache entry is inserted",
    "evict.obsolete": "alloc step 4: an entry whose tokens prefix the new prompt",
    "evict.make_room": "policy.make_room: FIFO eviction to fit the new entry",
    "evict.limit_bytes": "policy.update_evictions: over the byte limit",
    "evict.limit_tokens": "policy.update_evictions: over the token limit",
    "evict.loaded": "load: the loaded entry leaves the cache",
    "evict.load_failed": "fixed: an entry whose load failed is dropped",
    "evict.pop_back": "prompt_save: the short-filled entry is popped",
    "load.chosen": "policy.load_choice: a cached prompt beats the slot's",
    "load.none": "policy.load_choice: nothing better cached",
    "load.failed": "load: set_data of the main or draft state failed",
    "file.saved": "/slots save: a slot file is written",
    "file.restored": "/slots restore: tokens and checkpoints come back",
    "file.restore_failed": "/slots restore: the file is refused and the slot cleared",
    "file.appendix_ignored": "/slots restore: a damaged or implausible appendix is ignored",
    "file.draft_dropped": "/slots restore: the draft data did not fit; it is dropped",
    "file.uninit_written": "a slot file got unwritten bytes (UNINIT-2)",
    "state.uninit_loaded": "set_data of a buffer with unwritten bytes",
    "state.write_failed": "set_data failed (fault, corrupt or zeroed buffer)",
    "state.read_short": "get_data returned fewer bytes than get_size",
    "server.crash": "an abort or an escaped exception",
    "server.sleep": "sleep and wake: the cache and the slots are lost",
    "server.restart": "the process restarts, perhaps with other flags",
    **{f"fault.{site}": f"the fault site {site} was hit" for site in Faults.SITES},
}

# (design, decision) -> why the default budget cannot reach it on that design. Anything not
# listed must be reached by every design's survey.
CPP = ("baseline", "pr30137", "pr27451", "b11549")  # (the C++ designs and the upstream build b11549)
_EXCUSED: tuple[tuple[tuple[str, ...], str, str], ...] = (  # (designs, decision, why)
    (CPP, "ckpt.kept_restored", "only fixed keeps the restored checkpoint (Fixed.kept_checkpoint)"),
    (CPP, "ckpt.skipped_full", "only fixed keeps the restored checkpoint (Fixed.kept_checkpoint)"),
    (CPP, "start.reprocess.seq_rm_refused", "only fixed re-processes; the C++ aborts (server.crash)"),
    (CPP, "evict.load_failed", "only fixed drops an entry whose load failed"),
    (("fixed",), "slot.stall", "fixed leaves a busy pinned slot alone (cache_update_busy_slot)"),
    (
        ("baseline", "pr27451", "fixed", "b11549"),
        "evict.pop_back",
        "only #30137 pops a short-filled entry; baseline and #27451 keep it, fixed never appends before the fill",
    ),
    (("fixed",), "save.limit_shrunk", "fixed does not reduce the limit after a bad_alloc (LIVE-1)"),
    ((*CPP, "fixed"), "file.uninit_written", "no design writes unwritten bytes to a file (UNINIT-2 holds on all)"),
    ((*CPP, "fixed"), "state.uninit_loaded", "no design loads unwritten bytes (UNINIT-2 holds on all)"),
    (("fixed",), "server.crash", "fixed contains every fault (NOABORT-1)"),
    (
        ("fixed",),
        "start.reprocess.seq_rm_refused",
        "the memory refuses seq_rm only when its length disagrees with the slot's tokens, which only a"
        " semantically corrupted slot file brings about (the FILE-1 campaign, benchmarks/file1_campaign.py);"
        " the machine's corruptions are the detectable kind",
    ),
    (
        ("baseline", "pr27451", "b11549"),
        "save.fill_short",
        "no fill validation: a short fill goes unnoticed (the RB-1 violation)",
    ),
    (
        ("fixed",),
        "evict.limit_bytes",
        "the transactional save makes room before it inserts, and nothing else grows the unique bytes (a removal"
        " only shrinks a union), so update() never finds the cache over its limit",
    ),
)
UNREACHABLE: dict[tuple[str, str], str] = {(d, name): why for designs, name, why in _EXCUSED for d in designs}


def _slug(text: str) -> str:
    return text.replace(" ", "_").replace("-", "_")


def _select(e: ev.Select) -> tuple[str, ...]:
    first = "select.none" if e.slot is None else f"select.{e.how}"
    return (first, "select.update_cache") if e.update_cache else (first,)


def _release(e: ev.Release) -> tuple[str, ...]:
    return ("task.context_exceeded",) if e.error and "context size" in e.error else ()


def _prompt_start(e: ev.PromptStart) -> tuple[str, ...]:
    if e.restored is not None:
        return ("start.restore",)
    if e.reprocess is not None:
        return (f"start.reprocess.{_slug(e.reprocess)}",)
    return ("start.resume_live",) if e.n_past > 0 else ("start.fresh",)


def _entry_evict(e: ev.EntryEvict) -> tuple[str, ...]:
    name = f"evict.{e.reason}"
    return (name,) if name in DECISIONS else ()


def _file_write(e: ev.FileWrite) -> tuple[str, ...]:
    return ("file.saved", "file.uninit_written") if e.unwritten else ("file.saved",)


def _always(*names: str) -> Callable[[Event], tuple[str, ...]]:
    return lambda _e: names


# The decisions each event class records, by its class (most record none). ``count`` runs after
# every operation of every fuzzing step, and most events (``generate``, ``batch``, ``alloc``,
# ``fill``...) record none: they are passed over with one dictionary look-up.
_DECIDE: dict[type[Event], Callable[[Any], tuple[str, ...]]] = {
    ev.Select: _select,
    ev.Deferred: _always("task.deferred"),
    ev.Requeued: _always("task.requeued"),
    ev.Release: _release,
    ev.PromptStart: _prompt_start,
    ev.CkptCreate: _always("ckpt.create"),
    ev.CkptCreateFailed: _always("ckpt.create_failed"),
    ev.CkptKeptRestored: _always("ckpt.kept_restored"),
    ev.CkptCreateSkipped: _always("ckpt.skipped_full"),
    ev.CkptErase: lambda e: (f"ckpt.erase.{e.reason}",),
    ev.ContextShift: _always("gen.context_shift"),
    ev.Stall: _always("slot.stall"),
    ev.Truncated: _always("gen.truncated"),
    ev.SaveSkipContained: _always("save.skip_contained"),
    ev.SaveRejectOversize: _always("save.reject_oversize"),
    ev.SaveBadAlloc: _always("save.bad_alloc"),
    ev.SaveFillShort: _always("save.fill_short"),
    ev.LimitChange: _always("save.limit_shrunk"),
    ev.EntryInsert: _always("save.inserted"),
    ev.EntryEvict: _entry_evict,
    ev.LoadScan: lambda e: ("load.none",) if e.chosen is None else ("load.chosen",),
    ev.LoadFailed: _always("load.failed"),
    ev.FileWrite: _file_write,
    ev.FileRestore: _always("file.restored"),
    ev.FileRestoreFailed: _always("file.restore_failed"),
    ev.FileAppendixIgnored: _always("file.appendix_ignored"),
    ev.FileDraftDropped: _always("file.draft_dropped"),
    ev.UninitLoaded: _always("state.uninit_loaded"),
    ev.StateWriteFailed: _always("state.write_failed"),
    ev.StateReadShort: _always("state.read_short"),
    ev.Crash: _always("server.crash"),
    ev.Op: lambda e: ("server.sleep",) if e.name == "sleep_wake" else (),
    ev.Restart: _always("server.restart"),
    ev.FaultHit: lambda e: (f"fault.{e.site}",),
}
DECIDING_KINDS = frozenset(t.kind for t in _DECIDE)  # the kinds that can record a decision


def decisions_of(e: Event) -> tuple[str, ...]:
    """The decisions one event records (most record none)."""
    decide = _DECIDE.get(type(e))
    return () if decide is None else decide(e)


def count(events: Iterable[Event], into: Counter[str]) -> None:
    get = _DECIDE.get
    for e in events:
        decide = get(type(e))
        if decide is not None:
            for name in decide(e):
                into[name] += 1


def missing(design: str, counts: Counter[str]) -> list[str]:
    """Decisions a design's run never reached and that are not excused by ``UNREACHABLE``
    (the default budget must reach each decision on some design: ``never_reached``)."""
    return [name for name in DECISIONS if counts[name] == 0 and (design, name) not in UNREACHABLE]


def never_reached(coverage: dict[str, Counter[str]]) -> list[str]:
    """Decisions no design's runs reached, unless excused for every design: a test failure."""
    return [
        name
        for name in DECISIONS
        if not any(c[name] for c in coverage.values()) and not all((d, name) in UNREACHABLE for d in coverage)
    ]
