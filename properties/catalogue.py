"""The property catalogue: stable IDs, statements, families, C++ places, checks.

IDs are stable: docs, the oracle, trace files and users' scripts refer to them. A new
property gets a new ID; a changed statement keeps its ID only if every old verdict stays
true.
"""

from __future__ import annotations

from pcspec.model.errors import PcspecError
from pcspec.properties import (
    accounting,
    checkpoints,
    files,
    immutability,
    refs,
    restore,
    reuse,
    rollback,
    state,
    uninit,
)
from pcspec.properties.base import Property

CATALOGUE: tuple[Property, ...] = (
    Property(
        "IMM-1",
        "A published checkpoint (metadata and payload) never changes while any holder references it.",
        "immutability",
        "server-context.cpp: create_checkpoint; server-task.h: server_prompt::checkpoints",
        immutability.imm1_published_checkpoint_unchanged,
    ),
    Property(
        "IMM-2",
        "A cache entry's saved state never changes while the entry is in the cache.",
        "immutability",
        "server-task.cpp: server_prompt_cache::load (main cleared before the draft load)",
        immutability.imm2_entry_unchanged,
    ),
    Property(
        "UNINIT-1",
        "After every operation, no buffer reachable from a slot, a checkpoint or a cache entry has unwritten bytes.",
        "uninit",
        "common.h: common_no_init_allocator; server-context.cpp: server_slot::prompt_save",
        uninit.uninit1_no_unwritten_reachable,
    ),
    Property(
        "UNINIT-2",
        "No unwritten byte is ever loaded into a context or written to a slot file.",
        "uninit",
        "llama_state_seq_set_data_ext callers; slot save",
        uninit.uninit2_no_unwritten_loaded_or_written,
    ),
    Property(
        "RB-1",
        "A failed save leaves no partial or invalid entry in the cache.",
        "rollback",
        "server-context.cpp: server_slot::prompt_save",
        rollback.rb1_no_partial_entry,
    ),
    Property(
        "RB-2",
        "A failed save leaves the cache exactly as it was (no collateral eviction).",
        "rollback",
        "server-task.cpp: server_prompt_cache::alloc (obsolete removal, make room, bad_alloc)",
        rollback.rb2_failed_save_changes_nothing,
    ),
    Property(
        "RB-3",
        "An allocation failure anywhere in a save is contained (no crash, no escaped exception).",
        "rollback",
        "server-task.cpp: server_prompt_cache::alloc (try scope, states.push_back)",
        rollback.rb3_alloc_failure_contained,
        after_crash=True,
    ),
    Property(
        "ACC-1",
        "Accounted cache bytes equal unique bytes.",
        "accounting",
        "server-task.h: server_prompt_cache_state::size",
        accounting.acc1_accounted_equals_unique,
    ),
    Property(
        "ACC-2",
        "Apart from the containment skip and injected faults, an entry is rejected as oversize if and "
        "only if its own unique bytes exceed the limit; a rejection evicts nothing.",
        "accounting",
        "server-task.cpp: server_prompt_cache::alloc step 3",
        accounting.acc2_reject_iff_oversize,
    ),
    Property(
        "ACC-3",
        "Eviction is minimal: no entry is evicted to make room that unique accounting did not need.",
        "accounting",
        "server-task.cpp: server_prompt_cache::alloc step 5, update",
        accounting.acc3_minimal_eviction,
    ),
    Property(
        "LIMIT-1",
        "At every publication and after every operation, unique bytes are within the byte limit and "
        "tokens within the token limit.",
        "accounting",
        "server-task.cpp: server_prompt_cache::alloc, update",
        accounting.limit1_within_limits,
    ),
    Property(
        "REF-1",
        "Every buffer's refcount equals its holders; nothing referenced is freed; nothing unreferenced stays live.",
        "ownership",
        "shared_ptr<const common_prompt_checkpoint>; server_prompt_cache eviction",
        refs.ref1_refcounts_match_holders,
    ),
    Property(
        "CKPT-1",
        "A slot's checkpoints: at most the cap; n_tokens pairwise distinct; pos_max = n_tokens - 1 >= pos_min.",
        "checkpoints",
        "server-context.cpp: create_checkpoint",
        checkpoints.ckpt1_slot_list_shape,
    ),
    Property(
        "CKPT-2",
        "Every checkpoint held by a slot or an entry is the state of a prefix of that holder's tokens "
        "(or, while a prompt is processing, of the task's prompt).",
        "checkpoints",
        "server-context.cpp: update_slots (invalidation), create_checkpoint",
        checkpoints.ckpt2_describes_prefix,
    ),
    Property(
        "STATE-1",
        "For every slot and each of its contexts, the sequence's memory is the state of exactly the "
        "slot's bookkept tokens; an empty token list means an empty sequence.",
        "state",
        "server-task.cpp: load; server-context.cpp: update_slots, slot restore",
        state.state1_memory_matches_tokens,
    ),
    Property(
        "RESTORE-1",
        "At prompt start the restored checkpoint has pos_max <= pos_next, and every kept checkpoint "
        "describes a prefix of the new prompt.",
        "checkpoints",
        "server-context.cpp: update_slots (SLOT_STATE_STARTED)",
        checkpoints.restore1_prompt_start,
    ),
    Property(
        "NOABORT-1",
        "No reachable state triggers an abort, whatever faults are injected.",
        "state",
        "GGML_ABORT sites: update_slots, common_prompt_checkpoint, common_memory::seq_rm",
        state.noabort1_no_crash,
        after_crash=True,
    ),
    Property(
        "PROGRESS-1",
        "Every accepted task finishes or is answered with an error: no update_slots pass leaves a busy "
        "slot unable to ever advance.",
        "state",
        "server-context.cpp: get_available_slot (cache load onto a busy pinned slot, 1534-1631), the "
        "prompt batch loop (3420-3470); docs/FINDINGS.md, F1",
        state.progress1_no_stall,
    ),
    Property(
        "FILE-1",
        "A slot file the server wrote restores its tokens and checkpoints exactly; a file corrupted in a "
        "way the format can detect is rejected with a reason and the slot left consistent.",
        "files",
        "server-context.cpp: slot save/restore, checkpoint appendix (#26004)",
        files.file1_round_trip_and_rejection,
        after_crash=True,
    ),
    Property(
        "FILE-2",
        "The reported bytes written equal the file size, and the bytes read equal what the reader consumed.",
        "files",
        "server-context.cpp: slot save/restore responses (n_written, n_read; #26004)",
        files.file2_reported_bytes,
        extended=True,
    ),
    Property(
        "LIVE-1",
        "A transient allocation failure does not permanently reduce the cache limit.",
        "accounting",
        "server-task.cpp: server_prompt_cache::alloc (catch bad_alloc)",
        accounting.live1_limit_not_reduced,
        advisory=True,
    ),
    Property(
        "PERF-1",
        "Saving, loading or cloning a prompt copies no checkpoint payload bytes.",
        "performance",
        "server-task.cpp: server_prompt_cache::alloc (states.push_back copies the list)",
        state.perf1_no_payload_copies,
    ),
    Property(
        "CKPT-4",
        "Every checkpoint erasure has an allowed reason (invalidation, the cap, the spacing sweep when "
        "full, a supersede at equal n_tokens, a context shift; clears and prompt replacements drop lists).",
        "checkpoints",
        "server-context.cpp: create_checkpoint, update_slots",
        checkpoints.ckpt4_erasure_reasons,
        extended=True,
    ),
    Property(
        "PERF-3",
        "A prompt that strictly extends a recurrent or hybrid slot's live tokens resumes from live memory, "
        "with no restore.",
        "performance",
        "server-context.cpp: update_slots (pos_min_thold, #24110)",
        checkpoints.perf3_extension_resumes,
        extended=True,
    ),
    Property(
        "PERF-2",
        "A checkpoint that a task restored is not erased or re-created identically by that same task.",
        "performance",
        "server-context.cpp: create_checkpoint (sweep, supersede); #30683",
        checkpoints.perf2_restored_kept,
    ),
    Property(
        "REUSE-1",
        "No prompt start re-processes from 0, nor from a worse point, while the slot held live memory or a "
        "checkpoint of the new prompt's prefix that the restore arithmetic resumes further and whose state "
        "serves that point (every memory kind, full-type recurrent restores and pos_min 0 included).",
        "reuse",
        "server-context.cpp:3274-3386 (update_slots: pos_min_thold, the checkpoint scan, n_past -= 1)",
        reuse.reuse1_best_resume,
        extended=True,
    ),
    Property(
        "REUSE-2",
        "A completion task on an empty or unrelated slot, pinned or not, gets a cache load whenever an entry "
        "shares a prefix with it and passes the load rules, and the entry loaded is the one the rules choose "
        "(an empty slot's load baseline, f_keep = -1, included).",
        "reuse",
        "server-context.cpp:1528-1640 (get_available_slot); server-task.cpp: server_prompt_cache::load",
        reuse.reuse2_cache_load,
        extended=True,
    ),
    Property(
        "CKPT-3",
        "Checkpoint creation is complete and not excessive: batches end where the rules name a checkpoint "
        "(the last user-message start, spaced user-message starts, the tail positions), each batch start the "
        "rules name gets one, and none is made where the spacing rule forbids it.",
        "checkpoints",
        "server-context.cpp:3441-3616 (update_slots: the batch fill's breaks and do_checkpoint)",
        checkpoints.ckpt3_creation_rules,
        extended=True,
    ),
    Property(
        "CKPT-5",
        "A prompt batch ends before the slot's share of n_batch is used and before the prompt's end only "
        "where the rules name an end: the last user-message start, a user-message start when the slot has "
        "no checkpoint or its newest is more than --checkpoint-min-step earlier, or 4 + n_ubatch or 4 tokens "
        "before the prompt's end (each at most n_batch).",
        "checkpoints",
        "server-context.cpp:3505-3560 (update_slots: the prompt batch fill loop and its breaks)",
        checkpoints.ckpt5_batch_ends,
    ),
    Property(
        "RESTORE-2",
        "At every prompt start the restore choice is the C++ rule's over the slot's state as the prompt start "
        "found it: live memory is kept if its pos_min < pos_min_thold (pos_next - n_swa, one lower for a prompt "
        "without new tokens, at least 0); otherwise the newest checkpoint with pos_max <= pos_next and pos_min "
        "< pos_min_thold or pos_min == 0 is restored, resuming at min(pos_next, max(pos_min + 1, pos_max), "
        "n_tokens), or the prompt is re-processed from 0. A design resuming by its own best-point rule (fixed) "
        "restores only checkpoints with pos_max <= pos_next, and resumes by that arithmetic.",
        "checkpoints",
        "server-context.cpp:3271-3388 of 0c1e570 (update_slots: pos_min_thold 3278, live test 3330, the scan "
        "3332-3346, the restore 3355-3356, n_past -= 1 3383-3388)",
        restore.restore2_restore_choice,
    ),
)

BY_ID: dict[str, Property] = {p.id: p for p in CATALOGUE}


def get_property(pid: str) -> Property:
    if pid in BY_ID:
        return BY_ID[pid]
    raise PcspecError(f"unknown property {pid!r}; valid properties: {', '.join(BY_ID)}")
