// What a node's trace says about itself: nodeN.json (the metadata: the job,
// the clock, the name tables, the counters, the tracks, how the run ended),
// the name tables behind it, and nodeN.summary.json in summary mode.
// Format: docs/design/trace-format.md.
//
// A run that ends early keeps what its PEs wrote, so the metadata is written
// more than once: at start, again once every PE has begun (the time line's
// clock and the tracks: what a killed run leaves), when a track begins
// later, at a flush that finds new user names, and at the end. Each write
// goes through a temporary file and a rename; the text as last written less
// its ending is kept for the signal handler (ending.cpp), which may not
// allocate to render it.
//
// The file calls (open, write, rename) stay here, not in base/os: they are
// the trace format's own, and a failure is the caller's to report (fatal at
// the run's start and end, quiet on the abort path).
#include <fcntl.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>
#include "session_state.hpp"
#include "weft/base/error.hpp"
#include "weft/base/timer.hpp"

namespace weft::trace {
namespace internal {
namespace {

std::mutex g_names_mutex;
std::map<std::string, name_source> g_name_sources;          // guarded by g_names_mutex
std::vector<std::string> g_user_names;                      // guarded by g_names_mutex
std::unordered_map<std::string, std::uint32_t> g_user_ids;  // guarded by g_names_mutex
std::atomic<std::size_t> g_user_count{0};                   // g_user_names.size()

// The name table a slice's id belongs to, in the summary.
const char* space_of(kind begin) {
  switch (begin) {
    case kind::handler_begin:
      return "handler";
    case kind::entry_begin:
      return "entry";
    case kind::task_begin:
      return "task";
    case kind::region_begin:
      return "user";
    case kind::progress_begin:
      return "progress";
    case kind::lb_begin:
      return "lb";
    default:
      return "flush";
  }
}

std::string host_name() {
  char h[256] = {};
  if (gethostname(h, sizeof h - 1) != 0) return "unknown";
  return h;
}

// The metadata less its ending ("end", "complete", "aborted"): what the
// signal handler completes. The caller holds s.mutex (or is the abort path,
// `failing`). `user_names` is set to the number of user names listed.
std::string metadata_body(session& s, bool failing, std::uint64_t end_tick, std::uint64_t end_mono,
                          std::size_t* user_names) {
  std::string j = "{\n";
  j += "  \"format\": \"weft-trace\", \"version\": " + std::to_string(format_version) + ",\n";
  j += std::string("  \"mode\": \"") + (s.cfg.mode == trace_mode::full ? "full" : "summary") +
       "\", \"sample\": " + std::to_string(std::max<std::uint32_t>(s.cfg.sample, 1)) + ",\n";
  j += "  \"node\": " + std::to_string(s.cfg.node) + ", \"nodes\": " + std::to_string(s.cfg.nodes) +
       ", \"first_pe\": " + std::to_string(s.cfg.first_pe) +
       ", \"pes\": " + std::to_string(s.cfg.pes) +
       ", \"total_pes\": " + std::to_string(s.cfg.pes * s.cfg.nodes) + ",\n";
  j += "  \"host\": " + json_string(host_name()) + ", \"pid\": " + std::to_string(getpid()) +
       ",\n  \"argv\": [";
  for (std::size_t i = 0; i < s.cfg.argv.size(); ++i)
    j += (i ? ", " : "") + json_string(s.cfg.argv[i]);
  j += "],\n";
  char clock[512];
  std::snprintf(clock, sizeof clock,
                "  \"clock\": {\"tsc_base\": %llu, \"ns_per_tick\": %.9g, \"mono_ns_base\": %llu, "
                "\"real_ns_base\": %llu",
                (unsigned long long)s.tsc_base, s.ns_per_tick, (unsigned long long)s.mono_base,
                (unsigned long long)s.real_base);
  j += clock;
  if (end_mono != 0)
    j += ", \"tick_end\": " + std::to_string(end_tick) +
         ", \"mono_ns_end\": " + std::to_string(end_mono);
  j += "},\n  \"names\": {\n";
  std::vector<std::pair<std::string, std::vector<std::pair<std::uint32_t, std::string>>>> tables;
  if (user_names != nullptr) *user_names = 0;
  {
    std::unique_lock<std::mutex> lock(g_names_mutex, std::defer_lock);
    // The abort path must not wait for a lock a stopped thread may hold.
    if (failing ? lock.try_lock() : (lock.lock(), true)) {
      for (auto& [space, source] : g_name_sources)
        if (source) tables.emplace_back(space, source());
      std::vector<std::pair<std::uint32_t, std::string>> user;
      for (std::size_t i = 0; i < g_user_names.size(); ++i)
        user.emplace_back(std::uint32_t(i), g_user_names[i]);
      if (user_names != nullptr) *user_names = user.size();
      tables.emplace_back("user", std::move(user));
    }
  }
  std::vector<std::pair<std::uint32_t, std::string>> counters;
  for (std::size_t i = 0; i < s.counter_names.size(); ++i)
    counters.emplace_back(std::uint32_t(i), s.counter_names[i]);
  tables.emplace_back("counter", std::move(counters));
  for (std::size_t t = 0; t < tables.size(); ++t) {
    j += "    " + json_string(tables[t].first) + ": {";
    bool first = true;
    for (auto& [id, name] : tables[t].second) {
      j += (first ? "" : ", ") + json_string(std::to_string(id)) + ": " + json_string(name);
      first = false;
    }
    j += t + 1 < tables.size() ? "},\n" : "}\n";
  }
  j += "  },\n  \"counters\": {\"requested\": [";
  for (std::size_t i = 0; i < s.cfg.counters.size(); ++i)
    j += (i ? ", " : "") + json_string(s.cfg.counters[i]);
  j += "], \"opened\": [";
  for (std::size_t i = 0; i < s.counter_names.size(); ++i)
    j += (i ? ", " : "") + json_string(s.counter_names[i]);
  j += "], \"note\": " + json_string(s.counter_note) + "},\n  \"tracks\": [";
  bool first = true;
  if (s.cfg.mode == trace_mode::full) {
    for (auto& t : s.tracks) {
      j += std::string(first ? "" : ", ") +
           "{\"file\": " + json_string(t->path.substr(t->path.find_last_of('/') + 1)) +
           ", \"kind\": \"" + (t->what == track_kind::pe ? "pe" : "comm") +
           "\", \"pe\": " + std::to_string(t->pe) + ", \"cpus\": [";
      for (std::size_t i = 0; i < t->cpus.size(); ++i)
        j += (i ? ", " : "") + std::to_string(t->cpus[i]);
      j += "]}";
      first = false;
    }
  }
  j += "],\n";
  if (s.cfg.mode == trace_mode::summary)
    j += "  \"summary_file\": " +
         json_string("node" + std::to_string(s.cfg.node) + ".summary.json") + ",\n";
  return j;
}

}  // namespace

int write_file(const std::string& path, const std::string& text, const char** call) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *call = "open";
    return errno;
  }
  int err = write_all(fd, text.data(), text.size());
  *call = "write";
  ::close(fd);
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    *call = "rename";
  }
  return err;
}

