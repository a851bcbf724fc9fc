// OMP_PROC_BIND and OMP_PLACES as libgomp reads them (OpenMP 5.0, 6.4 and
// 6.5): the binding policies per nesting level, and the place list over the
// process's CPUs, from hwloc's topology (abstract names) or from an explicit
// list. affinity.cpp maps them onto weft's PEs.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>
#include "omp/omp_internal.hpp"
#include "weft/base/topology.hpp"

namespace weft::omp {

std::string env_word(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!s.empty() && space(s.back())) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && space(s[i])) ++i;
  return s.substr(i);
}

// ---- OMP_PROC_BIND ----------------------------------------------------------------

std::optional<std::vector<int>> parse_proc_bind(const char* v) {
  std::vector<int> list;
  std::string s = env_word(v);
  std::size_t at = 0;
  while (true) {
    const std::size_t comma = s.find(',', at);
    const std::string item = env_word(s.substr(at, comma - at));
    if (item == "false" || item == "true") {
      if (s.find(',') != std::string::npos) return std::nullopt;  // alone only
      list.push_back(item == "true" ? bind_true : bind_false);
    } else if (item == "master" || item == "primary") {
      list.push_back(bind_primary);
    } else if (item == "close") {
      list.push_back(bind_close);
    } else if (item == "spread") {
      list.push_back(bind_spread);
    } else {
      return std::nullopt;
    }
    if (comma == std::string::npos) return list;
    at = comma + 1;
  }
}

const char* proc_bind_name(int b) {
  switch (b) {
    case bind_true:
      return "TRUE";
    case bind_primary:
      return "MASTER";
    case bind_close:
      return "CLOSE";
    case bind_spread:
      return "SPREAD";
    default:
      return "FALSE";
  }
}

// ---- OMP_PLACES ---------------------------------------------------------------------

namespace {

// An abstract name, with an optional (count): places of the process's CPUs
// grouped by hwloc (hardware thread, core, package, last-level cache, NUMA
// node), in hwloc's logical order.
std::optional<std::vector<std::vector<int>>> abstract_places(const std::string& s) {
  static const char* const names[] = {"threads", "cores", "sockets", "ll_caches", "numa_domains"};
  int kind = -1;
  std::size_t len = 0;
  for (int k = 0; k < 5; ++k)
    if (s.rfind(names[k], 0) == 0) {
      kind = k;
      len = std::strlen(names[k]);
    }
  if (kind < 0) return std::nullopt;
  std::string rest = env_word(s.substr(len));
  long count = -1;
  if (!rest.empty()) {
    if (rest.front() != '(' || rest.back() != ')') return std::nullopt;
    const std::string n = env_word(rest.substr(1, rest.size() - 2));
    char* end = nullptr;
    count = std::strtol(n.c_str(), &end, 10);
    if (n.empty() || *end != '\0' || count <= 0) return std::nullopt;
  }
  std::vector<int> keys;
  std::vector<std::vector<int>> places;
  for (const base::cpu_info& c : base::topology::get().allowed()) {
    int key = c.logical_index;
    if (kind == 1) key = c.core;
    if (kind == 2) key = c.package;
    if (kind == 3) key = c.l3 >= 0 ? c.l3 : c.package;
    if (kind == 4) key = c.numa;
    const auto it = std::find(keys.begin(), keys.end(), key);
    if (it == keys.end()) {
      keys.push_back(key);
      places.push_back({c.os_index});
    } else {
      places[std::size_t(it - keys.begin())].push_back(c.os_index);
    }
  }
  if (count > 0 && std::size_t(count) < places.size()) places.resize(std::size_t(count));
  return places;
}

// An explicit list, as libgomp reads it: places "{res,...}", each res a
// CPU, an interval "cpu:len[:stride]" or an exclusion "!cpu" (of a CPU
// listed before it in the place); a place may be followed by ":len[:stride]"
// (len copies, each shifted by stride), and "!{...}" removes the places
// listed before it that equal it. CPUs outside the process's set are left
// out of their place, and empty places out of the list.
class list_parser {
 public:
  explicit list_parser(const std::string& s) : s_(s) {}

