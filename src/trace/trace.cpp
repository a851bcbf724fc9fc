// The trace layer: per-thread event buffers, their files, the summary mode
// and the node's metadata (format: docs/design/trace-format.md).
//
// Every track (a PE, or a node's comm thread) owns its buffer and its file;
// its thread alone appends and writes out, so recording takes no lock and
// touches no line another thread writes. The session's mutex guards only
// the list of tracks, taken when a track begins or ends and when the
// metadata is written. After a fatal error the failing thread writes out
// the other tracks' buffers too: each buffer's count is published with a
// release store after its record, and a track's `writing` flag keeps the
// owner and the abort path from writing the same buffer at once.
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
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>
#include "weft/base/error.hpp"
#include "weft/base/json.hpp"
#include "weft/base/timer.hpp"
#include "weft/trace/counters.hpp"
#include "weft/trace/hooks.hpp"
#include "weft/trace/session.hpp"

namespace weft::trace {

namespace detail {
std::atomic<bool> g_on{false};
constinit thread_local fast_path t_fast;
}

namespace {

using record = detail::raw_record;

constexpr char magic[8] = {'W', 'E', 'F', 'T', 'T', 'R', 'C', 0};
// 2: the end record (kind 24), the metadata's "end", tracks listed while
// the run goes on (docs/design/trace-format.md says what changed from 1).
constexpr std::uint32_t format_version = 2;

// Summary mode: the histogram starts with 1 ms bins and doubles their width
// whenever the run outgrows max_bins, so a run of any length keeps between
// max_bins / 2 and max_bins of them.
constexpr std::size_t max_bins = 1024;

struct name_stat {
  std::uint64_t count = 0, total = 0, self = 0, max = 0;
};
struct open_slice {
  kind k;
  std::uint32_t id;
  std::uint64_t t0;
  std::uint64_t nested = 0;  // time of slices that ran inside it
};

bool is_busy(kind k) {
  return k == kind::handler_begin || k == kind::entry_begin || k == kind::task_begin ||
         k == kind::region_begin;
}
// Slices open with a kind of detail::begin_kinds and close with the next
// kind (the format pairs them so).
bool is_begin(kind k) {
  return detail::begin_kinds >> std::uint32_t(k) & 1u;
}
bool is_end(kind k) {
  return k != kind{} && (detail::begin_kinds >> (std::uint32_t(k) - 1) & 1u);
}
kind begin_of(kind end) {
  return kind(std::uint8_t(end) - 1);
}
// The name table a slice's id belongs to, in the summary.
const char* space_of(kind begin) {
  switch (begin) {
    case kind::handler_begin: return "handler";
    case kind::entry_begin: return "entry";
    case kind::task_begin: return "task";
    case kind::region_begin: return "user";
    case kind::progress_begin: return "progress";
    case kind::lb_begin: return "lb";
    default: return "flush";
  }
}

struct track {
  track_kind what = track_kind::pe;
  int pe = -1, local = -1;
  // Full mode.
  std::unique_ptr<record[]> buf;
  std::uint32_t cap = 0;
  // The owner thread's fast path: its `next` is where the next record goes.
  detail::fast_path* fp = nullptr;
  int fd = -1;
  std::string path;
  bool failed = false;               // a write failed: the track records no more
  std::atomic<bool> writing{false};  // its buffer is being written out
  // The tick of the last record in the file (its writer alone stores it):
  // an end record written by another thread is not stamped before it.
  std::atomic<std::uint64_t> written_tick{0};
  // Both modes.
  counter_set counters;
  std::vector<std::uint64_t> final_counters;
  std::uint64_t first_tick = 0, last_tick = 0;
  // Summary mode.
  std::vector<open_slice> stack;
  std::unordered_map<std::uint64_t, name_stat> names;  // kind << 32 | id
  int busy_depth = 0;
  std::uint64_t busy_t0 = 0, idle_t0 = 0, busy = 0, idle = 0;
  std::vector<std::uint64_t> bins;  // busy, idle interleaved, in ticks
  std::uint64_t bin_ticks = 1;
};

struct session {
  session_config cfg;
  bool traces = false;
  std::uint64_t tsc_base = 0;
  std::uint64_t mono_base = 0, real_base = 0;
  double ns_per_tick = 1.0;
  std::uint32_t cap = 0;  // records per buffer
  std::mutex mutex;       // guards tracks, the counter note, the metadata file
  std::vector<std::unique_ptr<track>> tracks;
  std::vector<std::string> counter_names;
  std::string counter_note;
  bool counters_known = false;
  std::atomic<bool> aborted{false};
  std::uint64_t end_tsc = 0, end_mono = 0;  // pes_ended
  // What the metadata on disk lists, so that a track or a user name that
  // came after it has it written again (guarded by mutex; read without it
  // to skip the lock when nothing changed).
  std::atomic<std::size_t> tracks_listed{0}, user_names_listed{0};
  std::atomic<std::size_t> track_count{0};  // tracks.size()
  // For the signal handler, which may use no lock and no allocation: the
  // tracks in slots that never move, and the metadata as last written less
  // its ending (the handler adds one). Retired texts stay until the end.
  std::unique_ptr<std::atomic<track*>[]> slots;
  std::size_t nslots = 0;
  std::atomic<const std::string*> signal_meta{nullptr};
  std::vector<std::unique_ptr<std::string>> signal_meta_all;  // guarded by mutex
  std::string meta_path, signal_tmp_path;
  // The time line starts when the last PE has begun its track: PE threads
  // take milliseconds to start on a loaded machine, and a PE that did not
  // exist yet was neither busy nor idle. Until then tracks wait.
  std::atomic<int> pes_begun{0};
  std::atomic<bool> base_ready{false};
  // Likewise the end, when the last PE ends its track.
  std::atomic<int> pes_ending{0};
  std::atomic<bool> end_ready{false};
};

// Ticks since the time line began (0 for a time stamp taken before it).
std::uint64_t tick_of(const session& s, std::uint64_t tsc) {
  return tsc > s.tsc_base ? tsc - s.tsc_base : 0;
}

void take_base(session& s) {
  timespec rt{};
  clock_gettime(CLOCK_REALTIME, &rt);
  s.mono_base = base::wall_ns();
  s.tsc_base = base::cycles();
  s.real_base = std::uint64_t(rt.tv_sec) * 1000000000ull + std::uint64_t(rt.tv_nsec);
}

std::atomic<session*> g_session{nullptr};
// The thread's track while it records (null when the session only counts).
thread_local track* t_track = nullptr;
// The thread's track in any case (its counters serve --weft:stats).
thread_local track* t_own = nullptr;

std::mutex g_names_mutex;
std::map<std::string, name_source> g_name_sources;           // guarded by g_names_mutex
std::vector<std::string> g_user_names;                        // guarded by g_names_mutex
std::unordered_map<std::string, std::uint32_t> g_user_ids;    // guarded by g_names_mutex
std::atomic<std::size_t> g_user_count{0};                     // g_user_names.size()

// --- writing -------------------------------------------------------------

// Writes all of [p, p + n) or returns the errno that stopped it.
int write_all(int fd, const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    c += w;
    n -= std::size_t(w);
  }
  return 0;
}

// Writes the first n records of the track's buffer to its file. Returns
// false (and stops the track, once said) when the file cannot take them.
bool write_records(track& t, std::uint32_t n) {
  if (t.fd < 0 || t.failed) return false;
  if (int err = write_all(t.fd, t.buf.get(), std::size_t(n) * sizeof(record)); err != 0) {
    t.failed = true;
    base::warn("trace: writing %s failed: %s; this track records no more", t.path.c_str(),
               std::strerror(err));
    return false;
  }
  if (n > 0) t.written_tick.store(t.buf[n - 1].w >> 8, std::memory_order_relaxed);
  return true;
}

// Appends the track's end record to its file, at `tick` or after the last
// record written. The caller holds the file (the owner at its end, or the
// `writing` flag). Async-signal-safe: write(2) alone.
void write_end_record(track& t, end_how how, int signal, std::uint64_t tick) {
  tick = std::max(tick, t.written_tick.load(std::memory_order_relaxed));
  const record r{tick << 8 | std::uint64_t(kind::end), std::uint32_t(how), std::uint32_t(signal),
                 0, 0};
  (void)write_all(t.fd, &r, sizeof r);
}

std::string json_string(const std::string& s) {
  return base::json_quote(s);
}

std::string node_file(const session& s, const std::string& rest) {
  return s.cfg.dir + "/node" + std::to_string(s.cfg.node) + rest;
}

// Writes `text` to `path` through a temporary file and a rename, so a
// reader never sees half of it. Returns the errno of a failure.
int write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  int err = write_all(fd, text.data(), text.size());
  ::close(fd);
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  return err;
}

