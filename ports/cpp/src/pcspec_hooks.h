// Test hooks of the port: fault injection, the no-init allocator, and the event sink.
//
// In a llama.cpp change these would be, respectively, a debug-only fault point (or nothing),
// common_no_init_allocator (common.h, #30137), and the server's log lines (SRV_WRN, SLT_TRC).
// The conformance driver arms faults per operation and reads the events after it.

#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace pcspec {

// -- fault injection ------------------------------------------------------------------------------
//
// A site is a place where the real code can fail (docs/SPEC.md, "Fault sites"). The driver
// arms a site n times; the code asks `fault(site)` where it can fail, which consumes one.

void arm(const std::string & site);
void disarm_all();
bool fault(const char * site);

// throws std::bad_alloc when `site` is armed: put before an allocation that can fail
inline void maybe_bad_alloc(const char * site) {
    if (fault(site)) {
        throw std::bad_alloc();
    }
}

// The fault site of the llama_state_seq_* call that follows (the stub reads it).
const char * current_site();

struct site_scope {
    explicit site_scope(const char * site);
    ~site_scope();
    site_scope(const site_scope &) = delete;
    site_scope & operator=(const site_scope &) = delete;

    const char * prev;
};

// -- buffers -------------------------------------------------------------------------------------------

// std::allocator that leaves ints uninitialized on resize (common_no_init_allocator): the bytes
// are garbage until a fill writes them, which is safe only because every fill is validated.
template <typename T>
struct no_init_allocator {
    using value_type = T;

    no_init_allocator() = default;
    template <typename U>
    no_init_allocator(const no_init_allocator<U> &) {}

    T * allocate(size_t n) { return std::allocator<T>().allocate(n); }
    void deallocate(T * p, size_t n) { std::allocator<T>().deallocate(p, n); }

    template <typename U>
    void construct(U * p) { ::new (static_cast<void *>(p)) U; }  // default-init: no zeroing
    template <typename U, typename... Args>
    void construct(U * p, Args &&... args) { ::new (static_cast<void *>(p)) U(std::forward<Args>(args)...); }

    template <typename U>
    bool operator==(const no_init_allocator<U> &) const { return true; }
    template <typename U>
    bool operator!=(const no_init_allocator<U> &) const { return false; }
};

using buffer = std::vector<uint8_t, no_init_allocator<uint8_t>>;

// -- events ----------------------------------------------------------------------------------------------

struct ev_value {
    enum kind_t { INT, STR, BOOL, NUL } kind = NUL;
    int64_t     i = 0;
    std::string s;

    ev_value(std::nullptr_t) {}
    ev_value(bool b) : kind(BOOL), i(b) {}
    ev_value(int v) : kind(INT), i(v) {}
    ev_value(int64_t v) : kind(INT), i(v) {}
    ev_value(uint64_t v) : kind(INT), i(int64_t(v)) {}
    ev_value(const char * v) : kind(STR), s(v) {}
    ev_value(std::string v) : kind(STR), s(std::move(v)) {}
};

struct event {
    std::string kind;
    std::vector<std::pair<std::string, ev_value>> fields;
};

// what the server would log; the driver drains it after each operation
struct event_log {
    std::vector<event> events;

    void emit(const char * kind, std::initializer_list<std::pair<const char *, ev_value>> fields = {});
};

event_log & events();

} // namespace pcspec
