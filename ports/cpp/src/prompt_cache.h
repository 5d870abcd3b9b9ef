// The `fixed` design of llama-server's prompt cache and context checkpoints (docs/SPEC.md).
//
// Written as the code a llama.cpp change would contain, against the October 2026 tree
// (tools/server/server-task.h:560-640, server-task.cpp:1689-1901, common/common.h:1232-1280):
//
//  * checkpoints are shared immutable objects (std::shared_ptr<const common_prompt_checkpoint>):
//    a checkpoint list is copied by sharing, never by copying payloads; a checkpoint is built
//    and filled off any list, validated, and only then published;
//  * the save is transactional: the entry is built and filled off the cache, validated, and
//    only then are obsolete entries removed, room made and the entry inserted; any failure
//    (a bad_alloc anywhere, a short read) leaves the cache exactly as it was;
//  * the cache counts unique bytes: each buffer once, however many entries share it;
//  * a failed load drops the entry it tried (the slot is then cleared), nothing aborts.
//
// Each object carries an `id` for observation only (the conformance driver reports objects by
// id); nothing decides by it.

#pragma once

#include "llama_stub.h"
#include "pcspec_hooks.h"

#include <cstdint>
#include <list>
#include <memory>
#include <vector>

typedef int32_t llama_token;
using llama_tokens = std::vector<llama_token>;

size_t common_prefix(const llama_tokens & a, const llama_tokens & b);

uint64_t pcspec_next_id();  // ids for observation, never reused within a process

const char * pcspec_port_name();  // names the build (and the seam it breaks, if any)

struct common_prompt_checkpoint {
    uint64_t id = 0;

    int64_t n_tokens = 0;
    int     id_task  = -1;

    llama_pos pos_min = 0;
    llama_pos pos_max = 0;

    pcspec::buffer data_tgt;
    pcspec::buffer data_dft;
    pcspec::buffer data_spec;

    size_t size() const { return data_tgt.size() + data_dft.size() + data_spec.size(); }

    // Fill from a context; false when the read came up short (the caller drops the
    // checkpoint). A failed allocation throws std::bad_alloc.
    bool update_tgt(llama_context * ctx, llama_seq_id seq_id, llama_state_seq_flags flags);
    bool update_dft(llama_context * ctx, llama_seq_id seq_id, llama_state_seq_flags flags);
    void update_spec(llama_context * ctx, llama_seq_id seq_id);

    // Load into a context; false when the context refused the bytes.
    bool load_tgt(llama_context * ctx, llama_seq_id seq_id, llama_state_seq_flags flags) const;
    bool load_dft(llama_context * ctx, llama_seq_id seq_id, llama_state_seq_flags flags) const;
};

using common_prompt_checkpoint_ptr = std::shared_ptr<const common_prompt_checkpoint>;

struct server_prompt {
    llama_tokens tokens;

    std::list<common_prompt_checkpoint_ptr> checkpoints;

    void clear() {
        tokens.clear();
        checkpoints.clear();
    }

    int n_tokens() const { return (int) tokens.size(); }
};

struct server_prompt_data {
    pcspec::buffer main;
    pcspec::buffer drft;

    size_t size() const { return main.size() + drft.size(); }
};

struct server_prompt_cache_state {
    uint64_t id = 0;

    server_prompt      prompt;
    server_prompt_data data;
};

struct server_prompt_cache {
    server_prompt_cache(size_t limit_size, size_t limit_tokens) : limit_size(limit_size), limit_tokens(limit_tokens) {}

    std::list<server_prompt_cache_state> states;

    // in bytes, 0 = no limit
    size_t limit_size = 0;

    // in tokens, 0 = no limit
    size_t limit_tokens = 0;

    // unique bytes: entry data plus every distinct checkpoint the entries hold, once
    size_t size() const;

    size_t n_tokens() const;

    // the transactional save (replaces alloc + the caller's fill): true when an entry was published
    bool save(const server_prompt & prompt, llama_context * ctx_tgt, llama_context * ctx_dft, llama_seq_id id_slot);

    bool load(server_prompt & prompt, const llama_tokens & tokens_new, llama_context * ctx_tgt, llama_context * ctx_dft, llama_seq_id id_slot);

    void update();

private:
    void evict(std::list<server_prompt_cache_state>::iterator it, const char * reason, int64_t unique_total = -1);
    void publish(server_prompt_cache_state && cur);
    size_t unique_with(const server_prompt_cache_state * extra) const;
};
