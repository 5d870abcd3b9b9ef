#include "pcspec_hooks.h"

namespace pcspec {

static std::map<std::string, int> g_armed;
static const char * g_site = "";
static event_log g_events;

void arm(const std::string & site) {
    g_armed[site] += 1;
}

void disarm_all() {
    g_armed.clear();
}

bool fault(const char * site) {
    auto it = g_armed.find(site);
    if (it == g_armed.end() || it->second <= 0) {
        return false;
    }
    it->second -= 1;
    return true;
}

const char * current_site() {
    return g_site;
}

site_scope::site_scope(const char * site) : prev(g_site) {
    g_site = site;
}

site_scope::~site_scope() {
    g_site = prev;
}

void event_log::emit(const char * kind, std::initializer_list<std::pair<const char *, ev_value>> fields) {
    event ev;
    ev.kind = kind;
    for (const auto & f : fields) {
        ev.fields.emplace_back(f.first, f.second);
    }
    events.push_back(std::move(ev));
}

event_log & events() {
    return g_events;
}

} // namespace pcspec
