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
from collections.abc import Iterable, Iterator

from pcspec.model.heap import Event, Faults

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
UNREACHABLE: dict[tuple[str, str], str] = {
    **{
        (d, "ckpt.kept_restored"): "only fixed keeps the restored checkpoint (keep_restored)"
        for d in ("master", "pr30137", "pr27451")
    },
    **{
        (d, "ckpt.skipped_full"): "only fixed keeps the restored checkpoint (keep_restored)"
        for d in ("master", "pr30137", "pr27451")
    },
    **{
        (d, "start.reprocess.seq_rm_refused"): "only fixed re-processes; the C++ aborts (server.crash)"
        for d in ("master", "pr30137", "pr27451")
    },
    **{
        (d, "evict.load_failed"): "only fixed drops an entry whose load failed"
        for d in ("master", "pr30137", "pr27451")
    },
    **{(d, "slot.stall"): "fixed leaves a busy pinned slot alone (cache_update_busy_slot)" for d in ("fixed",)},
    **{
        (d, "evict.pop_back"): "only #30137 pops a short-filled entry; master and #27451 keep it, fixed never"
        " appends before the fill"
        for d in ("master", "pr27451", "fixed")
    },
    **{
        (d, "save.limit_shrunk"): "fixed does not reduce the limit after a bad_alloc (LIVE-1)"
        for d in ("fixed",)
    },
    **{
        (d, "file.uninit_written"): "no design writes unwritten bytes to a file (UNINIT-2 holds on all)"
        for d in ("master", "pr30137", "pr27451", "fixed")
    },
    **{
        (d, "state.uninit_loaded"): "no design loads unwritten bytes (UNINIT-2 holds on all four)"
        for d in ("master", "pr30137", "pr27451", "fixed")
    },
    **{(d, "server.crash"): "fixed contains every fault (NOABORT-1)" for d in ("fixed",)},
    **{
        (d, "start.reprocess.seq_rm_refused"): "the memory refuses seq_rm only when its length disagrees with the"
        " slot's tokens, which only a semantically corrupted slot file brings about (the FILE-1 campaign,"
        " benchmarks/file1_campaign.py); the machine's corruptions are the detectable kind"
        for d in ("fixed",)
    },
    **{
        (d, "save.fill_short"): "no fill validation: a short fill goes unnoticed (the RB-1 violation)"
        for d in ("master", "pr27451")
    },
    **{
        (d, "evict.limit_bytes"): "the transactional save makes room before it inserts, and nothing else grows"
        " the unique bytes (a removal only shrinks a union), so update() never finds the cache over its limit"
        for d in ("fixed",)
    },
}


def _slug(text: str) -> str:
    return text.replace(" ", "_").replace("-", "_")


def decisions_of(e: Event) -> Iterator[str]:
    """The decisions one event records (most record none)."""
    k, d = e.kind, e.data
    if k == "select":
        yield "select.none" if d["slot"] is None else f"select.{d['how']}"
        if d["update_cache"]:
            yield "select.update_cache"
    elif k == "deferred":
        yield "task.deferred"
    elif k == "requeued":
        yield "task.requeued"
    elif k == "release" and d.get("error") and "context size" in str(d["error"]):
        yield "task.context_exceeded"
    elif k == "prompt_start":
        if d["restored"] is not None:
            yield "start.restore"
        elif d["reprocess"] is not None:
            yield f"start.reprocess.{_slug(d['reprocess'])}"
        elif d["n_past"] > 0:
            yield "start.resume_live"
        else:
            yield "start.fresh"
    elif k == "ckpt_create":
        yield "ckpt.create"
    elif k == "ckpt_create_failed":
        yield "ckpt.create_failed"
    elif k == "ckpt_kept_restored":
        yield "ckpt.kept_restored"
    elif k == "ckpt_create_skipped":
        yield "ckpt.skipped_full"
    elif k == "ckpt_erase":
        yield f"ckpt.erase.{d['reason']}"
    elif k == "context_shift":
        yield "gen.context_shift"
    elif k == "stall":
        yield "slot.stall"
    elif k == "truncated":
        yield "gen.truncated"
    elif k in ("save_skip_contained", "save_reject_oversize", "save_bad_alloc", "save_fill_short"):
        yield "save." + k[len("save_") :]
    elif k == "limit_change":
        yield "save.limit_shrunk"
    elif k == "entry_insert":
        yield "save.inserted"
    elif k == "entry_evict" and f"evict.{d['reason']}" in DECISIONS:
        yield f"evict.{d['reason']}"
    elif k == "load_scan":
        yield "load.none" if d["chosen"] is None else "load.chosen"
    elif k == "load_failed":
        yield "load.failed"
    elif k == "file_write":
        yield "file.saved"
        if d.get("unwritten"):
            yield "file.uninit_written"
    elif k == "file_restore":
        yield "file.restored"
    elif k in ("file_restore_failed", "file_appendix_ignored", "file_draft_dropped"):
        yield "file." + k[len("file_") :]
    elif k == "uninit_loaded":
        yield "state.uninit_loaded"
    elif k == "state_write_failed":
        yield "state.write_failed"
    elif k == "state_read_short":
        yield "state.read_short"
    elif k == "crash":
        yield "server.crash"
    elif k == "op" and d.get("name") == "sleep_wake":
        yield "server.sleep"
    elif k == "restart":
        yield "server.restart"
    elif k == "fault_hit":
        yield f"fault.{d['site']}"


# The kinds ``decisions_of`` can name a decision for (its branches, in order): ``count`` runs
# after every operation of every fuzzing step, and most events (``generate``, ``batch``,
# ``alloc``, ``fill``...) record none, so they are passed over without a generator.
# ``tests/test_judge_shortcuts.py`` checks the set against the branches.
DECIDING_KINDS = frozenset(
    {
        "select", "deferred", "requeued", "release", "prompt_start", "ckpt_create", "ckpt_create_failed",
        "ckpt_kept_restored", "ckpt_create_skipped", "ckpt_erase", "context_shift", "stall", "truncated",
        "save_skip_contained", "save_reject_oversize", "save_bad_alloc", "save_fill_short", "limit_change",
        "entry_insert", "entry_evict", "load_scan", "load_failed", "file_write", "file_restore", "file_restore_failed",
        "file_appendix_ignored", "file_draft_dropped", "uninit_loaded", "state_write_failed",
        "state_read_short", "crash", "op", "restart", "fault_hit",
    }
)  # fmt: skip


def count(events: Iterable[Event], into: Counter[str]) -> None:
    for e in events:
        if e.kind in DECIDING_KINDS:
            for name in decisions_of(e):
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
