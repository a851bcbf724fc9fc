// The PE map and binding: where each PE of a node runs, computed from the
// topology's snapshot (topology.cpp) without asking hwloc again, and the
// one call that puts a thread there.
//
// A --weft:bind value is `none`, `compact`, `scatter` or a CPU list: OS
// indices ("0-3,6") or hwloc logical indices ("L0-3,L6"). A list is parsed
// without the machine (check_bind_syntax: the option's own check) and then
// resolved against the inherited CPU set (check_bind, place), so that a
// list naming a CPU outside the set is refused with the set in the message.
// compact and scatter order the cores of the set and deal their hardware
// threads out in rounds, so that hyperthread siblings are used only once
// every core has a PE.
#include "weft/base/topology.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include "topology_internal.hpp"
#include "weft/base/error.hpp"

namespace weft::base {

using topology_internal::plural;

namespace {

// Largest CPU number a list may name. Linux caps NR_CPUS at 8192 today; the
// margin is for the future, and the cap keeps a typo such as "0-99999999"
// from expanding into a huge vector before it is rejected.
constexpr long max_cpu_number = 1 << 20;

// ---- CPU lists -----------------------------------------------------------

// A CPU list as written, before it is checked against the machine: inclusive
// ranges of OS indices, or of hwloc logical indices when the list starts
// with 'L'.
struct cpu_list {
  bool logical = false;
  std::vector<std::pair<int, int>> ranges;
};

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Reads digits at text[pos..]; nullopt if there are none or the number is
// absurdly large (then *too_large is set).
std::optional<int> read_number(const std::string& text, std::size_t& pos, bool* too_large) {
  const std::size_t start = pos;
  long value = 0;
  while (pos < text.size() && is_digit(text[pos])) {
    value = value * 10 + (text[pos] - '0');
    if (value > max_cpu_number) {
      *too_large = true;
      return std::nullopt;
    }
    ++pos;
  }
  if (pos == start) return std::nullopt;
  return int(value);
}

// Parses "0-3,6" or "L0-3,L6" (the 'L' on later items and after '-' is
// optional in a logical list, and forbidden in an OS list, where it would be
// ambiguous which numbering the writer meant). Returns "" or the problem.
std::string parse_cpu_list(const std::string& text, cpu_list& out) {
  out = {};
  if (text.empty() || text == "L") return "empty CPU list";
  out.logical = text[0] == 'L';
  std::size_t begin = 0;
  while (true) {
    std::size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    if (item.empty()) return "empty item in CPU list '" + text + "'";

    std::size_t pos = 0;
    bool too_large = false;
    auto number = [&]() -> std::optional<int> {
      if (out.logical && pos < item.size() && item[pos] == 'L') ++pos;
      return read_number(item, pos, &too_large);
    };
    const std::optional<int> first = number();
    std::optional<int> last = first;
    if (first && pos < item.size() && item[pos] == '-') {
      ++pos;
      last = number();
    }
    if (too_large) return "'" + item + "' names a CPU beyond " + std::to_string(max_cpu_number);
    if (!out.logical && item[0] == 'L')
      return "'" + item +
             "' is a logical index in a list of OS indices (a logical list "
             "starts with L, e.g. L0-3)";
    if (!first || !last || pos != item.size()) return "'" + item + "' is not a CPU number or range";
    if (*first > *last) return "'" + item + "' is not a CPU range (it runs backwards)";
    out.ranges.emplace_back(*first, *last);

    if (end == text.size()) break;
    begin = end + 1;
  }
  return "";
}

// Resolves a parsed list against the inherited set: the OS index of each
// listed CPU in list order, or the problem in *error.
std::vector<int> resolve_cpu_list(const cpu_list& list, const std::vector<cpu_info>& allowed,
                                  int machine_pus, std::string* error) {
  // Index -> OS index of every CPU in the inherited set, in the list's numbering.
  std::map<int, int> in_set;
  std::vector<int> set_names;
  for (const cpu_info& c : allowed) {
    const int name = list.logical ? c.logical_index : c.os_index;
    in_set.emplace(name, c.os_index);
    set_names.push_back(name);
  }
  const std::string prefix = list.logical ? "L" : "";
  const std::string set_text = prefix + topology::format_cpus(set_names);

  std::vector<int> cpus;
  std::vector<int> seen;
  for (auto [first, last] : list.ranges) {
    // Ranges are walked one CPU at a time, but a range that is larger than
    // the set necessarily leaves it after at most set-size steps.
    for (int i = first; i <= last; ++i) {
      if (list.logical && i >= machine_pus) {
        *error = "there is no CPU L" + std::to_string(i) + " (this machine has " +
                 plural(machine_pus, "hardware thread") + ", L0-" +
                 std::to_string(machine_pus - 1) + ")";
        return {};
      }
      auto it = in_set.find(i);
      if (it == in_set.end()) {
        *error =
            "CPU " + prefix + std::to_string(i) + " is not in this process's CPU set " + set_text;
        return {};
      }
      cpus.push_back(it->second);
      seen.push_back(i);
    }
  }
  // A duplicate would put two PEs on one CPU while another CPU of the list
  // stays idle: almost certainly a typo, so it is refused rather than
  // silently oversubscribing.
  std::sort(seen.begin(), seen.end());
  auto dup = std::adjacent_find(seen.begin(), seen.end());
  if (dup != seen.end()) {
    *error = "CPU " + prefix + std::to_string(*dup) + " is listed more than once";
    return {};
  }
  return cpus;
}

// ---- placement -----------------------------------------------------------

// One core of the inherited set with where it sits in the tree and the OS
// indices of its PUs (in logical order) that are in the set.
struct core_slot {
  int package, numa, l3;
  std::vector<int> pus;
};

// Cores of the inherited set in logical order. A PU whose core hwloc does not
// know counts as a core of its own.
std::vector<core_slot> cores_of(const std::vector<cpu_info>& allowed) {
  std::vector<core_slot> cores;
  std::map<int, std::size_t> slot_of_core;
  for (const cpu_info& c : allowed) {
    if (c.core >= 0) {
      auto [it, fresh] = slot_of_core.emplace(c.core, cores.size());
      if (!fresh) {
        cores[it->second].pus.push_back(c.os_index);
        continue;
      }
    }
    cores.push_back({c.package, c.numa, c.l3, {c.os_index}});
  }
  return cores;
}

// Scatter order of cores[idx...]: group by the tree level `level` (0 package,
// 1 NUMA node, 2 L3; 3 = the cores themselves), order each group recursively
// and deal the groups out round-robin, so consecutive entries differ at the
// highest level possible. Groups are taken in order of first appearance,
// i.e. logical order. Grouping by the key at each level, rather than walking
// hwloc's tree, gives the same order whether NUMA nodes contain L3s (AMD
// NPS) or L3s contain NUMA nodes (Intel SNC).
std::vector<std::size_t> scatter_order(const std::vector<core_slot>& cores,
                                       const std::vector<std::size_t>& idx, int level) {
  if (level == 3 || idx.size() <= 1) return idx;
  auto key = [&](std::size_t i) {
    const core_slot& c = cores[i];
    return level == 0 ? c.package : level == 1 ? c.numa : c.l3;
  };
  std::vector<int> keys;
  std::vector<std::vector<std::size_t>> groups;
  for (std::size_t i : idx) {
    auto it = std::find(keys.begin(), keys.end(), key(i));
    if (it == keys.end()) {
      keys.push_back(key(i));
      groups.emplace_back();
      it = keys.end() - 1;
    }
    groups[std::size_t(it - keys.begin())].push_back(i);
  }
  for (auto& g : groups) g = scatter_order(cores, g, level + 1);

  std::vector<std::size_t> out;
  for (std::size_t round = 0; out.size() < idx.size(); ++round)
    for (const auto& g : groups)
      if (round < g.size()) out.push_back(g[round]);
  return out;
}

// The CPUs of the set in placement order: the first PU of each core in
// `core_order`, then the second PU of each, and so on, so that hyperthread
// siblings are used only once every core has a PE.
std::vector<int> by_rounds(const std::vector<core_slot>& cores,
                           const std::vector<std::size_t>& core_order) {
  std::vector<int> out;
  for (std::size_t round = 0;; ++round) {
    bool any = false;
    for (std::size_t i : core_order)
      if (round < cores[i].pus.size()) {
        out.push_back(cores[i].pus[round]);
        any = true;
      }
    if (!any) return out;
  }
}

}  // namespace

int topology::allowed_cores() const {
  return int(cores_of(allowed_).size());
}

std::string topology::check_bind_syntax(const std::string& bind) {
  if (bind == "none" || bind == "compact" || bind == "scatter") return "";
  cpu_list list;
  return parse_cpu_list(bind, list);
}

std::string topology::check_bind(const std::string& bind) const {
  if (bind == "none" || bind == "compact" || bind == "scatter") return "";
  cpu_list list;
  std::string error = parse_cpu_list(bind, list);
  if (error.empty()) resolve_cpu_list(list, allowed_, pus_, &error);
  return error;
}

std::vector<int> topology::place(int n, const std::string& bind) const {
  if (n <= 0) return {};
  if (bind == "none") return std::vector<int>(std::size_t(n), -1);

  std::vector<int> order;
  if (bind == "compact" || bind == "scatter") {
    const std::vector<core_slot> cores = cores_of(allowed_);
    std::vector<std::size_t> core_order(cores.size());
    for (std::size_t i = 0; i < cores.size(); ++i) core_order[i] = i;
    if (bind == "scatter") core_order = scatter_order(cores, core_order, 0);
    order = by_rounds(cores, core_order);
  } else {
    cpu_list list;
    std::string error = parse_cpu_list(bind, list);
    if (error.empty()) order = resolve_cpu_list(list, allowed_, pus_, &error);
    if (!error.empty())
      fatal("topology::place: bind value '%s' was not validated: %s", bind.c_str(), error.c_str());
  }

  // More PEs than CPUs: wrap around (the caller has warned).
  std::vector<int> cpus(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < cpus.size(); ++i) cpus[i] = order[i % order.size()];
  return cpus;
}

void topology::bind_this_thread(int os_cpu) const {
  if (os_cpu < 0) return;
  // pthread_setaffinity_np rather than hwloc_set_cpubind: one system call on
  // the calling thread that touches no shared hwloc state, which is what a PE
  // thread starting up wants. A dynamically sized set, because CPU numbers
  // may exceed CPU_SETSIZE (1024) on large machines.
  cpu_set_t* set = CPU_ALLOC(os_cpu + 1);
  if (!set) fatal("CPU_ALLOC(%d) failed (out of memory)", os_cpu + 1);
  const std::size_t size = CPU_ALLOC_SIZE(os_cpu + 1);
  CPU_ZERO_S(size, set);
  CPU_SET_S(std::size_t(os_cpu), size, set);
  const int rc = pthread_setaffinity_np(pthread_self(), size, set);
  CPU_FREE(set);
  if (rc != 0) {
    char what[64];
    std::snprintf(what, sizeof what, "binding a thread to CPU %d", os_cpu);
    fatal_errno(rc, what);
  }
}

std::string topology::format_cpus(std::vector<int> cpus) {
  // Negative entries mean "unbound" in a placement and name no CPU.
  cpus.erase(std::remove_if(cpus.begin(), cpus.end(), [](int c) { return c < 0; }), cpus.end());
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string s;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!s.empty()) s += ',';
    s += std::to_string(cpus[i]);
    if (j > i) s += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return s;
}

}  // namespace weft::base
