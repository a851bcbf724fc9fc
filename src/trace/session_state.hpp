// What the trace layer's files share: a node's session, its tracks, the
// record format's constants, and the calls one file makes into another
// (private to src/trace; the public face is weft/trace/session.hpp and the
// hooks of weft/trace/hooks.hpp).
//
// One header for the state, not one per file: the session and its tracks are
// one object graph that the recording path, the metadata, the session's
// start and end, and the abort path all walk, each from its own thread and
// under its own rules (written down on the fields). The split is by what
// each file does to that state:
//   session.cpp   a node's session from start_session to end_session
//   track.cpp     a thread's track: its buffer, the writer, the hooks'
//                 slow paths
//   summary.cpp   summary mode: the counts, the sampled timing, the histogram
//   metadata.cpp  nodeN.json, the name tables, nodeN.summary.json
//   ending.cpp    end records, the abort path, SIGTERM and SIGINT
//
// Ownership and concurrency (the design in brief; session.cpp has the
// whole story): every track (a PE, or a node's comm thread) owns a pool of
// buffers and its file; its thread alone appends, so recording takes no lock
// and touches no line another thread writes. A full buffer is handed to the
// session's writer thread, which writes it to the track's file while the
// track fills the next one of its pool; with none free the track drops
// events and counts them. The session's mutex guards only the list of
// tracks, taken when a track begins or ends and when the metadata is
// written.
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>
#include "weft/base/json.hpp"
#include "weft/trace/counters.hpp"
#include "weft/trace/hooks.hpp"
#include "weft/trace/session.hpp"

