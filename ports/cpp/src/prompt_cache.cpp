#include "prompt_cache.h"

#include <algorithm>
#include <unordered_set>

using pcspec::events;

size_t common_prefix(const llama_tokens & a, const llama_tokens & b) {
    const size_t n = std::min(a.size(), b.size());
    size_t i = 0;
    while (i < n && a[i] == b[i]) {
        ++i;
    }
    return i;
}

const char * pcspec_port_name() {
#if defined(PCSPEC_BREAK_INPLACE_UPDATE)
    return "ports/cpp (fixed, broken: the cap eviction recycles the oldest payload in place)";
#elif defined(PCSPEC_BREAK_PUBLISH_BEFORE_VALIDATE)
    return "ports/cpp (fixed, broken: the save publishes before the fill is validated)";
#elif defined(PCSPEC_BREAK_PER_HOLDER_ACCOUNTING)
    return "ports/cpp (fixed, broken: per-holder accounting)";
#elif defined(PCSPEC_BREAK_FORGET_RESTORED)
    return "ports/cpp (fixed, broken: the restored checkpoint is not kept)";
#else
    return "ports/cpp (fixed)";
#endif
}

uint64_t pcspec_next_id() {
    static uint64_t next = 1;
    return next++;
}

//
// common_prompt_checkpoint
//

static bool fill(pcspec::buffer & dst, llama_context * ctx, llama_seq_id seq_id, llama_state_seq_flags flags, const char * site) {
    const size_t size = llama_state_seq_get_size_ext(ctx, seq_id, flags);

    pcspec::maybe_bad_alloc("ckpt.alloc");
    dst.resize(size);

    pcspec::site_scope scope(site);
    return llama_state_seq_get_data_ext(ctx, dst.data(), size, seq_id, flags) == size;
}

bool common_prompt_checkpoint::update_tgt(llama_context * ctx, llama_seq_id seq_id, llama_state_seq_flags flags) {
    return ctx == nullptr || fill(data_tgt, ctx, seq_id, flags, "ckpt.read.tgt");
}

bool common_prompt_checkpoint::update_dft(llama_context * ctx, llama_seq_id seq_id, llama_state_seq_flags flags) {
    return ctx == nullptr || fill(data_dft, ctx, seq_id, flags, "ckpt.read.dft");
}

void common_prompt_checkpoint::update_spec(llama_context * ctx, llama_seq_id seq_id) {
    // common_speculative_get_state: a small host copy, always complete
    const size_t size = pcspec_spec_state_size(ctx, seq_id);
    if (size == 0) {
        return;
    }
    pcspec::maybe_bad_alloc("ckpt.alloc");
    data_spec.resize(size);
    pcspec_spec_state_write(ctx, seq_id, data_spec.data(), size);
}

static bool load(const pcspec::buffer & src, llama_context * ctx, llama_seq_id seq_id, llama_state_seq_flags flags, const char * site) {
    if (ctx == nullptr || src.empty()) {
        return true;
    }
    pcspec::site_scope scope(site);
    return llama_state_seq_set_data_ext(ctx, src.data(), src.size(), seq_id, flags) == src.size();
}

bool common_prompt_checkpoint::load_tgt(llama_context * ctx, llama_seq_id seq_id, llama_state_seq_flags flags) const {
    return load(data_tgt, ctx, seq_id, flags, "ckpt.write.tgt");
}

bool common_prompt_checkpoint::load_dft(llama_context * ctx, llama_seq_id seq_id, llama_state_seq_flags flags) const {
    return load(data_dft, ctx, seq_id, flags, "ckpt.write.dft");
}

//
// server_prompt_cache
//

size_t server_prompt_cache::unique_with(const server_prompt_cache_state * extra) const {
    std::unordered_set<const common_prompt_checkpoint *> seen;
    size_t res = 0;

    auto count = [&](const server_prompt_cache_state & st) {
        res += st.data.size();
        for (const auto & ckpt : st.prompt.checkpoints) {
            if (seen.insert(ckpt.get()).second) {
                res += ckpt->size();
            }
        }
    };

    if (extra != nullptr) {
        count(*extra);
    }
    for (const auto & st : states) {
        count(st);
    }

    return res;
}

size_t server_prompt_cache::size() const {
#ifdef PCSPEC_BREAK_PER_HOLDER_ACCOUNTING
    // broken: each entry counts every checkpoint it holds (the C++ designs' server_prompt_cache_state::size)
    size_t res = 0;
    for (const auto & st : states) {
        res += st.data.size();
        for (const auto & ckpt : st.prompt.checkpoints) {
            res += ckpt->size();
        }
    }
    return res;
#else
    return unique_with(nullptr);
#endif
}

