// Per-thread event counters through perf_event_open: hardware ones (cycles,
// instructions, cache misses) where the kernel gives them, software ones
// (context switches, CPU migrations) where it allows those. Used by
// --weft:stats and the trace; a counter the kernel refuses is left out and
// said once, never an error.
#pragma once
#include <cstdint>
#include <string>
#include <vector>
#include "weft/base/export.hpp"

struct perf_event_attr;

namespace weft::trace {

// The names --weft:counters accepts, and the default list.
WEFT_API const std::vector<std::string>& counter_names_known();
WEFT_API const char* default_counters();  // "cycles,instructions,..."
// Checks a --weft:counters value ("off" or a comma list of known names):
// empty when good, else what is wrong.
WEFT_API std::string check_counter_list(const std::string& list);

// How a counter is opened: perf_event_open(2) by default; tests replace it
// to drive the paths a kernel without hardware counters never takes.
using perf_open_fn = int (*)(perf_event_attr* attr, int pid, int cpu, int group,
                             unsigned long flags);

// The counters of the calling thread. Open them on the thread they count.
class WEFT_API counter_set {
 public:
  counter_set() = default;
  counter_set(const counter_set&) = delete;
  counter_set& operator=(const counter_set&) = delete;
  ~counter_set();

  // Opens what `list` names for the calling thread; what the kernel refuses
  // is recorded in refused() with the reason. `open` null: perf_event_open.
  void open(const std::vector<std::string>& list, perf_open_fn open = nullptr);
  void close();
  // The counts since open(), one per opened() name (0 for one that failed
  // to read).
  std::vector<std::uint64_t> read() const;
  const std::vector<std::string>& opened() const noexcept { return names_; }
  // "name: reason" for each counter not opened.
  const std::vector<std::string>& refused() const noexcept { return refused_; }

 private:
  std::vector<int> fds_;
  std::vector<std::string> names_;
  std::vector<std::string> refused_;
};

// Splits "a,b,c" (or "off": nothing).
WEFT_API std::vector<std::string> split_counter_list(const std::string& list);

}  // namespace weft::trace
