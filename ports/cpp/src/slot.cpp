#include "slot.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

using pcspec::events;

static void erase(server_slot & slot, std::list<common_prompt_checkpoint_ptr>::iterator it, const char * reason) {
    events().emit("ckpt_erase", {{"ckpt", (*it)->id}, {"reason", reason}, {"n_tokens", (*it)->n_tokens}});
    slot.prompt.checkpoints.erase(it);
}

common_prompt_checkpoint_ptr server_slot::restored_held() const {
    auto r = restored.lock();
    if (r == nullptr) {
        return nullptr;
    }
    const auto & ckpts = prompt.checkpoints;
    return std::find(ckpts.begin(), ckpts.end(), r) != ckpts.end() ? r : nullptr;
}

//
// server_slot
//

bool server_slot::prompt_save(server_prompt_cache & prompt_cache) const {
    if (prompt.tokens.empty()) {
        return false;
    }
    const bool ok = prompt_cache.save(prompt, ctx_tgt, ctx_dft, id);
    events().emit("save_end", {{"ok", ok}});
    return ok;
}

bool server_slot::prompt_load(server_prompt_cache & prompt_cache, const llama_tokens & tokens) {
    return prompt_cache.load(prompt, tokens, ctx_tgt, ctx_dft, id);
}

void server_slot::prompt_clear() {
    prompt.clear();
    restored.reset();
}

void server_slot::release() {
    id_task = -1;
    restored.reset();
}

//
// a new prompt: restore, invalidation
//

// fixed's resume (REUSE-1): whether a memory reporting [pos_min, pos_max] can resume at n
// (keep [0, n), decode from n): every position below n present; a recurrent state rolls back
// at most n_rs tokens; a sliding window still holds the cells [n - n_swa + 1, n) the token at n
// attends to, or starts at 0. (The C++ asks pos_min < pos_next - n_swa: stricter than needed.)
static bool live_serves(const seq_pos_range & r, int n, int n_swa, bool recurrent, int n_rs) {
    if (n <= 0) {
        return true;
    }
    if (r.pos_min < 0 || r.pos_max < n - 1) {
        return false;
    }
    if (recurrent) {
        return r.pos_max + 1 - n <= n_rs;
    }
    return n_swa == 0 || r.pos_min == 0 || r.pos_min <= n - n_swa + 1;
}

// whether restoring a checkpoint taken at n_tokens, whose payload starts at its recorded pos_min,
// lets the sequence resume at n (a draft payload starts where the target's does: same tokens,
// same window)
static bool checkpoint_serves(const common_prompt_checkpoint & c, int n, int n_swa, bool recurrent, int n_rs) {
    if (n > c.n_tokens) {
        return false;
    }
    if (recurrent) {
        return c.n_tokens - n <= n_rs;
    }
    return n_swa == 0 || c.pos_min == 0 || c.pos_min <= n - n_swa + 1;
}

static int resume_point(int n, int n_prompt) {
    return n == n_prompt ? n - 1 : n;  // [TAG_PROMPT_LOGITS]
}

