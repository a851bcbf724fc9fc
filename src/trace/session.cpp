// A node's trace session, from start_session to end_session: the trace
// directory, the time line's clock, and the run's normal end (the tracks
// are track.cpp's, the files that describe the node metadata.cpp's, the
// ends that are not normal ending.cpp's; session_state.hpp maps them).
// Format: docs/design/trace-format.md.
//
// Every track (a PE, or a node's comm thread) owns a pool of buffers and
// its file; its thread alone appends, so recording takes no lock and
// touches no line another thread writes. A full buffer goes to the
// session's writer thread (started here, in full mode), which writes it to
// the track's file while the track fills the next buffer of its pool; with
// none free the track drops events and counts them (track.cpp). The
// session's mutex guards only the list of tracks, taken when a track begins
// or ends and when the metadata is written. After a fatal error the failing
// thread writes out the other tracks' buffers too: each buffer's count is
// published with a release store after its record, and a track's `file`
// hold keeps the writer, the owner and the abort path from writing the same
// file at once.
//
// A run that ends early keeps what its PEs wrote. The metadata is written at
// start, again once every PE has begun (the time line's clock and the
// tracks: what a killed run leaves), when a track begins later, at a flush
// that finds new user names, and at the end. A fatal error and
// --weft:timeout write out every buffer from the failing thread
// (abort_session); SIGTERM and SIGINT do the same from a handler that uses
// only async-signal-safe calls (write, rename, atomics): the metadata it
// writes is rendered beforehand. Each track's file ends with an end record
// saying how the run ended; a file without one was cut off (SIGKILL).
//
// The directory calls (mkdir, stat, access, opendir, unlink) stay here, not
// in base/os: they are the trace directory's own checks and clean-up.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include "session_state.hpp"
#include "weft/base/error.hpp"
#include "weft/base/timer.hpp"

namespace weft::trace {
namespace detail {
std::atomic<std::uint32_t> g_sample_every{1};
constinit thread_local std::uint32_t t_sample_left = 0;
}  // namespace detail

namespace internal {

std::atomic<session*> g_session{nullptr};

void take_base(session& s) {
  timespec rt{};
  clock_gettime(CLOCK_REALTIME, &rt);
  s.mono_base = base::wall_ns();
  s.tsc_base = base::cycles();
  s.real_base = std::uint64_t(rt.tv_sec) * 1000000000ull + std::uint64_t(rt.tv_nsec);
}

std::string node_file(const session& s, const std::string& rest) {
  return s.cfg.dir + "/node" + std::to_string(s.cfg.node) + rest;
}

namespace {
// A number from the environment variable `name`, lo..hi, or `dflt` when it
// is not set; anything else is a usage error naming the accepted forms.
unsigned env_number(const char* name, unsigned lo, unsigned hi, unsigned dflt, const char* what) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return dflt;
  char* end = nullptr;
  errno = 0;
  const unsigned long n = std::strtoul(v, &end, 10);
  if (*end != '\0' || errno != 0 || v[0] == '-' || n < lo || n > hi)
    base::usage_error("%s=%s: expected %s, a whole number %u..%u", name, v, what, lo, hi);
  return unsigned(n);
}

// A directory reused from a run of more nodes keeps their files; no node of
// this job writes them, so node 0 removes them (the tools would take them
// for part of this run).
void remove_stale_nodes(const std::string& dir, int nodes) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(d)) {
    int n = -1, used = 0;
    if (std::sscanf(e->d_name, "node%d.%n", &n, &used) == 1 && used > 0 && n >= nodes)
      stale.push_back(dir + "/" + e->d_name);
  }
  ::closedir(d);
  for (const auto& f : stale) ::unlink(f.c_str());
}

void remove_own_files(const std::string& dir, int node) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  const std::string prefix = "node" + std::to_string(node) + ".";
  std::vector<std::string> own;
  while (dirent* e = ::readdir(d))
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0)
      own.push_back(dir + "/" + e->d_name);
  ::closedir(d);
  for (const auto& f : own) ::unlink(f.c_str());
}
}  // namespace
}  // namespace internal

using namespace internal;