  std::optional<std::vector<std::vector<int>>> parse() {
    std::vector<std::set<int>> raw;
    while (true) {
      skip();
      const bool remove = eat('!');
      std::set<int> place;
      if (!parse_place(place)) return std::nullopt;
      if (remove) {
        const auto before = raw.size();
        raw.erase(std::remove(raw.begin(), raw.end(), place), raw.end());
        if (raw.size() == before) return std::nullopt;
      } else {
        long len = 1, stride = 1;
        if (eat(':')) {
          if (!number(len) || len <= 0) return std::nullopt;
          if (eat(':') && !signed_number(stride)) return std::nullopt;
        }
        for (long k = 0; k < len; ++k) {
          std::set<int> shifted;
          for (int cpu : place) {
            const long c = cpu + k * stride;
            if (c < 0 || c > 1 << 20) return std::nullopt;
            shifted.insert(int(c));
          }
          raw.push_back(std::move(shifted));
        }
      }
      skip();
      if (at_ == s_.size()) break;
      if (!eat(',')) return std::nullopt;
    }
    std::vector<bool> allowed;
    for (const base::cpu_info& c : base::topology::get().allowed()) {
      if (std::size_t(c.os_index) >= allowed.size()) allowed.resize(std::size_t(c.os_index) + 1);
      allowed[std::size_t(c.os_index)] = true;
    }
    std::vector<std::vector<int>> places;
    for (const std::set<int>& p : raw) {
      std::vector<int> cpus;
      for (int c : p)
        if (std::size_t(c) < allowed.size() && allowed[std::size_t(c)]) cpus.push_back(c);
      if (!cpus.empty()) places.push_back(std::move(cpus));
    }
    return places;
  }

 private:
  bool parse_place(std::set<int>& place) {
    if (!eat('{')) return false;
    while (true) {
      skip();
      const bool remove = eat('!');
      long first = 0, len = 1, stride = 1;
      if (!number(first)) return false;
      if (!remove && eat(':')) {
        if (!number(len) || len <= 0) return false;
        if (eat(':') && !signed_number(stride)) return false;
      }
      for (long k = 0; k < len; ++k) {
        const long c = first + k * stride;
        if (c < 0 || c > 1 << 20) return false;
        if (remove) {
          if (place.erase(int(c)) == 0) return false;
        } else {
          place.insert(int(c));
        }
      }
      skip();
      if (eat('}')) return true;
      if (!eat(',')) return false;
    }
  }
  void skip() {
    while (at_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[at_]))) ++at_;
  }
  bool eat(char c) {
    skip();
    if (at_ < s_.size() && s_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  bool number(long& n) {
    skip();
    if (at_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[at_]))) return false;
    n = 0;
    while (at_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[at_])) && n < 1 << 24)
      n = n * 10 + (s_[at_++] - '0');
    return true;
  }
  bool signed_number(long& n) {
    const bool minus = eat('-');
    if (!minus) eat('+');
    if (!number(n)) return false;
    if (minus) n = -n;
    return true;
  }
  const std::string& s_;
  std::size_t at_ = 0;
};

}  // namespace

std::optional<std::vector<std::vector<int>>> parse_places(const char* value) {
  const std::string s = env_word(value);
  if (!s.empty() && std::isalpha(static_cast<unsigned char>(s[0]))) return abstract_places(s);
  return list_parser(s).parse();
}

// GOMP_CPU_AFFINITY, GCC's older variable: CPUs "a", ranges "a-b" and
// "a-b:stride", separated by spaces or commas; each CPU a place of its own,
// in the order given (those outside the process's set are left out, as
// from OMP_PLACES).
std::optional<std::vector<std::vector<int>>> parse_cpu_affinity(const char* value) {
  std::vector<bool> allowed;
  for (const base::cpu_info& c : base::topology::get().allowed()) {
    if (std::size_t(c.os_index) >= allowed.size()) allowed.resize(std::size_t(c.os_index) + 1);
    allowed[std::size_t(c.os_index)] = true;
  }
  std::vector<std::vector<int>> places;
  const char* p = value;
  const auto number = [&p](long& n) {
    if (!std::isdigit(static_cast<unsigned char>(*p))) return false;
    char* end = nullptr;
    n = std::strtol(p, &end, 10);
    p = end;
    return n <= 1 << 20;
  };
  while (true) {
    while (*p == ' ' || *p == '\t' || *p == ',') ++p;
    if (*p == '\0') break;
    long first = 0, last = 0, stride = 1;
    if (!number(first)) return std::nullopt;
    last = first;
    if (*p == '-') {
      ++p;
      if (!number(last) || last < first) return std::nullopt;
      if (*p == ':') {
        ++p;
        if (!number(stride) || stride <= 0) return std::nullopt;
      }
    }
    for (long c = first; c <= last; c += stride)
      if (std::size_t(c) < allowed.size() && allowed[std::size_t(c)]) places.push_back({int(c)});
  }
  return places;
}

// libgomp's text of a place list: "{0:2},{4}" (runs of consecutive CPUs as
// first:length).
std::string places_text(const std::vector<std::vector<int>>& places) {
  std::string out;
  for (const auto& p : places) {
    if (!out.empty()) out += ',';
    out += '{';
    for (std::size_t i = 0; i < p.size();) {
      std::size_t j = i;
      while (j + 1 < p.size() && p[j + 1] == p[j] + 1) ++j;
      if (i != 0) out += ',';
      out += std::to_string(p[i]);
      if (j > i) out += ':' + std::to_string(j - i + 1);
      i = j + 1;
    }
    out += '}';
  }
  return out;
}

}  // namespace weft::omp