size_t server_prompt_cache::n_tokens() const {
    size_t res = 0;
    for (const auto & st : states) {
        res += st.prompt.tokens.size();
    }
    return res;
}

void server_prompt_cache::evict(std::list<server_prompt_cache_state>::iterator it, const char * reason, int64_t unique_total) {
    if (unique_total >= 0) {
        events().emit("entry_evict", {{"entry", it->id}, {"reason", reason}, {"n_tokens", int64_t(it->prompt.tokens.size())},
                                      {"unique_total", unique_total}, {"limit", uint64_t(limit_size)}});
    } else {
        events().emit("entry_evict", {{"entry", it->id}, {"reason", reason}, {"n_tokens", int64_t(it->prompt.tokens.size())}});
    }
    states.erase(it);
}

void server_prompt_cache::publish(server_prompt_cache_state && cur) {
    // remove any cached prompts that are fully contained in the new one
    for (auto it = states.begin(); it != states.end();) {
        auto next = std::next(it);
        if (common_prefix(it->prompt.tokens, cur.prompt.tokens) == it->prompt.tokens.size()) {
            evict(it, "obsolete");
        }
        it = next;
    }

    // make room, counting what the new entry shares with the cache once
    if (limit_size > 0) {
        while (!states.empty()) {
            const size_t total = unique_with(&cur);
            if (total <= limit_size) {
                break;
            }
            evict(states.begin(), "make_room", int64_t(total));
        }
    }

    states.push_back(std::move(cur));

    server_prompt_cache_state & st = states.back();
    size_t own = st.data.size();
    {
        std::unordered_set<const common_prompt_checkpoint *> seen;
        for (const auto & ckpt : st.prompt.checkpoints) {
            if (seen.insert(ckpt.get()).second) {
                own += ckpt->size();
            }
        }
    }
    events().emit("entry_insert", {{"entry", st.id}, {"n_tokens", int64_t(st.prompt.tokens.size())}, {"own_unique", uint64_t(own)},
                                   {"unique_after", uint64_t(unique_with(nullptr))}, {"limit", uint64_t(limit_size)}});
}

bool server_prompt_cache::save(const server_prompt & prompt, llama_context * ctx_tgt, llama_context * ctx_dft, llama_seq_id id_slot) {
    // the prompt is a prefix of (or equal to) a cached one: nothing to save
    for (const auto & st : states) {
        if (common_prefix(st.prompt.tokens, prompt.tokens) == prompt.tokens.size()) {
            events().emit("save_skip_contained", {{"entry", st.id}});
            return false;
        }
    }

    const size_t size_tgt =           llama_state_seq_get_size_ext(ctx_tgt, id_slot, LLAMA_STATE_SEQ_FLAGS_NONE);
    const size_t size_dft = ctx_dft ? llama_state_seq_get_size_ext(ctx_dft, id_slot, LLAMA_STATE_SEQ_FLAGS_NONE) : 0;

    // the entry's own unique bytes: its data and each distinct checkpoint once
    size_t size_new = size_tgt + size_dft;
    {
        std::unordered_set<const common_prompt_checkpoint *> seen;
        for (const auto & ckpt : prompt.checkpoints) {
            if (seen.insert(ckpt.get()).second) {
                size_new += ckpt->size();
            }
        }
    }

    // an entry larger than the whole cache is skipped, evicting nothing
    if (limit_size > 0 && size_new > limit_size) {
        events().emit("save_reject_oversize", {{"size", uint64_t(size_new)}, {"own_unique", uint64_t(size_new)}, {"limit", uint64_t(limit_size)}});
        return false;
    }

    // build the entry off the list: nothing is published until it is whole
    server_prompt_cache_state cur;
    const char * stage = "save.alloc.main";
    try {
        if (size_tgt > 0) {
            pcspec::maybe_bad_alloc(stage);
            cur.data.main.resize(size_tgt);
        }
        stage = "save.alloc.drft";
        if (size_dft > 0) {
            pcspec::maybe_bad_alloc(stage);
            cur.data.drft.resize(size_dft);
        }
        stage = "save.alloc.entry";
        pcspec::maybe_bad_alloc(stage);
        cur.prompt.tokens      = prompt.tokens;
        cur.prompt.checkpoints = prompt.checkpoints;  // shared, not copied
    } catch (const std::bad_alloc &) {
        events().emit("save_bad_alloc", {{"site", stage}});
        return false;
    }
    cur.id = pcspec_next_id();

#ifdef PCSPEC_BREAK_PUBLISH_BEFORE_VALIDATE
    // broken: the entry is published first and filled in the cache
    publish(std::move(cur));
    server_prompt_cache_state & dst = states.back();
#else
    server_prompt_cache_state & dst = cur;
#endif

    size_t n_tgt = 0;
    size_t n_dft = 0;
    if (size_tgt > 0) {
        pcspec::site_scope scope("save.read.tgt");
        n_tgt = llama_state_seq_get_data_ext(ctx_tgt, dst.data.main.data(), size_tgt, id_slot, LLAMA_STATE_SEQ_FLAGS_NONE);
    }
    if (ctx_dft && size_dft > 0) {
        pcspec::site_scope scope("save.read.dft");
        n_dft = llama_state_seq_get_data_ext(ctx_dft, dst.data.drft.data(), size_dft, id_slot, LLAMA_STATE_SEQ_FLAGS_NONE);
    }
    if (n_tgt != size_tgt || n_dft != size_dft) {
        events().emit("save_fill_short");
        return false;  // `cur` goes out of scope: the cache never saw it
    }

#ifndef PCSPEC_BREAK_PUBLISH_BEFORE_VALIDATE
    publish(std::move(cur));
#endif
    return true;
}