void start_session(const session_config& config) {
  if (g_session.load() != nullptr) base::fatal("trace: a session already runs in this process");
  auto* s = new session;
  s->cfg = config;
  s->traces = !config.dir.empty();
  s->ns_per_tick = base::ns_per_cycle();
  if (s->traces) {
    // mkdir -p, so DIR may name a new path; each node creates what it needs.
    std::string path;
    for (std::size_t i = 0; i <= config.dir.size(); ++i) {
      if (i < config.dir.size() && config.dir[i] != '/') continue;
      path = config.dir.substr(0, i);
      if (path.empty()) continue;
      // The option first, as a usage error would name it (tests/cli pins
      // the start), then the failed call in the checked helper's shape.
      if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
        const int err = errno;
        base::fatal("--weft:trace=%s: cannot create the directory %s: mkdir failed: %s (errno %d)",
                    config.dir.c_str(), path.c_str(), base::errno_text(err).c_str(), err);
      }
    }
    struct stat st {};
    if (::stat(config.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      base::fatal("--weft:trace=%s: not a directory", config.dir.c_str());
    if (::access(config.dir.c_str(), W_OK) != 0) {
      const int err = errno;
      base::fatal("--weft:trace=%s: the directory is not writable: access failed: %s (errno %d)",
                  config.dir.c_str(), base::errno_text(err).c_str(), err);
    }
    if (config.node == 0) remove_stale_nodes(config.dir, config.nodes);
    // This node's files of an earlier run (more PEs, a comm thread): a
    // reader of a run that ends early takes every nodeN.*.events it finds.
    remove_own_files(config.dir, config.node);
    const std::size_t bytes = std::max<std::size_t>(config.buffer_bytes, 64 * sizeof(record));
    s->cap = std::uint32_t(std::min<std::size_t>(bytes / sizeof(record), UINT32_MAX / 2));
    s->pool = config.pool_buffers != 0 ? std::clamp(config.pool_buffers, 2u, 64u) : 3;
    s->slow_writer_ms =
        env_number("WEFT_TRACE_TEST_SLOW_WRITER", 0, 10000, 0, "milliseconds per buffer written");
  }
  if (!config.counters.empty()) {
    // The process's first perf event costs the kernel ~10 ms to set up
    // (measured on the reference VM): paid here, before the time line
    // starts, not by the first PE inside it.
    counter_set warm;
    warm.open({"task-clock"});
  }
  take_base(*s);
  if (s->traces) {
    s->meta_path = node_file(*s, ".json");
    s->signal_tmp_path = node_file(*s, ".json.signal.tmp");
    s->nslots = std::size_t(std::max(config.pes, 1)) + 4;  // the PEs, a comm thread, spare
    s->slots = std::make_unique<std::atomic<track*>[]>(s->nslots);
    for (std::size_t i = 0; i < s->nslots; ++i) s->slots[i].store(nullptr);
  }
  g_session.store(s, std::memory_order_release);
  if (s->traces) {
    {
      std::lock_guard<std::mutex> lock(s->mutex);
      write_metadata(*s, nullptr);
    }
    install_signal_handlers();
    detail::g_sample_every.store(std::max<std::uint32_t>(config.sample, 1),
                                 std::memory_order_relaxed);
    if (s->cfg.mode == trace_mode::full) s->writer = std::thread(writer_main, std::ref(*s));
    detail::g_on.store(true, std::memory_order_release);
  }
}

bool session_traces() {
  session* s = g_session.load(std::memory_order_acquire);
  return s != nullptr && s->traces;
}

std::vector<std::string> session_counter_names() {
  session* s = g_session.load(std::memory_order_acquire);
  if (s == nullptr) return {};
  std::lock_guard<std::mutex> lock(s->mutex);
  return s->counter_names;
}

std::string session_counter_note() {
  session* s = g_session.load(std::memory_order_acquire);
  if (s == nullptr) return {};
  std::lock_guard<std::mutex> lock(s->mutex);
  return s->counter_note;
}

std::uint64_t dropped_events() {
  session* s = g_session.load(std::memory_order_acquire);
  if (s == nullptr) return 0;
  std::lock_guard<std::mutex> lock(s->mutex);
  std::uint64_t n = 0;
  for (const auto& t : s->tracks)
    n += t->dropped_total.load(std::memory_order_relaxed) +
         t->dropped.load(std::memory_order_relaxed);
  return n;
}

void pes_ended() {
  session* s = g_session.load(std::memory_order_acquire);
  if (s == nullptr || s->end_ready.load(std::memory_order_acquire)) return;
  s->end_tsc = base::cycles();
  s->end_mono = base::wall_ns();
}

void end_session() {
  session* s = g_session.load(std::memory_order_acquire);
  if (s == nullptr) return;
  detail::g_on.store(false, std::memory_order_release);
  if (s->writer.joinable()) {
    // Every track has ended, its buffers written: nothing waits.
    s->writer_stop.store(true, std::memory_order_release);
    s->wake.fetch_add(1, std::memory_order_release);
    s->wake.notify_one();
    s->writer.join();
  }
  if (s->traces) {
    remove_signal_handlers();
    std::lock_guard<std::mutex> lock(s->mutex);
    if (s->cfg.mode == trace_mode::summary) {
      const std::string path = node_file(*s, ".summary.json");
      const char* call = nullptr;
      if (int err = write_file(path, summary_json(*s), &call); err != 0)
        base::fatal_sys(err, call, "for the trace summary %s", path.c_str());
    }
    const run_end end{end_how::exit, "", 0};
    write_metadata(*s, &end);
  }
  g_session.store(nullptr, std::memory_order_release);
  delete s;
}

}  // namespace weft::trace
