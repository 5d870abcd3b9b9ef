// A small JSON reader and writer for the conformance protocol (objects, arrays, integers,
// strings, booleans, null; numbers with a fraction or exponent are read as doubles).

#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace pj {

struct value {
    enum kind_t { NUL, BOOL, INT, DBL, STR, ARR, OBJ } kind = NUL;

    bool        b = false;
    int64_t     i = 0;
    double      d = 0.0;
    std::string s;
    std::vector<value> a;
    std::map<std::string, value> o;

    bool is_null() const { return kind == NUL; }
    bool has(const std::string & key) const { return kind == OBJ && o.count(key) > 0; }

    const value & at(const std::string & key) const;
    int64_t     as_int() const;
    bool        as_bool() const;
    const std::string & as_str() const;
    const std::vector<value> & as_arr() const;

    int64_t int_or(const std::string & key, int64_t dflt) const { return has(key) ? at(key).as_int() : dflt; }
};

value parse(const std::string & text);  // throws std::runtime_error

// -- writing ------------------------------------------------------------------------------------

struct writer {
    std::string out;

    void raw(const char * s) { out += s; }
    void str(const std::string & s);
    void num(int64_t v) { out += std::to_string(v); }
    void key(const char * k) { str(k); out += ':'; }
};

} // namespace pj