std::string host_name() {
  char h[256] = {};
  if (gethostname(h, sizeof h - 1) != 0) return "unknown";
  return h;
}

const char* how_name(end_how how) {
  switch (how) {
    case end_how::exit: return "exit";
    case end_how::fatal: return "fatal";
    case end_how::timeout: return "timeout";
    case end_how::signal: return "signal";
  }
  return "fatal";
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: return "signal";
  }
}

// How the run ended: the metadata's "end".
struct run_end {
  end_how how = end_how::exit;
  std::string message;
  std::uint64_t tick = 0;
};

// The metadata less its ending ("end", "complete", "aborted"): what the
// signal handler completes. The caller holds s.mutex (or is the abort path,
// `failing`). `user_names` is set to the number of user names listed.
std::string metadata_body(session& s, bool failing, std::uint64_t end_tick,
                          std::uint64_t end_mono, std::size_t* user_names) {
  std::string j = "{\n";
  j += "  \"format\": \"weft-trace\", \"version\": " + std::to_string(format_version) + ",\n";
  j += std::string("  \"mode\": \"") + (s.cfg.mode == trace_mode::full ? "full" : "summary") +
       "\",\n";
  j += "  \"node\": " + std::to_string(s.cfg.node) + ", \"nodes\": " +
       std::to_string(s.cfg.nodes) + ", \"first_pe\": " + std::to_string(s.cfg.first_pe) +
       ", \"pes\": " + std::to_string(s.cfg.pes) + ", \"total_pes\": " +
       std::to_string(s.cfg.pes * s.cfg.nodes) + ",\n";
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
    j += ", \"tick_end\": " + std::to_string(end_tick) + ", \"mono_ns_end\": " +
         std::to_string(end_mono);
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
      j += std::string(first ? "" : ", ") + "{\"file\": " +
           json_string(t->path.substr(t->path.find_last_of('/') + 1)) + ", \"kind\": \"" +
           (t->what == track_kind::pe ? "pe" : "comm") + "\", \"pe\": " + std::to_string(t->pe) +
           "}";
      first = false;
    }
  }
  j += "],\n";
  if (s.cfg.mode == trace_mode::summary)
    j += "  \"summary_file\": " + json_string("node" + std::to_string(s.cfg.node) +
                                              ".summary.json") + ",\n";
  return j;
}

