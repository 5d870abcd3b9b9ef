"""The deviation rules of the log checker: id -> what it checks and the C++ it mirrors.

A deviation is a ``pcspec.core.results.Finding`` of kind ``deviation``: at line ``at`` the log
shows something rule ``rule`` does not allow given everything observed before it. Rules only
fire on what the log proves; when an input a rule needs is not in the log (verbosity, a log
that starts mid-way, an older build without a field) the check is skipped or weakened, never
guessed.
"""

from __future__ import annotations

RULES: dict[str, str] = {
    # server-context.cpp: create_checkpoint
    "ckpt-cap": "a slot holds more checkpoints than --ctx-checkpoints "
    "(create_checkpoint: while size >= n_ctx_checkpoints erase the front)",
    "ckpt-count": "'created context checkpoint k of N': k is the list length after insertion "
    "and N is --ctx-checkpoints (create_checkpoint)",
    "ckpt-position": "a checkpoint is created at n_tokens = pos_max + 1 from the memory range "
    "read before the batch (update_slots: main/do_checkpoint, cached n_tokens)",
    "ckpt-sweep": "too-close erasures are those of sweep_too_close over the slot's list "
    "(create_checkpoint, #25472; in the October and November 2026 code only when the list is full)",
    "ckpt-cap-evict": "capacity erasures remove exactly cap_evictions checkpoints from the "
    "front (create_checkpoint)",
    "ckpt-supersede": "a checkpoint with the new checkpoint's n_tokens is superseded "
    "(create_checkpoint, October and November 2026)",
    # server-context.cpp: update_slots, SLOT_STATE_STARTED
    "restore-scan": "checkpoints are checked newest to oldest, stopping at the restored one "
    "(update_slots: find_if over rbegin..rend)",
    "restore-threshold": "the 'against' number is pos_min_threshold(n_past, n_swa, "
    "has_new_tokens) (update_slots, #24110)",
    "restore-choice": "the restored checkpoint (or none) is restore_choice over the list "
    "(update_slots, #24411)",
    "restore-position": "n_past after a restore is restored_positions(...) (update_slots)",
    "invalidate": "checkpoints erased at prompt start are invalidated(list, pos_next, n_prefix) "
    "(update_slots; the n_prefix rule in the November 2026 code only)",
    "n-past": "the first 'cached n_tokens' of a prompt is n_past after restore or reset, "
    "minus 1 when it covers the whole prompt (update_slots, [TAG_PROMPT_LOGITS])",
    # server-task.cpp: server_prompt_cache
    "load-scan": "load lists every cache entry front to back with f_keep = lcp / length "
    "(server_prompt_cache::load)",
    "load-choice": "the entry load takes is load_select over the logged f_keep / f_sim "
    "(server_prompt_cache::load: f_keep >= 0.25 and strictly better on both)",
    "cache-contain": "'already in the cache' needs an entry at least as long as the prompt "
    "(server_prompt_cache::alloc step 1)",
    "cache-oversize": "an entry larger than the byte limit is skipped, a smaller one is not "
    "(server_prompt_cache::alloc step 3, #25070)",
    "cache-obsolete": "an obsolete entry is a cached prompt shorter than the new one "
    "(server_prompt_cache::alloc step 4)",
    "cache-make-room": "alloc pops make_room(...) entries from the front before appending "
    "(server_prompt_cache::alloc step 5, #25070)",
    "cache-evict": "update pops update_evictions(...) entries from the front, bytes then tokens "
    "(server_prompt_cache::update)",
    "cache-limit": "the cache stays within its byte limit after alloc; logged limits and the "
    "token estimate follow the configuration (alloc, update, bad_alloc)",
    "cache-summary": "'cache state' and its per-entry lines match the tracked entries "
    "(server_prompt_cache::update)",
}