const char* how_name(end_how how) {
  switch (how) {
    case end_how::exit:
      return "exit";
    case end_how::fatal:
      return "fatal";
    case end_how::timeout:
      return "timeout";
    case end_how::signal:
      return "signal";
  }
  return "fatal";
}

// (The contract is in session_state.hpp.)
void write_metadata(session& s, const run_end* end) {
  const bool failing = end != nullptr && end->how != end_how::exit;
  std::uint64_t end_tick = 0, end_mono = 0;
  if (end != nullptr) {
    end_mono = s.end_mono != 0 ? s.end_mono : base::wall_ns();
    const std::uint64_t now = s.end_tsc != 0 ? s.end_tsc : base::cycles();
    end_tick = tick_of(s, now);
  }
  std::size_t user_names = 0;
  std::string body = metadata_body(s, failing, end_tick, end_mono, &user_names);
  std::string text = body;
  if (end != nullptr) {
    text += std::string("  \"end\": {\"how\": \"") + how_name(end->how) +
            "\", \"tick\": " + std::to_string(end->how == end_how::exit ? end_tick : end->tick);
    if (!end->message.empty()) text += ", \"message\": " + json_string(end->message);
    text += "},\n";
  }
  text += std::string("  \"complete\": ") + (end != nullptr && !failing ? "true" : "false") +
          ", \"aborted\": " + (failing ? "true" : "false") + "\n}\n";
  const char* call = nullptr;
  if (int err = write_file(s.meta_path, text, &call); err != 0) {
    if (failing) return;  // already failing; the fatal message matters more
    base::fatal_sys(err, call, "for the trace metadata %s", s.meta_path.c_str());
  }
  if (end != nullptr) return;
  s.tracks_listed.store(s.cfg.mode == trace_mode::full ? s.tracks.size() : 0);
  s.user_names_listed.store(user_names);
  auto& kept = s.signal_meta_all.emplace_back(std::make_unique<std::string>(std::move(body)));
  s.signal_meta.store(kept.get(), std::memory_order_release);
}