// Writes the metadata: while the run goes on (`end` null), or at its end
// (exit: complete; otherwise aborted). The caller holds s.mutex, or is the
// abort path (`end->how` other than exit).
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
  if (int err = write_file(s.meta_path, text); err != 0) {
    if (failing) return;  // already failing; the fatal message matters more
    base::fatal("trace: cannot write %s: %s", s.meta_path.c_str(), std::strerror(err));
  }
  if (end != nullptr) return;
  s.tracks_listed.store(s.cfg.mode == trace_mode::full ? s.tracks.size() : 0);
  s.user_names_listed.store(user_names);
  auto& kept = s.signal_meta_all.emplace_back(std::make_unique<std::string>(std::move(body)));
  s.signal_meta.store(kept.get(), std::memory_order_release);
}

// Whether the metadata on disk lacks a track or a user name.
bool metadata_stale(const session& s) {
  return (s.cfg.mode == trace_mode::full &&
          s.tracks_listed.load(std::memory_order_relaxed) <
              s.track_count.load(std::memory_order_relaxed)) ||
         s.user_names_listed.load(std::memory_order_relaxed) <
             g_user_count.load(std::memory_order_relaxed);
}

// --- summary mode --------------------------------------------------------

void add_to_bins(track& t, int which, std::uint64_t t0, std::uint64_t t1) {
  if (t1 <= t0) return;
  while (t1 >= t.bin_ticks * max_bins) {
    // Halve the resolution: pairs of bins become one.
    for (std::size_t i = 0; i < max_bins / 2; ++i) {
      t.bins[2 * i] = t.bins[4 * i] + t.bins[4 * i + 2];
      t.bins[2 * i + 1] = t.bins[4 * i + 1] + t.bins[4 * i + 3];
    }
    std::fill(t.bins.begin() + max_bins, t.bins.end(), 0);
    t.bin_ticks *= 2;
  }
  while (t0 < t1) {
    const std::uint64_t b = t0 / t.bin_ticks;
    const std::uint64_t edge = (b + 1) * t.bin_ticks;
    const std::uint64_t end = std::min(edge, t1);
    t.bins[2 * b + std::uint64_t(which)] += end - t0;
    t0 = end;
  }
}

void summarize(track& t, kind k, std::uint64_t tick, std::uint32_t a) {
  t.last_tick = tick;
  if (k == kind::idle_begin) {
    t.idle_t0 = tick;
    return;
  }
  if (k == kind::idle_end) {
    t.idle += tick - t.idle_t0;
    add_to_bins(t, 1, t.idle_t0, tick);
    return;
  }
  if (is_begin(k)) {
    if (is_busy(k) && t.busy_depth++ == 0) t.busy_t0 = tick;
    t.stack.push_back({k, a, tick, 0});
    return;
  }
  if (!is_end(k) || t.stack.empty()) return;
  const kind b = begin_of(k);
  // An end closes the innermost open slice of its kind (the layers nest
  // them; this only keeps a stray end from corrupting the totals).
  std::size_t at = t.stack.size();
  while (at > 0 && t.stack[at - 1].k != b) --at;
  if (at == 0) return;
  while (t.stack.size() >= at) {
    open_slice s = t.stack.back();
    t.stack.pop_back();
    const std::uint64_t dur = tick - s.t0;
    name_stat& st = t.names[std::uint64_t(s.k) << 32 | s.id];
    ++st.count;
    st.total += dur;
    st.self += dur > s.nested ? dur - s.nested : 0;
    st.max = std::max(st.max, dur);
    if (!t.stack.empty()) t.stack.back().nested += dur;
    if (is_busy(s.k) && --t.busy_depth == 0) {
      t.busy += tick - t.busy_t0;
      add_to_bins(t, 0, t.busy_t0, tick);
    }
  }
}