namespace weft::trace::internal {

using record = detail::raw_record;

constexpr char magic[8] = {'W', 'E', 'F', 'T', 'T', 'R', 'C', 0};
// 2: the end record (kind 24), the metadata's "end", tracks listed while
// the run goes on; 3: the cpu record (kind 25) and each track's CPU set
// (docs/design/trace-format.md says what changed).
constexpr std::uint32_t format_version = 3;

// Summary mode: the histogram starts with 1 ms bins and doubles their width
// whenever the run outgrows max_bins, so a run of any length keeps between
// max_bins / 2 and max_bins of them.
constexpr std::size_t max_bins = 1024;

// Slices open with a kind of detail::begin_kinds and close with the next
// kind (the format pairs them so).
inline bool is_begin(kind k) {
  return detail::begin_kinds >> std::uint32_t(k) & 1u;
}
inline bool is_end(kind k) {
  return k != kind{} && (detail::begin_kinds >> (std::uint32_t(k) - 1) & 1u);
}
// A slice of the program's work (busy time), not the runtime's.
inline bool is_busy(kind begin) {
  return begin == kind::handler_begin || begin == kind::entry_begin || begin == kind::task_begin ||
         begin == kind::region_begin;
}

// Summary mode (summary.cpp). Every slice is counted; a name's first
// first_timed slices are timed, and then one in as many as keeps the cost
// of timing (two clock reads and the slow path's calls, ~20-80 ns) near 1% of
// the name's time: one in budget_ns / its shortest timed slice on average
// (random gaps), at most `stride` (--weft:trace-time-every), and every one
// when even the shortest lasts budget_ns. The shortest, not the mean: a
// preempted slice makes a mean long, never a minimum, so how often a name
// is timed does not follow the machine's load.
constexpr std::uint64_t first_timed = 16;
constexpr double budget_ns = 8000.0;

// A name's timing (its summary_count holds its count).
struct name_timing {
  std::uint64_t timed = 0;                     // slices timed
  std::uint64_t counted = 0;                   // the count when the last one was timed
  std::uint64_t shortest = ~std::uint64_t(0);  // the shortest timed one (sets the stride)
  std::uint64_t weight = 0;                    // slices the weighted totals stand for
  std::uint64_t total = 0, self = 0;           // weighted by what each timed slice stands for
  std::uint64_t max = 0;
};
// A name's line in nodeN.summary.json (ticks; total and self estimated).
struct name_stat {
  std::uint64_t count = 0, timed = 0, total = 0, self = 0, max = 0;
};
struct open_slice {
  kind k;
  std::uint32_t id;
  std::uint64_t t0;          // base::cycles()
  std::uint64_t nested = 0;  // time of slices that ran inside it
  std::uint64_t weight = 1;  // the slices of its name it stands for
  std::uint32_t depth = 0;   // fast_path::depth with it open
  bool top = false;          // the outermost busy slice (busy time, the histogram)
};
struct summary_state {
  // Rows by summary_index (the inline path reads the counts: fast_path
  // points at them); names past them (other kinds, the main and callback
  // handlers' ids) in `others`.
  static constexpr std::uint32_t flat_ids = 4096;
  std::array<std::vector<detail::summary_count>, detail::summary_kinds> counts;
  std::array<std::vector<name_timing>, detail::summary_kinds> timing;
  std::unordered_map<std::uint64_t, std::pair<detail::summary_count, name_timing>> others;
  std::vector<open_slice> stack;  // the timed slices open, innermost last
  std::uint32_t stride = 256;     // the most slices one timed slice stands for
  std::uint64_t budget_ticks = 1;
  std::uint64_t own_cost = 0;                 // ticks an empty timed slice measures (summary_begin)
  std::uint64_t rng = 0x9e3779b97f4a7c15ull;  // the timing gaps' random numbers
  std::uint32_t nonbusy_open = 0;             // open slices of kinds that are not busy (progress)
  std::uint64_t last_now = 0;  // the clock read of the last event (fast_path::stamped)
  std::uint64_t idle_t0 = 0, busy = 0, idle = 0;  // ticks; busy estimated
  std::vector<std::uint64_t> bins;                // busy, idle interleaved, in ticks
  std::uint64_t bin_ticks = 1;
  // Every name with a slice, by key (kind << 32 | id).
  std::map<std::uint64_t, name_stat> sorted() const;
};

// Who holds a track's file (track::file): nobody, the writer thread while
// it writes one buffer, or for good (the owner at its end, the abort path).
enum file_hold : int { file_free = 0, file_writing = 1, file_taken = 2 };

struct track {
  track_kind what = track_kind::pe;
  int pe = -1, local = -1;
  std::vector<int> cpus;  // the CPUs its thread may run on, when it began
  // Full mode: a pool of nbufs buffers of cap records, filled in turn. The
  // owner hands a full one to the writer by storing its count in full[i]
  // (release); the writer stores 0 there once it is written (release), and
  // the owner fills it again. In turn, so the file gets them in order.
  std::vector<std::unique_ptr<record[]>> bufs;
  std::unique_ptr<std::atomic<std::uint32_t>[]> full;
  std::uint32_t nbufs = 0, cap = 0;
  std::atomic<std::uint32_t> cur{0};  // the buffer the owner fills
  std::uint32_t wnext = 0;            // the next buffer to write (whoever holds the file)
  // The owner thread's fast path: its `next` is where the next record goes
  // (null while the track drops events).
  detail::fast_path* fp = nullptr;
  int fd = -1;
  std::string path;
  std::atomic<bool> failed{false};   // a write failed: the track records no more
  std::atomic<int> file{file_free};  // file_hold
  // Drops: while no buffer of the pool is free the owner counts the events
  // it cannot store (`dropped`, since the last dropped record; the abort
  // path reads it) and resumes, with a dropped record, when one is.
  bool dropping = false;
  std::uint64_t drop_tick = 0;     // when the track began to drop
  std::uint64_t handoff_tick = 0;  // the last hand-off: its flush_end's time
  std::uint32_t handed = 0;        // records of the last buffer handed off
  std::atomic<std::uint64_t> dropped{0}, dropped_total{0};
  // The tick of the last record in the file (its writer alone stores it):
  // an end record written by another thread is not stamped before it.
  std::atomic<std::uint64_t> written_tick{0};
  // Both modes.
  counter_set counters;
  std::vector<std::uint64_t> final_counters;
  std::uint64_t first_tick = 0, last_tick = 0;
  bool summary = false;
  summary_state sum;  // summary mode
};

struct session {
  session_config cfg;
  bool traces = false;
  std::uint64_t tsc_base = 0;
  std::uint64_t mono_base = 0, real_base = 0;
  double ns_per_tick = 1.0;
  std::uint32_t cap = 0;        // records per buffer
  std::uint32_t pool = 0;       // buffers per track
  unsigned slow_writer_ms = 0;  // tests: the writer sleeps so long before each buffer
  // The writer thread (full mode): `wake` counts hand-offs, the writer
  // sleeps on it when it finds nothing to write.
  std::thread writer;
  std::atomic<std::uint32_t> wake{0};
  std::atomic<bool> writer_stop{false};
  std::mutex mutex;  // guards tracks, the counter note, the metadata file
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
inline std::uint64_t tick_of(const session& s, std::uint64_t tsc) {
  return tsc > s.tsc_base ? tsc - s.tsc_base : 0;
}

// The running session (null when none). Hidden, as its definition is: the
// recording path reads it on every record that leaves the inline path, and
// a declaration of default visibility would be read through the GOT.
[[gnu::visibility("hidden")]] extern std::atomic<session*> g_session;

// The buffer the owner fills and the records in it (the owner's view; the
// abort path reads another track's more carefully: ending.cpp).
inline record* cur_buf(const track& t) {
  return t.bufs[t.cur.load(std::memory_order_relaxed)].get();
}
inline std::uint32_t count(const track& t) {
  record* next = t.fp->next;
  return next == nullptr ? 0 : std::uint32_t(next - cur_buf(t));
}

// How the run ended: the metadata's "end".
struct run_end {
  end_how how = end_how::exit;
  std::string message;
  std::uint64_t tick = 0;
};

inline std::string json_string(const std::string& s) {
  return base::json_quote(s);
}

// ---- session.cpp
// Takes the time line's base (its clocks, now).
void take_base(session& s);
// DIR/nodeN<rest>.
std::string node_file(const session& s, const std::string& rest);

// ---- track.cpp
// Writes all of [p, p + n) or returns the errno that stopped it.
// Async-signal-safe: write(2) alone.
int write_all(int fd, const void* p, std::size_t n);
// The writer thread's loop, until s.writer_stop.
void writer_main(session& s);
// The dropped record of `n` events dropped since `since` (a tick), at `tick`.
inline record dropped_record(std::uint64_t tick, std::uint64_t n, std::uint64_t since) {
  return {tick << 8 | std::uint64_t(kind::dropped), std::uint32_t(n), std::uint32_t(n >> 32),
          std::uint32_t(since), std::uint32_t(since >> 32)};
}

// ---- summary.cpp
// Summary mode's events: a slice's begin or end (`id`: its name), taking
// time stamp `stamp` when it needs one (0: reads the clock then).
void summary_event(track& t, kind k, std::uint32_t id, std::uint64_t stamp);
// An idle period begins or ends at `now`.
void summary_idle(track& t, bool begin, std::uint64_t now);
// The track's summary state, as it begins (stride: --weft:trace-time-every).
void summary_begin(track& t, const session& s);
// Its end at `now`: timed slices still open end there.
void summary_end(track& t, std::uint64_t now);

// ---- metadata.cpp
// Writes `text` to `path` through a temporary file and a rename, so a
// reader never sees half of it. Returns the errno of a failure and sets
// *call to the call that failed.
int write_file(const std::string& path, const std::string& text, const char** call);
const char* how_name(end_how how);
// Writes the metadata: while the run goes on (`end` null), or at its end
// (exit: complete; otherwise aborted). The caller holds s.mutex, or is the
// abort path (`end->how` other than exit).
void write_metadata(session& s, const run_end* end);
// Whether the metadata on disk lacks a track or a user name.
bool metadata_stale(const session& s);
// nodeN.summary.json: every PE's histogram at the widest bin any PE needed.
std::string summary_json(session& s);

// ---- ending.cpp
// Appends the track's end record to its file, at `tick` or after the last
// record written. The caller holds the file (track::file). Async-signal-safe: write(2) alone.
void write_end_record(track& t, end_how how, int signal, std::uint64_t tick);
// Handles SIGTERM and SIGINT where nobody else does (the program, MPI).
void install_signal_handlers();
void remove_signal_handlers();

}  // namespace weft::trace::internal