bool server_prompt_cache::load(server_prompt & prompt, const llama_tokens & tokens_new, llama_context * ctx_tgt, llama_context * ctx_dft, llama_seq_id id_slot) {
    const size_t lcp_best = common_prefix(prompt.tokens, tokens_new);

    double f_keep_best = !prompt.tokens.empty() ? double(lcp_best) / prompt.tokens.size() : -1.0;  // empty slot: any entry wins
    double f_sim_best  = !tokens_new.empty()    ? double(lcp_best) / tokens_new.size()    : 0.0;

    auto it_best = states.end();

    for (auto it = states.begin(); it != states.end(); ++it) {
        const size_t lcp_cur = common_prefix(it->prompt.tokens, tokens_new);

        const double f_keep_cur = !it->prompt.tokens.empty() ? double(lcp_cur) / it->prompt.tokens.size() : 0.0;
        const double f_sim_cur  = !tokens_new.empty()        ? double(lcp_cur) / tokens_new.size()        : 0.0;

        // don't trash large prompts
        if (f_keep_cur < 0.25) {
            continue;
        }

        if (f_keep_best < f_keep_cur && f_sim_best < f_sim_cur) {
            f_keep_best = f_keep_cur;
            f_sim_best  = f_sim_cur;

            it_best = it;
        }
    }

    events().emit("load_scan", {{"chosen", it_best != states.end() ? pcspec::ev_value(it_best->id) : pcspec::ev_value(nullptr)}});

    if (it_best == states.end()) {
        return true;
    }

    bool ok;
    {
        const auto & data = it_best->data.main;
        pcspec::site_scope scope("load.write.tgt");
        ok = llama_state_seq_set_data_ext(ctx_tgt, data.data(), data.size(), id_slot, 0) == data.size();
    }
    if (ok && !it_best->data.drft.empty()) {
        const auto & data = it_best->data.drft;
        pcspec::site_scope scope("load.write.dft");
        ok = ctx_dft != nullptr && llama_state_seq_set_data_ext(ctx_dft, data.data(), data.size(), id_slot, 0) == data.size();
    }

    if (!ok) {
        // the entry did not load: drop it (it may be what cannot load); the caller clears the slot
        events().emit("load_failed", {{"entry", it_best->id}});
        evict(it_best, "load_failed");
        return false;
    }

    // hand the entry over: its tokens and its checkpoints become the slot's
    events().emit("entry_evict", {{"entry", it_best->id}, {"reason", "loaded"}, {"n_tokens", int64_t(it_best->prompt.tokens.size())}});
    prompt = std::move(it_best->prompt);
    states.erase(it_best);

    return true;
}

void server_prompt_cache::update() {
    if (limit_size > 0) {
        while (!states.empty() && size() > limit_size) {
            evict(states.begin(), "limit_bytes", int64_t(unique_with(nullptr)));
        }
    }

    if (limit_tokens > 0) {
        // average size per token; the token limit grows when the byte limit allows it
        size_t limit_tokens_cur = limit_tokens;
        if (limit_size > 0) {
            const double size_per_token = std::max(1.0, double(size()) / double(std::max<size_t>(1, n_tokens())));
            limit_tokens_cur = std::max(limit_tokens, size_t(double(limit_size) / size_per_token));
        }

        while (!states.empty() && n_tokens() > limit_tokens_cur) {
            evict(states.begin(), "limit_tokens");
        }
    }

    events().emit("cache_state", {{"n", uint64_t(states.size())}, {"size", uint64_t(size())}, {"limit", uint64_t(limit_size)},
                                  {"n_tokens", uint64_t(n_tokens())}});
}