// --- recording -------------------------------------------------------------

void flush(track& t, std::uint64_t now);

// Records in the buffer (any thread: the abort path reads another's).
std::uint32_t count(const track& t, std::memory_order order = std::memory_order_relaxed) {
  return std::uint32_t(std::atomic_ref<record*>(t.fp->next).load(order) - t.buf.get());
}
void set_count(track& t, std::uint32_t n) {
  std::atomic_ref<record*>(t.fp->next).store(t.buf.get() + n, std::memory_order_release);
}

inline void put(track& t, kind k, std::uint64_t now, std::uint32_t a, std::uint32_t b,
                std::uint32_t c, std::uint32_t d) {
  const session& s = *g_session.load(std::memory_order_relaxed);
  std::uint64_t tick = tick_of(s, now);
  if (s.cfg.mode == trace_mode::summary) {
    summarize(t, k, tick, a);
    return;
  }
  if (t.failed) return;
  // A track's records never go back in time: callers that stamp two records
  // with one `now` (idle_end then a begin) may see the first one fill the
  // buffer, and the flush's own records come after `now`.
  if (tick < t.last_tick) tick = t.last_tick;
  const std::uint32_t i = count(t);
  t.buf[i] = {tick << 8 | std::uint64_t(k), a, b, c, d};
  set_count(t, i + 1);
  t.last_tick = tick;
  // Room stays for what a flush records into the full buffer (flush_begin);
  // the inline path stops at the same mark (fast_path::limit).
  if (i + 2 >= t.cap) flush(t, now);
}

void put_counters(track& t, std::uint64_t now) {
  const std::vector<std::uint64_t> v = t.counters.read();
  for (std::size_t i = 0; i < v.size(); ++i)
    put(t, kind::counter, now, std::uint32_t(i), 0, std::uint32_t(v[i]),
        std::uint32_t(v[i] >> 32));
}

// Writes the full buffer out; the time it takes shows on the track as a
// flush slice (overhead, not the program's).
void flush(track& t, std::uint64_t now) {
  session& s = *g_session.load(std::memory_order_relaxed);
  std::uint32_t n = count(t);
  const std::uint64_t tick = tick_of(s, now);
  t.buf[n] = {tick << 8 | std::uint64_t(kind::flush_begin), 0, 0, 0, 0};
  set_count(t, ++n);
  // After an abort the failing thread owns every buffer: this track stops.
  if (t.writing.exchange(true, std::memory_order_acquire)) {
    t.failed = true;
    t.fp->limit = t.fp->next;  // the inline path stops too
    return;
  }
  write_records(t, n);
  set_count(t, 0);
  t.writing.store(false, std::memory_order_release);
  if (t.failed) {
    t.fp->limit = t.fp->next;
    return;
  }
  // User names interned since the metadata was written: a run killed later
  // has them named (rare: most are interned once, early).
  if (metadata_stale(s)) {
    std::unique_lock<std::mutex> lock(s.mutex, std::try_to_lock);
    if (lock.owns_lock() && metadata_stale(s)) write_metadata(s, nullptr);
  }
  put(t, kind::flush_end, base::cycles(), n, 0, 0, 0);
  put_counters(t, base::cycles());
}

inline void append(track& t, kind k, std::uint64_t now, std::uint32_t a, std::uint32_t b,
                   std::uint32_t c, std::uint32_t d) {
  if (t.fp->idle_open && is_begin(k)) {
    t.fp->idle_open = false;
    put(t, kind::idle_end, now, 0, 0, 0, 0);
  }
  put(t, k, now, a, b, c, d);
}

std::string counter_note(const std::vector<std::string>& refused) {
  std::string note;
  for (const auto& r : refused) note += (note.empty() ? "" : "; ") + r;
  return note;
}

// --- SIGTERM and SIGINT ------------------------------------------------------

struct sigaction g_old_actions[2];
bool g_installed[2] = {false, false};
constexpr int g_signals[2] = {SIGTERM, SIGINT};
std::atomic<bool> g_in_signal{false};

