// Per-thread counters through perf_event_open(2).
//
// Each counter is its own event (no group): a kernel that gives software
// events but no hardware ones (virtual machines) then still counts what it
// can. Counts include the kernel's part where allowed (context switches
// happen there), else user space only for hardware events; a software
// event that the kernel would only count in user space is refused, since
// its count would be zero and look like a measurement.
//
// perf_event_open stays here, not in base/os: only this layer counts, and a
// refusal is noted (errno_text), never fatal.
#include "weft/trace/counters.hpp"

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cerrno>
#include "weft/base/error.hpp"

namespace weft::trace {

namespace {

struct counter_spec {
  const char* name;
  std::uint32_t type;
  std::uint64_t config;
};

constexpr std::uint64_t cache_event(std::uint64_t cache, std::uint64_t op, std::uint64_t result) {
  return cache | (op << 8) | (result << 16);
}

const counter_spec specs[] = {
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"l1d-misses", PERF_TYPE_HW_CACHE,
     cache_event(PERF_COUNT_HW_CACHE_L1D, PERF_COUNT_HW_CACHE_OP_READ,
                 PERF_COUNT_HW_CACHE_RESULT_MISS)},
    {"llc-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    {"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
};

const counter_spec* find_spec(const std::string& name) {
  for (const auto& s : specs)
    if (name == s.name) return &s;
  return nullptr;
}

int sys_perf_event_open(perf_event_attr* attr, int pid, int cpu, int group, unsigned long flags) {
  return int(syscall(SYS_perf_event_open, attr, pid, cpu, group, flags));
}

}  // namespace

const std::vector<std::string>& counter_names_known() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& s : specs) v.emplace_back(s.name);
    return v;
  }();
  return names;
}

const char* default_counters() {
  return "cycles,instructions,l1d-misses,llc-misses,context-switches,cpu-migrations";
}

std::vector<std::string> split_counter_list(const std::string& list) {
  std::vector<std::string> out;
  if (list == "off" || list.empty()) return out;
  std::size_t at = 0;
  while (at <= list.size()) {
    std::size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    out.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

std::string check_counter_list(const std::string& list) {
  if (list == "off") return {};
  if (list.empty()) return "empty list";
  std::vector<std::string> seen;
  for (const std::string& name : split_counter_list(list)) {
    if (name.empty()) return "an empty name in the list";
    if (find_spec(name) == nullptr) return "unknown counter '" + name + "'";
    for (const auto& s : seen)
      if (s == name) return "'" + name + "' named twice";
    seen.push_back(name);
  }
  return {};
}

counter_set::~counter_set() {
  close();
}

void counter_set::open(const std::vector<std::string>& list, perf_open_fn open_fn) {
  close();
  if (open_fn == nullptr) open_fn = sys_perf_event_open;
  for (const std::string& name : list) {
    const counter_spec* spec = find_spec(name);
    if (spec == nullptr) {
      refused_.push_back(name + ": unknown counter");
      continue;
    }
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = spec->type;
    attr.config = spec->config;
    attr.exclude_hv = 1;
    attr.read_format = 0;
    int fd = open_fn(&attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    int err = fd < 0 ? errno : 0;
    // perf_event_paranoid >= 2 lets a process count only its user space.
    if (fd < 0 && (err == EACCES || err == EPERM) && spec->type != PERF_TYPE_SOFTWARE) {
      attr.exclude_kernel = 1;
      fd = open_fn(&attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
      err = fd < 0 ? errno : 0;
    }
    if (fd < 0) {
      refused_.push_back(name + ": " + base::errno_text(err).c_str());
      continue;
    }
    fds_.push_back(fd);
    names_.push_back(attr.exclude_kernel ? name + ":u" : name);
  }
}

void counter_set::close() {
  for (int fd : fds_) ::close(fd);
  fds_.clear();
  names_.clear();
  refused_.clear();
}

std::vector<std::uint64_t> counter_set::read() const {
  std::vector<std::uint64_t> v(fds_.size(), 0);
  for (std::size_t i = 0; i < fds_.size(); ++i) {
    std::uint64_t value = 0;
    if (::read(fds_[i], &value, sizeof value) == ssize_t(sizeof value)) v[i] = value;
  }
  return v;
}

}  // namespace weft::trace
