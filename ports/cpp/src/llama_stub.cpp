#include "llama_stub.h"

#include "pcspec_hooks.h"

#include <map>
#include <utility>

struct stub_state {
    size_t   size = 0;
    uint64_t tag  = 0;
};

struct llama_context {
    std::map<std::pair<llama_seq_id, llama_state_seq_flags>, stub_state> states;
};

static const llama_state_seq_flags SPEC = 2;

llama_context * pcspec_stub_new() {
    return new llama_context();
}

void pcspec_stub_free(llama_context * ctx) {
    delete ctx;
}

void pcspec_stub_set(llama_context * ctx, llama_seq_id seq_id, llama_state_seq_flags flags, size_t size, uint64_t tag) {
    ctx->states[{seq_id, flags}] = stub_state{size, tag};
}

uint8_t pcspec_state_byte(uint64_t tag, size_t k) {
    return uint8_t(((tag >> (8 * (k % 4))) + k / 4) & 0xFF);
}

int64_t pcspec_decode_state(const uint8_t * data, size_t size) {
    if (size == 0) {
        return -1;
    }
    uint64_t tag = 0;
    for (size_t k = 0; k < size && k < 4; ++k) {
        tag |= uint64_t(data[k]) << (8 * k);
    }
    for (size_t k = 0; k < size; ++k) {
        if (data[k] != pcspec_state_byte(tag, k)) {
            return -1;
        }
    }
    return int64_t(tag);
}

static void write_state(uint8_t * dst, uint64_t tag, size_t n) {
    for (size_t k = 0; k < n; ++k) {
        dst[k] = pcspec_state_byte(tag, k);
    }
}

size_t llama_state_seq_get_size_ext(llama_context * ctx, llama_seq_id seq_id, llama_state_seq_flags flags) {
    return ctx->states[{seq_id, flags}].size;
}

size_t llama_state_seq_get_data_ext(llama_context * ctx, uint8_t * dst, size_t size, llama_seq_id seq_id, llama_state_seq_flags flags) {
    const stub_state st = ctx->states[{seq_id, flags}];
    if (pcspec::fault(pcspec::current_site()) || size < st.size) {
        // the write threw part-way (the exception is caught inside): a prefix is written
        write_state(dst, st.tag, (size < st.size ? size : st.size) / 2);
        return 0;
    }
    if (st.size > 1 && pcspec::fault("state.write.short")) {
        write_state(dst, st.tag, st.size / 2);
        return st.size / 2;
    }
    write_state(dst, st.tag, st.size);
    return st.size;
}

size_t llama_state_seq_set_data_ext(llama_context * ctx, const uint8_t * src, size_t size, llama_seq_id seq_id, llama_state_seq_flags flags) {
    (void) ctx; (void) seq_id; (void) flags;
    if (size == 0) {
        return 0;  // the magic read throws: 0, which a caller comparing with size 0 takes for success
    }
    if (pcspec::fault(pcspec::current_site())) {
        return 0;
    }
    const int64_t tag = pcspec_decode_state(src, size);  // reads every byte (valgrind sees uninit ones)
    return tag > 0 ? size : 0;
}

size_t pcspec_spec_state_size(llama_context * ctx, llama_seq_id seq_id) {
    return ctx->states[{seq_id, SPEC}].size;
}

void pcspec_spec_state_write(llama_context * ctx, llama_seq_id seq_id, uint8_t * dst, size_t size) {
    write_state(dst, ctx->states[{seq_id, SPEC}].tag, size);
}