// Decimal digits of v at p; returns the end. Async-signal-safe.
char* put_u64(char* p, std::uint64_t v) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = char('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0) *p++ = digits[--n];
  return p;
}
char* put_text(char* p, const char* text) {
  while (*text != '\0') *p++ = *text++;
  return p;
}

// After an abort, a timeout or a signal: writes out what every track's
// buffer has published and the track's end record. Async-signal-safe: the
// tracks are in slots, the counts and `writing` flags lock-free atomics.
// A track whose `writing` another thread holds is left alone: its owner is
// writing it out (or has ended it, its file complete).
void write_buffers_at_end(session& s, end_how how, int sig, std::uint64_t tick) {
  if (s.cfg.mode != trace_mode::full) return;
  for (std::size_t i = 0; i < s.nslots; ++i) {
    track* t = s.slots[i].load(std::memory_order_acquire);
    if (t == nullptr || t->writing.exchange(true, std::memory_order_acquire)) continue;
    // Holding `writing`, this thread owns the file and the published part
    // of the buffer; the owner, if it still runs, stops at its next flush.
    if (t->fd < 0) continue;
    const std::uint32_t n = count(*t, std::memory_order_acquire);
    if (write_all(t->fd, t->buf.get(), std::size_t(n) * sizeof(record)) != 0) continue;
    if (n > 0) t->written_tick.store(t->buf[n - 1].w >> 8, std::memory_order_relaxed);
    write_end_record(*t, how, sig, tick);
  }
}

// The metadata as last written with `tail` for its ending, without a lock
// or an allocation (async-signal-safe), through its own temporary file.
void write_prerendered_metadata(session& s, const char* tail, std::size_t n) {
  const std::string* body = s.signal_meta.load(std::memory_order_acquire);
  if (body == nullptr) return;
  const int fd = ::open(s.signal_tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const bool ok = write_all(fd, body->data(), body->size()) == 0 && write_all(fd, tail, n) == 0;
  ::close(fd);
  if (ok) ::rename(s.signal_tmp_path.c_str(), s.meta_path.c_str());
}

// Writes out every track's buffer and end record and the metadata, then the
// signal takes its default action (SA_RESETHAND put it back; a second signal
// meanwhile ends the process at once). Only async-signal-safe calls: the
// buffers' counts and the `writing` flags are lock-free atomics, files are
// written with open/write/rename, the metadata's body was rendered before.
void on_end_signal(int sig) {
  const int saved_errno = errno;
  g_in_signal.store(true);
  session* s = g_session.load(std::memory_order_acquire);
  if (s != nullptr && s->traces && !s->aborted.exchange(true)) {
    const std::uint64_t tick = tick_of(*s, base::cycles());
    write_buffers_at_end(*s, end_how::signal, sig, tick);
    char tail[256];
    char* p = put_text(tail, "  \"end\": {\"how\": \"signal\", \"tick\": ");
    p = put_u64(p, tick);
    p = put_text(p, ", \"signal\": ");
    p = put_u64(p, std::uint64_t(sig));
    p = put_text(p, ", \"message\": \"");
    p = put_text(p, signal_name(sig));
    p = put_text(p, "\"},\n  \"complete\": false, \"aborted\": true\n}\n");
    write_prerendered_metadata(*s, tail, std::size_t(p - tail));
  }
  errno = saved_errno;
  ::raise(sig);
}

// Handles SIGTERM and SIGINT where nobody else does (the program, MPI).
void install_signal_handlers() {
  for (int i = 0; i < 2; ++i) {
    struct sigaction old{};
    if (::sigaction(g_signals[i], nullptr, &old) != 0) continue;
    if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) continue;
    struct sigaction sa{};
    sa.sa_handler = on_end_signal;
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (::sigaction(g_signals[i], &sa, &g_old_actions[i]) == 0) g_installed[i] = true;
  }
}

void remove_signal_handlers() {
  for (int i = 0; i < 2; ++i) {
    if (!g_installed[i]) continue;
    g_installed[i] = false;
    struct sigaction now{};
    if (::sigaction(g_signals[i], nullptr, &now) == 0 && (now.sa_flags & SA_SIGINFO) == 0 &&
        now.sa_handler == on_end_signal)
      ::sigaction(g_signals[i], &g_old_actions[i], nullptr);
  }
  // A handler already running ends the process: the session stays for it.
  if (g_in_signal.load()) {
    for (;;) ::pause();
  }
}

}  // namespace

// --- hooks -------------------------------------------------------------------