int prompt_start(server_slot & slot, const server_params & params, int id_task, const llama_tokens & prompt,
                 bool cache_prompt, const std::vector<seq_pos_range> & live, bool seq_rm_ok) {
    slot.id_task = id_task;

    auto & ckpts = slot.prompt.checkpoints;

    const int n_prefix = (int) common_prefix(slot.prompt.tokens, prompt);
    const int n_prompt = (int) prompt.size();

    int n_past   = cache_prompt ? n_prefix : 0;
    int pos_next = n_past;

    common_prompt_checkpoint_ptr restored;
    const char * reprocess = nullptr;

    if (n_past > 0 && n_past <= slot.prompt.n_tokens()) {
        const int dft_swa = params.dft_swa ? params.n_swa : 0;

        // of live memory and every checkpoint of the shared prefix, the one that keeps the most
        // tokens; ties go to live memory (no restore), then to the newest checkpoint
        int best_n = 0;
        common_prompt_checkpoint_ptr best;

        const int n_live = resume_point(n_past, n_prompt);
        bool live_ok = true;
        for (size_t i = 0; i < live.size(); ++i) {
            const bool tgt = i == 0;
            live_ok = live_ok && live_serves(live[i], n_live, tgt ? params.n_swa : dft_swa,
                                             tgt ? params.tgt_recurrent : params.dft_recurrent, params.n_rs);
        }
        if (live_ok) {
            best_n = n_live;
        }

        for (auto it = ckpts.rbegin(); it != ckpts.rend(); ++it) {
            const common_prompt_checkpoint & c = **it;
            if (c.n_tokens > n_prefix || c.pos_max > pos_next) {
                continue;  // not a state of the shared prefix
            }
            const int pos = std::min(pos_next, std::max(c.pos_min + 1, c.pos_max));
            const int n   = resume_point(std::min(pos, (int) c.n_tokens), n_prompt);
            if (n <= best_n || c.data_tgt.empty()) {
                continue;
            }
            bool ok = checkpoint_serves(c, n, params.n_swa, params.tgt_recurrent, params.n_rs);
            if (slot.ctx_dft != nullptr && !c.data_dft.empty()) {
                ok = ok && checkpoint_serves(c, n, dft_swa, params.dft_recurrent, params.n_rs);
            }
            if (ok) {
                best_n = n;
                best   = *it;
            }
        }

        if (best != nullptr) {
            if (best->load_tgt(slot.ctx_tgt, slot.id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) &&
                best->load_dft(slot.ctx_dft, slot.id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY)) {
                pos_next = std::min(pos_next, std::max(best->pos_min + 1, best->pos_max));
                n_past   = std::min(pos_next, (int) best->n_tokens);
                restored = best;
                events().emit("ckpt_restore", {{"ckpt", best->id}, {"n_tokens", best->n_tokens}, {"n_past", n_past}});
            } else {
                // fixed: a checkpoint that does not load is dropped, the prompt re-processed
                reprocess = "checkpoint failed to load";
                erase(slot, std::find(ckpts.begin(), ckpts.end(), best), "invalidated");
            }
        } else if (best_n == 0) {
            reprocess = ckpts.empty() ? "no checkpoints" : "no usable checkpoint";
        }

        if (reprocess != nullptr) {
            pos_next = 0;
            n_past   = 0;
        }
    }

    slot.restored = restored;

    // erase the checkpoints the new prompt cannot use
    for (auto it = ckpts.begin(); it != ckpts.end();) {
        auto next = std::next(it);
        if ((*it)->pos_max > pos_next || (*it)->n_tokens > n_prefix) {
            erase(slot, it, "invalidated");
        }
        it = next;
    }
    if (restored && std::find(ckpts.begin(), ckpts.end(), restored) == ckpts.end()) {
        restored.reset();
    }

    // [TAG_PROMPT_LOGITS] at least one token is processed
    if (n_past == (int) prompt.size() && n_past > 0) {
        n_past -= 1;
    }

    slot.prompt.tokens.resize(n_past);  // keep_first
    slot.restored = restored;

    if (!seq_rm_ok) {
        // fixed: the memory cannot go back to n_past: re-process from 0 instead of aborting
        events().emit("seq_rm_refused");
        slot.prompt.tokens.clear();
        n_past    = 0;
        reprocess = "seq_rm refused";
        while (!ckpts.empty()) {
            erase(slot, ckpts.begin(), "invalidated");
        }
        restored.reset();
        slot.restored.reset();
    }

    events().emit("prompt_start", {{"n_prefix", n_prefix}, {"n_past", n_past},
                                   {"restored", restored ? pcspec::ev_value(restored->id) : pcspec::ev_value(nullptr)},
                                   {"reprocess", reprocess ? pcspec::ev_value(reprocess) : pcspec::ev_value(nullptr)}});
    return n_past;
}

//
// create_checkpoint
//

