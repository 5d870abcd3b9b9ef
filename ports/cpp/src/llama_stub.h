// A stand-in for the parts of llama.h the prompt cache and the checkpoints call.
//
// The conformance driver tells the stub what each sequence's state is (a size and a state
// tag, docs/SPEC.md "States as bytes"); llama_state_seq_get_data_ext writes that state's bytes,
// llama_state_seq_set_data_ext reads a buffer back and accepts it only if it is one whole
// state. The failures of the real functions are the fault sites (pcspec_hooks.h): a read that
// throws writes part of the buffer and returns 0; a short write returns fewer bytes than
// llama_state_seq_get_size_ext said; a failed load returns 0.

#pragma once

#include <cstddef>
#include <cstdint>

typedef int32_t  llama_seq_id;
typedef int32_t  llama_pos;
typedef uint32_t llama_state_seq_flags;

#define LLAMA_STATE_SEQ_FLAGS_NONE         0
#define LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY 1

struct llama_context;

size_t llama_state_seq_get_size_ext(llama_context * ctx, llama_seq_id seq_id, llama_state_seq_flags flags);
size_t llama_state_seq_get_data_ext(llama_context * ctx, uint8_t * dst, size_t size, llama_seq_id seq_id, llama_state_seq_flags flags);
size_t llama_state_seq_set_data_ext(llama_context * ctx, const uint8_t * src, size_t size, llama_seq_id seq_id, llama_state_seq_flags flags);

// the speculative-decoding stash of a checkpoint (common_speculative_get_state)
size_t pcspec_spec_state_size(llama_context * ctx, llama_seq_id seq_id);
void   pcspec_spec_state_write(llama_context * ctx, llama_seq_id seq_id, uint8_t * dst, size_t size);

// -- the driver's side ----------------------------------------------------------------------------

llama_context * pcspec_stub_new();
void            pcspec_stub_free(llama_context * ctx);

// the state the next get_data of (seq, flags) writes; flags 2 = the speculative stash
void pcspec_stub_set(llama_context * ctx, llama_seq_id seq_id, llama_state_seq_flags flags, size_t size, uint64_t tag);

// byte k of a buffer holding state `tag`, and the tag a buffer holds (-1: not a whole state)
uint8_t pcspec_state_byte(uint64_t tag, size_t k);
int64_t pcspec_decode_state(const uint8_t * data, size_t size);
