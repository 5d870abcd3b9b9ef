// The conformance driver: speaks the protocol of docs/SPEC.md ("The port protocol", schema 1)
// on standard input and output, over the port of the `fixed` design in ../src.
//
// Every line read is answered with one line: `begin` with {"schema": 1, "port": ...}, any
// other operation with the observation after it, a line it cannot apply with {"error": ...}.

#include "../src/llama_stub.h"
#include "../src/pcspec_hooks.h"
#include "../src/prompt_cache.h"
#include "../src/slot.h"
#include "json.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

namespace {

llama_tokens tokens_of(const pj::value & v) {
    llama_tokens out;
    for (const auto & t : v.as_arr()) {
        out.push_back(llama_token(t.as_int()));
    }
    return out;
}

struct port {
    server_params params;
    size_t        limit_size   = 0;
    size_t        limit_tokens = 0;
    bool          has_cache    = false;

    llama_context * ctx_tgt = nullptr;
    llama_context * ctx_dft = nullptr;

    std::vector<server_slot>             slots;
    std::unique_ptr<server_prompt_cache> cache;

    ~port() { reset(); }

    void reset() {
        slots.clear();
        cache.reset();
        if (ctx_tgt) { pcspec_stub_free(ctx_tgt); ctx_tgt = nullptr; }
        if (ctx_dft) { pcspec_stub_free(ctx_dft); ctx_dft = nullptr; }
    }

    void begin(const pj::value & cfg) {
        reset();
        params.n_ctx_checkpoints   = int(cfg.at("n_ctx_checkpoints").as_int());
        params.checkpoint_min_step = int(cfg.at("checkpoint_min_step").as_int());
        params.n_swa               = int(cfg.at("n_swa").as_int());
        params.n_rs                = int(cfg.at("n_rs").as_int());
        const std::string memory       = cfg.at("memory").as_str();
        const std::string draft_memory = cfg.at("draft_memory").as_str();
        params.tgt_recurrent = memory == "recurrent" || memory == "hybrid";
        params.dft_recurrent = draft_memory == "recurrent" || draft_memory == "hybrid";
        params.dft_swa       = draft_memory == "swa";
        has_cache    = cfg.at("cache").as_bool();
        limit_size   = size_t(cfg.at("limit_size").as_int());
        limit_tokens = size_t(cfg.at("limit_tokens").as_int());
        ctx_tgt = pcspec_stub_new();
        ctx_dft = cfg.at("has_draft").as_bool() ? pcspec_stub_new() : nullptr;
        const int n_slots = int(cfg.at("n_slots").as_int());
        slots.resize(n_slots);
        for (int i = 0; i < n_slots; ++i) {
            slots[i].id      = i;
            slots[i].ctx_tgt = ctx_tgt;
            slots[i].ctx_dft = ctx_dft;
        }
        if (has_cache) {
            cache = std::make_unique<server_prompt_cache>(limit_size, limit_tokens);
        }
    }

    server_slot & slot_of(const pj::value & op) {
        const int64_t i = op.at("slot").as_int();
        if (i < 0 || i >= int64_t(slots.size())) {
            throw std::runtime_error("no slot " + std::to_string(i));
        }
        return slots[size_t(i)];
    }

    server_prompt_cache & cache_of() {
        if (!cache) {
            throw std::runtime_error("there is no prompt cache");
        }
        return *cache;
    }

    // what the fake contexts report for the next state reads
    void set_states(const server_slot & slot, const pj::value & parts, llama_state_seq_flags flags) {
        pcspec_stub_set(ctx_tgt, slot.id, 2, 0, 0);
        for (const auto & p : parts.as_arr()) {
            const std::string & role = p.at("role").as_str();
            const size_t   size = size_t(p.at("size").as_int());
            const uint64_t tag  = uint64_t(p.at("state").as_int());
            if (role == "main" || role == "tgt") {
                pcspec_stub_set(ctx_tgt, slot.id, flags, size, tag);
            } else if (role == "drft" || role == "dft") {
                if (ctx_dft) {
                    pcspec_stub_set(ctx_dft, slot.id, flags, size, tag);
                }
            } else if (role == "spec") {
                pcspec_stub_set(ctx_tgt, slot.id, 2, size, tag);
            }
        }
    }

    void install(server_slot & slot, const pj::value & op) {
        slot.prompt.clear();
        slot.restored.reset();
        slot.prompt.tokens = tokens_of(op.at("tokens"));
        for (const auto & spec : op.at("ckpts").as_arr()) {
            auto ck = std::make_shared<common_prompt_checkpoint>();
            ck->id       = pcspec_next_id();
            ck->n_tokens = spec.at("n_tokens").as_int();
            ck->pos_min  = llama_pos(spec.at("pos_min").as_int());
            ck->pos_max  = llama_pos(spec.at("pos_max").as_int());
            ck->id_task  = int(spec.at("id_task").as_int());
            for (const auto & p : spec.at("parts").as_arr()) {
                const std::string & role = p.at("role").as_str();
                pcspec::buffer & dst = role == "tgt" ? ck->data_tgt : role == "dft" ? ck->data_dft : ck->data_spec;
                dst.resize(size_t(p.at("size").as_int()));
                for (size_t k = 0; k < dst.size(); ++k) {
                    dst[k] = pcspec_state_byte(uint64_t(p.at("state").as_int()), k);
                }
            }
            slot.prompt.checkpoints.push_back(ck);
        }
    }