void create_checkpoint(server_slot & slot, const server_params & params, int64_t n_tokens_cur, llama_pos pos_min, llama_pos pos_max) {
    const int id_task = slot.id_task;

    auto & ckpts = slot.prompt.checkpoints;

    // the checkpoint this task restored counts as its own: the sweep and the cap leave it
#ifdef PCSPEC_BREAK_FORGET_RESTORED
    const common_prompt_checkpoint_ptr kept = nullptr;  // broken: the restored checkpoint is not kept
#else
    const common_prompt_checkpoint_ptr kept = slot.restored_held();
#endif

    // evict checkpoints within min-step of a previous one, unless created by this task,
    // only while the list is full (otherwise short prompts keep just the oldest checkpoint)
    int64_t last = -1;
    for (auto it = ckpts.begin(); ckpts.size() + 1 >= (size_t) params.n_ctx_checkpoints && it != ckpts.end();) {
        const int owner = *it == kept ? id_task : (*it)->id_task;
        if (owner != id_task && last >= 0 && (*it)->n_tokens <= last + params.checkpoint_min_step) {
            auto next = std::next(it);
            erase(slot, it, "too_close");
            it = next;
            continue;
        }
        last = (*it)->n_tokens;
        ++it;
    }

    // make room for the new checkpoint
    common_prompt_checkpoint_ptr recycled;
    while (ckpts.size() >= (size_t) params.n_ctx_checkpoints) {
        auto victim = std::find_if(ckpts.begin(), ckpts.end(), [&](const common_prompt_checkpoint_ptr & c) { return c != kept; });
        if (victim == ckpts.end()) {
            break;
        }
#ifdef PCSPEC_BREAK_INPLACE_UPDATE
        if (recycled == nullptr) {
            recycled = *victim;  // broken: its payload is reused for the new checkpoint, in place
        }
#endif
        erase(slot, victim, "cap");
    }

    const int64_t n_tokens_new = slot.prompt.n_tokens() - n_tokens_cur;

    if (kept != nullptr && ckpts.size() >= (size_t) params.n_ctx_checkpoints && params.n_ctx_checkpoints > 0) {
        // the list is full of the checkpoint this task restored: it stays, nothing is made
        events().emit("ckpt_create_skipped", {{"n_tokens", n_tokens_new}, {"ckpt", kept->id}});
        return;
    }

    if (kept != nullptr && kept->n_tokens == n_tokens_new) {
        // it would be superseded by a byte-identical one: keep it
        events().emit("ckpt_kept_restored", {{"ckpt", kept->id}});
        return;
    }

    // replace an existing checkpoint at the same n_tokens instead of appending a duplicate
    for (auto it = ckpts.begin(); it != ckpts.end();) {
        auto next = std::next(it);
        if ((*it)->n_tokens == n_tokens_new) {
            erase(slot, it, "supersede");
        }
        it = next;
    }

    // build and fill off the list; publish only a whole checkpoint
    auto cur = std::make_shared<common_prompt_checkpoint>();
    cur->id       = pcspec_next_id();
    cur->id_task  = id_task;
    cur->n_tokens = n_tokens_new;
    cur->pos_min  = pos_min;
    cur->pos_max  = pos_max;

    bool ok = false;
    try {
        ok = cur->update_tgt(slot.ctx_tgt, slot.id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) &&
             cur->update_dft(slot.ctx_dft, slot.id, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
        if (ok) {
            cur->update_spec(slot.ctx_tgt, slot.id);
        }
    } catch (const std::bad_alloc &) {
        ok = false;
    }
    if (!ok) {
        events().emit("ckpt_create_failed");
        return;
    }

#ifdef PCSPEC_BREAK_INPLACE_UPDATE
    if (recycled != nullptr && recycled->data_tgt.size() == cur->data_tgt.size()) {
        auto & shared = const_cast<common_prompt_checkpoint &>(*recycled).data_tgt;
        std::copy(cur->data_tgt.begin(), cur->data_tgt.end(), shared.begin());
    }
#endif

    ckpts.push_back(cur);

    events().emit("ckpt_create", {{"ckpt", cur->id}, {"n_tokens", cur->n_tokens}, {"pos_min", cur->pos_min}, {"pos_max", cur->pos_max}});
}

//
// context shift: prompt.clear() and the kept tokens re-inserted: every checkpoint goes
//

void context_shift(server_slot & slot, int n_keep, int n_discard) {
    auto & ckpts = slot.prompt.checkpoints;
    while (!ckpts.empty()) {
        erase(slot, ckpts.begin(), "context_shift");
    }
    auto & tokens = slot.prompt.tokens;
    const int n = (int) tokens.size();
    const int from = std::min(n, n_keep);
    const int to   = std::min(n, n_keep + n_discard);
    tokens.erase(tokens.begin() + from, tokens.begin() + to);
}
