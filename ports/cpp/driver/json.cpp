#include "json.h"

#include <cstdlib>

namespace pj {

const value & value::at(const std::string & key) const {
    if (kind != OBJ) {
        throw std::runtime_error("not an object (looking for '" + key + "')");
    }
    auto it = o.find(key);
    if (it == o.end()) {
        throw std::runtime_error("missing field '" + key + "'");
    }
    return it->second;
}

int64_t value::as_int() const {
    if (kind == INT) {
        return i;
    }
    if (kind == DBL) {
        return int64_t(d);
    }
    throw std::runtime_error("not an integer");
}

bool value::as_bool() const {
    if (kind != BOOL) {
        throw std::runtime_error("not a boolean");
    }
    return b;
}

const std::string & value::as_str() const {
    if (kind != STR) {
        throw std::runtime_error("not a string");
    }
    return s;
}

const std::vector<value> & value::as_arr() const {
    if (kind != ARR) {
        throw std::runtime_error("not an array");
    }
    return a;
}

namespace {

struct parser {
    const std::string & t;
    size_t p = 0;

    explicit parser(const std::string & text) : t(text) {}

    [[noreturn]] void fail(const char * what) const {
        throw std::runtime_error(std::string("JSON: ") + what + " at offset " + std::to_string(p));
    }

    void ws() {
        while (p < t.size() && (t[p] == ' ' || t[p] == '\t' || t[p] == '\n' || t[p] == '\r')) {
            ++p;
        }
    }

    bool lit(const char * s) {
        size_t n = 0;
        while (s[n]) {
            ++n;
        }
        if (t.compare(p, n, s) == 0) {
            p += n;
            return true;
        }
        return false;
    }

    value any() {
        ws();
        if (p >= t.size()) {
            fail("unexpected end");
        }
        value v;
        const char c = t[p];
        if (c == '{') {
            v.kind = value::OBJ;
            ++p;
            ws();
            if (p < t.size() && t[p] == '}') {
                ++p;
                return v;
            }
            for (;;) {
                ws();
                if (p >= t.size() || t[p] != '"') {
                    fail("expected a key");
                }
                std::string k = string();
                ws();
                if (p >= t.size() || t[p] != ':') {
                    fail("expected ':'");
                }
                ++p;
                v.o[k] = any();
                ws();
                if (p < t.size() && t[p] == ',') {
                    ++p;
                    continue;
                }
                if (p < t.size() && t[p] == '}') {
                    ++p;
                    return v;
                }
                fail("expected ',' or '}'");
            }
        }
        if (c == '[') {
            v.kind = value::ARR;
            ++p;
            ws();
            if (p < t.size() && t[p] == ']') {
                ++p;
                return v;
            }
            for (;;) {
                v.a.push_back(any());
                ws();
                if (p < t.size() && t[p] == ',') {
                    ++p;
                    continue;
                }
                if (p < t.size() && t[p] == ']') {
                    ++p;
                    return v;
                }
                fail("expected ',' or ']'");
            }
        }
        if (c == '"') {
            v.kind = value::STR;
            v.s = string();
            return v;
        }
        if (lit("true")) {
            v.kind = value::BOOL;
            v.b = true;
            return v;
        }
        if (lit("false")) {
            v.kind = value::BOOL;
            return v;
        }
        if (lit("null")) {
            return v;
        }
        return number();
    }

    value number() {
        const size_t start = p;
        bool frac = false;
        if (p < t.size() && t[p] == '-') {
            ++p;
        }
        while (p < t.size() && ((t[p] >= '0' && t[p] <= '9') || t[p] == '.' || t[p] == 'e' || t[p] == 'E' || t[p] == '+' || t[p] == '-')) {
            frac = frac || t[p] == '.' || t[p] == 'e' || t[p] == 'E';
            ++p;
        }
        if (p == start) {
            fail("unexpected character");
        }
        value v;
        const std::string num = t.substr(start, p - start);
        if (frac) {
            v.kind = value::DBL;
            v.d = std::strtod(num.c_str(), nullptr);
        } else {
            v.kind = value::INT;
            v.i = std::strtoll(num.c_str(), nullptr, 10);
        }
        return v;
    }

    std::string string() {
        ++p;  // the opening quote
        std::string out;
        while (p < t.size() && t[p] != '"') {
            char c = t[p++];
            if (c != '\\') {
                out += c;
                continue;
            }
            if (p >= t.size()) {
                fail("unterminated escape");
            }
            const char e = t[p++];
            switch (e) {
                case 'n': out += '\n'; break;
                case 't': out += '\t'; break;
                case 'r': out += '\r'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'u': {
                    if (p + 4 > t.size()) {
                        fail("short \\u escape");
                    }
                    const unsigned cp = unsigned(std::strtoul(t.substr(p, 4).c_str(), nullptr, 16));
                    p += 4;
                    if (cp < 0x80) {
                        out += char(cp);
                    } else if (cp < 0x800) {
                        out += char(0xC0 | (cp >> 6));
                        out += char(0x80 | (cp & 0x3F));
                    } else {
                        out += char(0xE0 | (cp >> 12));
                        out += char(0x80 | ((cp >> 6) & 0x3F));
                        out += char(0x80 | (cp & 0x3F));
                    }
                    break;
                }
                default: out += e; break;
            }
        }
        if (p >= t.size()) {
            fail("unterminated string");
        }
        ++p;
        return out;
    }
};

} // namespace

value parse(const std::string & text) {
    parser ps(text);
    value v = ps.any();
    ps.ws();
    if (ps.p != text.size()) {
        ps.fail("trailing characters");
    }
    return v;
}

void writer::str(const std::string & s) {
    out += '"';
    for (const char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            case '\r': out += "\\r"; break;
            default:
                if ((unsigned char) c < 0x20) {
                    static const char * hex = "0123456789abcdef";
                    out += "\\u00";
                    out += hex[(c >> 4) & 0xF];
                    out += hex[c & 0xF];
                } else {
                    out += c;
                }
        }
    }
    out += '"';
}

} // namespace pj