namespace detail {

void record(kind k, std::uint32_t a, std::uint32_t b, std::uint32_t c, std::uint32_t d) noexcept {
  track* t = t_track;
  if (t == nullptr) return;
  // The summary counts slices: an instant costs it nothing, not even the time.
  if (t->fp->next == nullptr && !is_begin(k) && !is_end(k)) return;
  append(*t, k, base::cycles(), a, b, c, d);
}

void idle_enter_slow() noexcept {
  track* t = t_track;
  if (t == nullptr || t_fast.idle_open) return;
  put(*t, kind::idle_begin, base::cycles(), 0, 0, 0, 0);
  t_fast.idle_open = true;
}

void idle_leave_slow() noexcept {
  track* t = t_track;
  if (t == nullptr || !t_fast.idle_open) return;
  t_fast.idle_open = false;
  put(*t, kind::idle_end, base::cycles(), 0, 0, 0, 0);
}

void record_progress(std::uint64_t t0, std::uint32_t moved) noexcept {
  track* t = t_track;
  if (t == nullptr || moved == 0) return;
  append(*t, kind::progress_begin, t0, 0, 0, 0, 0);
  append(*t, kind::progress_end, base::cycles(), moved, 0, 0, 0);
}

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

// --- the session -------------------------------------------------------------

void set_name_source(const std::string& space, name_source source) {
  std::lock_guard<std::mutex> lock(g_names_mutex);
  g_name_sources[space] = std::move(source);
}

namespace {
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
      if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
        base::fatal("--weft:trace=%s: cannot create the directory %s: %s", config.dir.c_str(),
                    path.c_str(), std::strerror(errno));
    }
    struct stat st{};
    if (::stat(config.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      base::fatal("--weft:trace=%s: not a directory", config.dir.c_str());
    if (::access(config.dir.c_str(), W_OK) != 0)
      base::fatal("--weft:trace=%s: the directory is not writable: %s", config.dir.c_str(),
                  std::strerror(errno));
    if (config.node == 0) remove_stale_nodes(config.dir, config.nodes);
    // This node's files of an earlier run (more PEs, a comm thread): a
    // reader of a run that ends early takes every nodeN.*.events it finds.
    remove_own_files(config.dir, config.node);
    const std::size_t bytes = std::max<std::size_t>(config.buffer_bytes, 64 * sizeof(record));
    s->cap = std::uint32_t(std::min<std::size_t>(bytes / sizeof(record), UINT32_MAX / 2));
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
    detail::g_on.store(true, std::memory_order_release);
  }
}

bool session_traces() {
  session* s = g_session.load(std::memory_order_acquire);
  return s != nullptr && s->traces;
}

void begin_track(track_kind what, int pe, int local) {
  session* s = g_session.load(std::memory_order_acquire);
  if (s == nullptr || t_track != nullptr) return;
  auto t = std::make_unique<track>();
  t->what = what;
  t->pe = pe;
  t->local = local;
  if (what == track_kind::pe && !s->cfg.counters.empty()) {
    t->counters.open(s->cfg.counters, s->cfg.perf_open);
    std::lock_guard<std::mutex> lock(s->mutex);
    if (!s->counters_known) {
      s->counters_known = true;
      s->counter_names = t->counters.opened();
      s->counter_note = counter_note(t->counters.refused());
      // Nobody asked for counters (the default list of --weft:stats and
      // --weft:trace): what the kernel refuses is noted in the metadata
      // only, not said on every run of a machine without them.
      if (!s->counter_note.empty() && s->cfg.counters_asked && !s->cfg.quiet) {
        std::string have;
        for (const auto& n : s->counter_names) have += (have.empty() ? "" : ", ") + n;
        base::info("counters not available: %s; %s", s->counter_note.c_str(),
                   have.empty() ? "no counters this run"
                                : ("counting " + have + " only").c_str());
      }
    }
  }
  if (s->traces && s->cfg.mode == trace_mode::full) {
    t->path = what == track_kind::pe
                  ? node_file(*s, ".pe" + std::to_string(local) + ".events")
                  : node_file(*s, ".comm.events");
    t->fd = ::open(t->path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (t->fd < 0) base::fatal("trace: cannot create %s: %s", t->path.c_str(), std::strerror(errno));
    unsigned char header[32] = {};
    std::memcpy(header, magic, 8);
    const std::uint32_t fields[6] = {format_version,
                                     std::uint32_t(sizeof(record)),
                                     std::uint32_t(s->cfg.node),
                                     std::uint32_t(pe),
                                     std::uint32_t(what),
                                     0};
    std::memcpy(header + 8, fields, sizeof fields);
    if (int err = write_all(t->fd, header, sizeof header); err != 0)
      base::fatal("trace: cannot write %s: %s", t->path.c_str(), std::strerror(err));
    t->cap = s->cap;
    // Zeroed, so that every page is touched here, before the time line
    // starts: left to the first records, a page fault every ~170 records
    // (4 KiB pages: THP is madvise-only on common kernels) cost the traced
    // run more than the records did.
    t->buf.reset(new record[t->cap]());
  }
  if (s->traces && s->cfg.mode == trace_mode::summary) {
    t->bins.assign(2 * max_bins, 0);
    t->bin_ticks = std::max<std::uint64_t>(1, std::uint64_t(1e6 / s->ns_per_tick));
  }
  track* raw = t.get();
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->tracks.push_back(std::move(t));
    s->track_count.store(s->tracks.size(), std::memory_order_relaxed);
  }
  t_own = raw;
  if (!s->traces) return;  // counters only, for --weft:stats
  bool took_base = false;
  if (what == track_kind::pe && s->pes_begun.fetch_add(1) + 1 == s->cfg.pes) {
    take_base(*s);
    s->base_ready.store(true, std::memory_order_release);
    took_base = true;
  }
  while (!s->base_ready.load(std::memory_order_acquire)) sched_yield();
  // A PE waited here from before the time line began: its track starts
  // with it (its first counts are read now, a moment later).
  const std::uint64_t now = what == track_kind::pe ? s->tsc_base : base::cycles();
  raw->first_tick = raw->last_tick = tick_of(*s, now);
  detail::fast_path& f = detail::t_fast;
  f = {};
  f.base = s->tsc_base;
  raw->fp = &f;
  if (s->cfg.mode == trace_mode::full) {
    f.next = f.first = raw->buf.get();
    f.limit = raw->buf.get() + (raw->cap - 2);  // put()'s flush mark
  }
  t_track = raw;
  if (s->cfg.mode == trace_mode::full) {
    put_counters(*raw, now);
    // Visible to the signal handler from here on (its buffer and file are).
    for (std::size_t i = 0; i < s->nslots; ++i) {
      track* empty = nullptr;
      if (s->slots[i].compare_exchange_strong(empty, raw, std::memory_order_release)) break;
    }
  }
  // The metadata of a run that is killed from here on: the time line's
  // clock and every track. Written by the PE that took the base (the others
  // began before it, so their tracks are listed) and by a track that began
  // later (a comm thread); it costs that thread its first ~0.1 ms, overhead
  // on its track.
  if (took_base || (what != track_kind::pe && metadata_stale(*s))) {
    std::lock_guard<std::mutex> lock(s->mutex);
    if (took_base || metadata_stale(*s)) write_metadata(*s, nullptr);
  }
}

std::vector<std::uint64_t> track_counters() {
  track* t = t_own;
  if (t == nullptr) return {};
  return t->final_counters.empty() ? t->counters.read() : t->final_counters;
}

void end_track() {
  track* t = t_own;
  session* s = g_session.load(std::memory_order_acquire);
  if (t == nullptr || s == nullptr) return;
  std::uint64_t now = base::cycles();
  if (t_track != nullptr && t->what == track_kind::pe) {
    // The time line ends when the last PE gets here; the others wait (idle,
    // if they were) and end with it, so every PE track spans the same run.
    if (s->pes_ending.fetch_add(1) + 1 == s->cfg.pes) {
      s->end_tsc = base::cycles();
      s->end_mono = base::wall_ns();
      s->end_ready.store(true, std::memory_order_release);
    }
    while (!s->end_ready.load(std::memory_order_acquire)) sched_yield();
    now = s->end_tsc;
  }
  if (t_track != nullptr) {
    if (t->fp->idle_open) {
      t->fp->idle_open = false;
      put(*t, kind::idle_end, now, 0, 0, 0, 0);
    }
    if (s->cfg.mode == trace_mode::full) {
      put_counters(*t, now);
      // The file is complete with its end record: `writing` stays taken, so
      // neither the abort path nor the signal handler touches it again.
      if (!t->writing.exchange(true, std::memory_order_acquire)) {
        if (write_records(*t, count(*t))) write_end_record(*t, end_how::exit, 0, tick_of(*s, now));
        set_count(*t, 0);
        ::close(t->fd);
        t->fd = -1;
      }
    } else {
      // Slices still open (a run that ended inside a handler: weft::exit)
      // end here.
      while (!t->stack.empty()) summarize(*t, kind(std::uint8_t(t->stack.back().k) + 1),
                                          now - s->tsc_base, t->stack.back().id);
    }
  }
  t->last_tick = tick_of(*s, now);
  t->final_counters = t->counters.read();
  t->counters.close();
  if (t->fd >= 0) {
    // The abort path may be writing this buffer: the file stays open then.
    if (!t->writing.exchange(true, std::memory_order_acquire)) {
      ::close(t->fd);
      t->fd = -1;
    }
  }
  detail::t_fast = {};
  t_track = nullptr;
  t_own = nullptr;
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

namespace {

// nodeN.summary.json: every PE's histogram at the widest bin any PE needed.
std::string summary_json(session& s) {
  const double k = s.ns_per_tick;
  std::uint64_t width = 1;
  for (auto& t : s.tracks)
    if (t->what == track_kind::pe) width = std::max(width, t->bin_ticks);
  std::string j = "{\n  \"format\": \"weft-trace-summary\", \"version\": " +
                  std::to_string(format_version) + ", \"node\": " + std::to_string(s.cfg.node) +
                  ",\n  \"bin_ns\": " + std::to_string(std::uint64_t(double(width) * k)) +
                  ",\n  \"pes\": [";
  const auto ns = [k](std::uint64_t ticks) { return std::to_string(std::uint64_t(double(ticks) * k)); };
  bool first_pe = true;
  for (auto& t : s.tracks) {
    if (t->what != track_kind::pe) continue;
    j += std::string(first_pe ? "\n" : ",\n") + "    {\"pe\": " + std::to_string(t->pe) +
         ", \"wall_ns\": " + ns(t->last_tick - t->first_tick) + ", \"busy_ns\": " + ns(t->busy) +
         ", \"idle_ns\": " + ns(t->idle) + ",\n     \"bins\": [";
    first_pe = false;
    const std::uint64_t merge = width / t->bin_ticks;  // a power of two
    std::size_t used = 0;
    for (std::size_t b = 0; b < max_bins; ++b)
      if (t->bins[2 * b] != 0 || t->bins[2 * b + 1] != 0) used = b + 1;
    for (std::size_t b = 0; b * merge < used; ++b) {
      std::uint64_t busy = 0, idle = 0;
      for (std::uint64_t m = 0; m < merge && b * merge + m < max_bins; ++m) {
        busy += t->bins[2 * (b * merge + m)];
        idle += t->bins[2 * (b * merge + m) + 1];
      }
      j += std::string(b ? ", " : "") + "[" + ns(busy) + ", " + ns(idle) + "]";
    }
    j += "],\n     \"names\": [";
    bool first = true;
    std::map<std::uint64_t, name_stat> sorted(t->names.begin(), t->names.end());
    for (auto& [key, st] : sorted) {
      j += std::string(first ? "" : ",\n                ") + "{\"space\": \"" +
           space_of(kind(key >> 32)) + "\", \"id\": " + std::to_string(std::uint32_t(key)) +
           ", \"count\": " + std::to_string(st.count) + ", \"total_ns\": " + ns(st.total) +
           ", \"self_ns\": " + ns(st.self) + ", \"max_ns\": " + ns(st.max) + "}";
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

}  // namespace

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
  if (s->traces) {
    remove_signal_handlers();
    std::lock_guard<std::mutex> lock(s->mutex);
    if (s->cfg.mode == trace_mode::summary) {
      const std::string path = node_file(*s, ".summary.json");
      if (int err = write_file(path, summary_json(*s)); err != 0)
        base::fatal("trace: cannot write %s: %s", path.c_str(), std::strerror(err));
    }
    const run_end end{end_how::exit, "", 0};
    write_metadata(*s, &end);
  }
  g_session.store(nullptr, std::memory_order_release);
  delete s;
}

void abort_session(end_how how, const char* message) noexcept {
  session* s = g_session.load(std::memory_order_acquire);
  if (s == nullptr || !s->traces || s->aborted.exchange(true)) return;
  // Other threads may still run (a hung PE, under --weft:timeout): take
  // nothing that one of them could hold for long, and write only what each
  // buffer has published.
  const std::uint64_t tick = tick_of(*s, base::cycles());
  write_buffers_at_end(*s, how, 0, tick);
  try {
    run_end end{how, message != nullptr ? message : "", tick};
    // The mutex is held only to write the metadata or to add a track: wait
    // a little for it, then fall back on the metadata as last written.
    std::unique_lock<std::mutex> lock(s->mutex, std::defer_lock);
    for (int i = 0; i < 200 && !lock.try_lock(); ++i) ::usleep(1000);
    if (lock.owns_lock()) {
      write_metadata(*s, &end);
    } else {
      std::string tail = std::string("  \"end\": {\"how\": \"") + how_name(how) +
                         "\", \"tick\": " + std::to_string(tick);
      if (!end.message.empty()) tail += ", \"message\": " + json_string(end.message);
      tail += "},\n  \"complete\": false, \"aborted\": true\n}\n";
      write_prerendered_metadata(*s, tail.data(), tail.size());
    }
  } catch (...) {
    // Out of memory while failing: the fatal message is what matters.
  }
}

void abort_session() noexcept {
  abort_session(end_how::fatal, base::fatal_message());
}

}  // namespace weft::trace