    void apply(const pj::value & op) {
        const std::string & name = op.at("op").as_str();
        if (name == "save") {
            server_slot & slot = slot_of(op);
            set_states(slot, op.at("parts"), LLAMA_STATE_SEQ_FLAGS_NONE);
            slot.prompt_save(cache_of());
        } else if (name == "load") {
            slot_of(op).prompt_load(cache_of(), tokens_of(op.at("tokens")));
        } else if (name == "update") {
            cache_of().update();
        } else if (name == "clear") {
            slot_of(op).prompt_clear();
        } else if (name == "release") {
            slot_of(op).release();
        } else if (name == "prompt_start") {
            std::vector<seq_pos_range> live;
            for (const auto & r : op.at("live").as_arr()) {
                live.push_back({llama_pos(r.as_arr().at(0).as_int()), llama_pos(r.as_arr().at(1).as_int())});
            }
            prompt_start(slot_of(op), params, int(op.at("task").as_int()), tokens_of(op.at("prompt")),
                         op.at("cache_prompt").as_bool(), live, op.at("seq_rm_ok").as_bool());
        } else if (name == "checkpoint") {
            server_slot & slot = slot_of(op);
            set_states(slot, op.at("parts"), LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
            slot.id_task = int(op.at("task").as_int());
            create_checkpoint(slot, params, op.at("n_cur").as_int(), llama_pos(op.at("pos_min").as_int()),
                              llama_pos(op.at("pos_max").as_int()));
        } else if (name == "shift") {
            context_shift(slot_of(op), int(op.at("n_keep").as_int()), int(op.at("n_discard").as_int()));
        } else if (name == "wake") {
            if (cache) {
                for (const auto & st : cache->states) {
                    pcspec::events().emit("entry_evict", {{"entry", st.id}, {"reason", "wake"}, {"n_tokens", int64_t(st.prompt.tokens.size())}});
                }
                cache = std::make_unique<server_prompt_cache>(limit_size, limit_tokens);
            }
        } else if (name == "tokens") {
            server_slot & slot = slot_of(op);
            slot.prompt.tokens.resize(size_t(op.at("keep").as_int()));
            for (const llama_token t : tokens_of(op.at("append"))) {
                slot.prompt.tokens.push_back(t);
            }
        } else if (name == "install") {
            install(slot_of(op), op);
        } else if (name == "restart") {
            begin(op.at("config"));
        } else {
            throw std::runtime_error("unknown operation '" + name + "'");
        }
    }

    // -- the observation --------------------------------------------------------------------------

    static void part(pj::writer & w, const char * role, const pcspec::buffer & b) {
        const int64_t tag = pcspec_decode_state(b.data(), b.size());
        w.raw("{");
        w.key("role"); w.str(role);
        w.raw(","); w.key("size"); w.num(int64_t(b.size()));
        w.raw(","); w.key("state");
        if (tag < 0) { w.raw("null"); } else { w.num(tag); }
        w.raw("}");
    }

    static void tokens(pj::writer & w, const llama_tokens & t) {
        w.raw("[");
        for (size_t i = 0; i < t.size(); ++i) {
            if (i) w.raw(",");
            w.num(t[i]);
        }
        w.raw("]");
    }

    static void ids(pj::writer & w, const std::list<common_prompt_checkpoint_ptr> & l) {
        w.raw("[");
        bool first = true;
        for (const auto & c : l) {
            if (!first) w.raw(",");
            first = false;
            w.num(int64_t(c->id));
        }
        w.raw("]");
    }

    static void value_of(pj::writer & w, const pcspec::ev_value & v) {
        switch (v.kind) {
            case pcspec::ev_value::INT:  w.num(v.i); break;
            case pcspec::ev_value::STR:  w.str(v.s); break;
            case pcspec::ev_value::BOOL: w.raw(v.i ? "true" : "false"); break;
            case pcspec::ev_value::NUL:  w.raw("null"); break;
        }
    }

    std::string observe() {
        pj::writer w;
        w.raw("{"); w.key("events"); w.raw("[");
        auto & evs = pcspec::events().events;
        for (size_t i = 0; i < evs.size(); ++i) {
            if (i) w.raw(",");
            w.raw("{"); w.key("kind"); w.str(evs[i].kind);
            for (const auto & f : evs[i].fields) {
                w.raw(","); w.key(f.first.c_str()); value_of(w, f.second);
            }
            w.raw("}");
        }
        evs.clear();
        w.raw("],");

        std::vector<const common_prompt_checkpoint_ptr *> ckpts;
        std::unordered_set<const common_prompt_checkpoint *> seen;
        auto collect = [&](const std::list<common_prompt_checkpoint_ptr> & l) {
            for (const auto & c : l) {
                if (seen.insert(c.get()).second) {
                    ckpts.push_back(&c);
                }
            }
        };

        w.key("slots"); w.raw("[");
        for (size_t i = 0; i < slots.size(); ++i) {
            const server_slot & s = slots[i];
            collect(s.prompt.checkpoints);
            if (i) w.raw(",");
            w.raw("{"); w.key("tokens"); tokens(w, s.prompt.tokens);
            w.raw(","); w.key("ckpts"); ids(w, s.prompt.checkpoints);
            w.raw(","); w.key("restored");
            const auto r = s.restored_held();
            if (r) { w.num(int64_t(r->id)); } else { w.raw("null"); }
            w.raw("}");
        }
        w.raw("],");

        size_t unique = 0;
        std::unordered_set<const common_prompt_checkpoint *> held;
        w.key("entries"); w.raw("[");
        if (cache) {
            bool first = true;
            for (const auto & st : cache->states) {
                collect(st.prompt.checkpoints);
                unique += st.data.size();
                for (const auto & c : st.prompt.checkpoints) {
                    if (held.insert(c.get()).second) {
                        unique += c->size();
                    }
                }
                if (!first) w.raw(",");
                first = false;
                w.raw("{"); w.key("id"); w.num(int64_t(st.id));
                w.raw(","); w.key("tokens"); tokens(w, st.prompt.tokens);
                w.raw(","); w.key("ckpts"); ids(w, st.prompt.checkpoints);
                w.raw(","); w.key("parts"); w.raw("[");
                bool p1 = true;
                if (!st.data.main.empty()) { part(w, "main", st.data.main); p1 = false; }
                if (!st.data.drft.empty()) { if (!p1) w.raw(","); part(w, "drft", st.data.drft); }
                w.raw("]}");
            }
        }
        w.raw("],");

        w.key("ckpts"); w.raw("[");
        for (size_t i = 0; i < ckpts.size(); ++i) {
            const common_prompt_checkpoint & c = **ckpts[i];
            if (i) w.raw(",");
            w.raw("{"); w.key("id"); w.num(int64_t(c.id));
            w.raw(","); w.key("n_tokens"); w.num(c.n_tokens);
            w.raw(","); w.key("pos_min"); w.num(c.pos_min);
            w.raw(","); w.key("pos_max"); w.num(c.pos_max);
            w.raw(","); w.key("id_task"); w.num(c.id_task);
            w.raw(","); w.key("refs"); w.num(int64_t(ckpts[i]->use_count()));
            w.raw(","); w.key("parts"); w.raw("[");
            bool first = true;
            if (!c.data_tgt.empty())  { part(w, "tgt", c.data_tgt); first = false; }
            if (!c.data_dft.empty())  { if (!first) w.raw(","); part(w, "dft", c.data_dft); first = false; }
            if (!c.data_spec.empty()) { if (!first) w.raw(","); part(w, "spec", c.data_spec); }
            w.raw("]}");
        }
        w.raw("],");

        w.key("accounted"); w.num(cache ? int64_t(cache->size()) : 0);
        w.raw(","); w.key("unique"); w.num(int64_t(unique));
        w.raw(","); w.key("limit"); w.num(cache ? int64_t(cache->limit_size) : 0);
        w.raw("}");
        return w.out;
    }
};

std::string error_line(const std::string & what) {
    pj::writer w;
    w.raw("{"); w.key("error"); w.str(what); w.raw("}");
    return w.out;
}

} // namespace

int main() {
    std::ios::sync_with_stdio(false);
    port p;
    bool begun = false;
    std::string line;
    while (std::getline(std::cin, line)) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) {
            continue;
        }
        std::string answer;
        try {
            const pj::value op = pj::parse(line);
            const std::string & name = op.at("op").as_str();
            if (name == "begin") {
                if (op.at("schema").as_int() != 1) {
                    throw std::runtime_error("this port speaks schema 1");
                }
                p.begin(op.at("config"));
                begun = true;
                pj::writer w;
                w.raw("{"); w.key("schema"); w.num(1); w.raw(","); w.key("port"); w.str(pcspec_port_name()); w.raw("}");
                answer = w.out;
            } else if (!begun) {
                answer = error_line("no begin line yet");
            } else {
                pcspec::disarm_all();
                if (op.has("faults")) {
                    for (const auto & site : op.at("faults").as_arr()) {
                        pcspec::arm(site.as_str());
                    }
                }
                p.apply(op);
                pcspec::disarm_all();
                answer = p.observe();
            }
        } catch (const std::exception & e) {
            pcspec::events().events.clear();
            answer = error_line(e.what());
        }
        std::cout << answer << '\n' << std::flush;
    }
    return 0;
}