bool metadata_stale(const session& s) {
  return (s.cfg.mode == trace_mode::full && s.tracks_listed.load(std::memory_order_relaxed) <
                                                s.track_count.load(std::memory_order_relaxed)) ||
         s.user_names_listed.load(std::memory_order_relaxed) <
             g_user_count.load(std::memory_order_relaxed);
}

// nodeN.summary.json: every PE's histogram at the widest bin any PE needed.
std::string summary_json(session& s) {
  const double k = s.ns_per_tick;
  std::uint64_t width = 1;
  for (auto& t : s.tracks)
    if (t->what == track_kind::pe) width = std::max(width, t->sum.bin_ticks);
  std::string j =
      "{\n  \"format\": \"weft-trace-summary\", \"version\": " + std::to_string(format_version) +
      ", \"node\": " + std::to_string(s.cfg.node) +
      ",\n  \"bin_ns\": " + std::to_string(std::uint64_t(double(width) * k)) + ",\n  \"pes\": [";
  const auto ns = [k](std::uint64_t ticks) {
    return std::to_string(std::uint64_t(double(ticks) * k));
  };
  bool first_pe = true;
  for (auto& t : s.tracks) {
    if (t->what != track_kind::pe) continue;
    const summary_state& m = t->sum;
    // The busy time is an estimate (summary.cpp): it claims no more than the
    // PE's time that was not idle, in all and per bin.
    const std::uint64_t wall = t->last_tick - t->first_tick;
    const std::uint64_t busy_all = std::min(m.busy, wall > m.idle ? wall - m.idle : 0);
    j += std::string(first_pe ? "\n" : ",\n") + "    {\"pe\": " + std::to_string(t->pe) +
         ", \"wall_ns\": " + ns(wall) + ", \"busy_ns\": " + ns(busy_all) +
         ", \"idle_ns\": " + ns(m.idle) + ", \"time_every\": " + std::to_string(m.stride) +
         ",\n     \"bins\": [";
    first_pe = false;
    const std::uint64_t merge = width / m.bin_ticks;  // a power of two
    std::size_t used = 0;
    for (std::size_t b = 0; b < max_bins; ++b)
      if (m.bins[2 * b] != 0 || m.bins[2 * b + 1] != 0) used = b + 1;
    for (std::size_t b = 0; b * merge < used; ++b) {
      std::uint64_t busy = 0, idle = 0;
      for (std::uint64_t i = 0; i < merge && b * merge + i < max_bins; ++i) {
        busy += m.bins[2 * (b * merge + i)];
        idle += m.bins[2 * (b * merge + i) + 1];
      }
      busy = std::min(busy, width > idle ? width - idle : 0);
      j += std::string(b ? ", " : "") + "[" + ns(busy) + ", " + ns(idle) + "]";
    }
    j += "],\n     \"names\": [";
    bool first = true;
    const std::map<std::uint64_t, name_stat> sorted = m.sorted();
    for (auto& [key, st] : sorted) {
      j += std::string(first ? "" : ",\n                ") + "{\"space\": \"" +
           space_of(kind(key >> 32)) + "\", \"id\": " + std::to_string(std::uint32_t(key)) +
           ", \"count\": " + std::to_string(st.count) + ", \"timed\": " + std::to_string(st.timed) +
           ", \"total_ns\": " + ns(st.total) + ", \"self_ns\": " + ns(st.self) +
           ", \"max_ns\": " + ns(st.max) + "}";
      first = false;
    }
    j += "],\n     \"counters\": {";
    for (std::size_t i = 0; i < t->final_counters.size() && i < s.counter_names.size(); ++i)
      j += std::string(i ? ", " : "") + json_string(s.counter_names[i]) + ": " +
           std::to_string(t->final_counters[i]);
    j += "}}";
  }
  return j + "\n  ]\n}\n";
}

}  // namespace internal

using namespace internal;

void set_name_source(const std::string& space, name_source source) {
  std::lock_guard<std::mutex> lock(g_names_mutex);
  g_name_sources[space] = std::move(source);
}

namespace detail {

std::uint32_t intern_user_name(std::string_view name) {
  std::lock_guard<std::mutex> lock(g_names_mutex);
  auto [it, added] = g_user_ids.try_emplace(std::string(name), std::uint32_t(g_user_names.size()));
  if (added) {
    g_user_names.emplace_back(name);
    g_user_count.store(g_user_names.size(), std::memory_order_relaxed);
  }
  return it->second;
}

}  // namespace detail

}  // namespace weft::trace
