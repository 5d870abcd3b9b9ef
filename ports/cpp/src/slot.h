// The slot's side of the prompt cache and the checkpoints (tools/server/server-context.cpp):
// prompt_save / prompt_load / prompt_clear / release (258-300, 514-534), create_checkpoint
// (2290-2345), the start of a new prompt in update_slots (3121-3426: restore, invalidation,
// n_past -= 1, keep_first, seq_rm) and the checkpoint side of a context shift (2886-2950),
// in the `fixed` design.

#pragma once

#include "prompt_cache.h"

#include <vector>

struct server_params {
    int n_ctx_checkpoints   = 32;
    int checkpoint_min_step = 8192;
    int n_swa               = 0;  // the target memory's sliding window (0: none)
    int n_rs                = 0;  // the recurrent rollback depth (n_rs_seq; 0: none)

    // the memory kinds as fixed's resume needs them: a recurrent state (recurrent, or the
    // recurrent half of hybrid) rolls back at most n_rs tokens; a draft is kv or the target's kind
    bool tgt_recurrent = false;
    bool dft_recurrent = false;
    bool dft_swa       = false;
};

// [pos_min, pos_max] of a slot's sequence in one context (llama_memory_seq_pos_min/max)
struct seq_pos_range {
    llama_pos pos_min = -1;
    llama_pos pos_max = -1;
};

struct server_slot {
    int id = 0;

    int id_task = -1;  // the task the slot is processing

    llama_context * ctx_tgt = nullptr;
    llama_context * ctx_dft = nullptr;  // the draft context, if any

    server_prompt prompt;

    // the checkpoint the current task restored: it stays with the task (#30683)
    std::weak_ptr<const common_prompt_checkpoint> restored;

    // the restored checkpoint, if the slot still holds it
    common_prompt_checkpoint_ptr restored_held() const;

    bool prompt_save(server_prompt_cache & prompt_cache) const;
    bool prompt_load(server_prompt_cache & prompt_cache, const llama_tokens & tokens);
    void prompt_clear();
    void release();
};

// update_slots, SLOT_STATE_STARTED: returns n_past. `live` is the sequence's [pos_min, pos_max]
// before the start in each context (target, then draft); `seq_rm_ok` what
// llama_memory_seq_rm(id, n_past, -1) returns.
int prompt_start(server_slot & slot, const server_params & params, int id_task, const llama_tokens & prompt,
                 bool cache_prompt, const std::vector<seq_pos_range> & live, bool seq_rm_ok);

// n_tokens_cur: the tokens the slot just added to the batch (the checkpoint is of the state before them)
void create_checkpoint(server_slot & slot, const server_params & params, int64_t n_tokens_cur, llama_pos pos_min, llama_pos pos_max);

void context_shift(server_slot & slot, int n_keep, int n_discard);
