// A node's trace from start to end: what core calls around a run (the
// program uses weft/trace/trace.hpp). One session per node at a time.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>
#include "weft/base/export.hpp"
#include "weft/trace/counters.hpp"

namespace weft::trace {

enum class trace_mode { full, summary };

struct session_config {
  std::string dir;  // --weft:trace; empty: no trace
  trace_mode mode = trace_mode::full;
  std::size_t buffer_bytes = 0;  // per buffer (full mode)
  // Buffers per track (full mode), 2..64: one filled while the others wait
  // for the writer thread (--weft:trace-pool; 0: 3).
  unsigned pool_buffers = 0;
  std::vector<std::string> counters;  // names to open per PE (empty: none)
  // Counters the kernel refuses are said in one line only when the program
  // asked for counters (--weft:counters given) and is not quiet; the trace's
  // metadata notes them in any case.
  bool counters_asked = false;
  perf_open_fn perf_open = nullptr;  // tests: how counters are opened (null: perf_event_open)
  bool quiet = false;                // --weft:quiet
  // The job, for the metadata.
  int node = 0, nodes = 1, first_pe = 0, pes = 1;
  std::vector<std::string> argv;
  // --weft:trace-sample: every Nth message kept (full mode; 1: all).
  std::uint32_t sample = 1;
  // --weft:trace-time-every: in summary mode the most slices of a name one
  // timed slice stands for (1: every slice is timed; docs/tracing.md).
  std::uint32_t time_every = 256;
};

// Names of ids the layers below put in events ("handler", "entry",
// "collection"): asked for when the metadata is written, so ids registered
// while the node runs are named too.
using name_source = std::function<std::vector<std::pair<std::uint32_t, std::string>>()>;
WEFT_API void set_name_source(const std::string& space, name_source source);

// Starts the session: creates DIR (an error naming it when it cannot),
// takes the clock's base and writes the first metadata. Before any track
// thread starts. With a trace directory it also handles SIGTERM and SIGINT
// where their action is the default one (end_session puts it back): the
// handler writes what the buffers hold and the end records, marks the
// metadata, and the signal then ends the process as it would have. A
// config with an empty dir only opens counters for --weft:stats
// (session_counters).
WEFT_API void start_session(const session_config& config);
// Every PE track has ended: the end of the node's time line.
WEFT_API void pes_ended();
// Ends it: writes the summary (summary mode) and the final metadata. After
// every track thread has ended.
WEFT_API void end_session();
// How a run ended: the `a` field of a track's end record and the metadata's
// "end" (docs/design/trace-format.md).
enum class end_how : std::uint32_t { exit = 0, fatal = 1, timeout = 2, signal = 3 };
// After a fatal error, from the failing thread: writes what the buffers
// hold, as far as it can, each track's end record, and marks the metadata
// aborted with `how` and `message`. Only the first call of a session does
// anything; safe to call when no session runs. Takes no lock that another
// thread could hold for long (the watchdog calls it on a hung node).
WEFT_API void abort_session(end_how how, const char* message) noexcept;
// The fatal hook's form: a fatal error, with base::fatal_message().
WEFT_API void abort_session() noexcept;
// Whether a session with a trace directory runs.
WEFT_API bool session_traces();
// Events the session's tracks dropped so far (their writer fell behind).
WEFT_API std::uint64_t dropped_events();

// The calling thread's track: a PE (global number, rank in its node) or
// the node's comm thread. begin opens the thread's counters (for stats too)
// and its file; end records the last counters and writes the buffer out.
enum class track_kind : std::uint32_t { pe = 0, comm = 1 };
WEFT_API void begin_track(track_kind kind, int pe, int local_rank);
WEFT_API void end_track();

// Counter names opened on PE tracks, and a note on what was refused (empty
// when all were opened); valid after the first begin_track of the session.
WEFT_API std::vector<std::string> session_counter_names();
WEFT_API std::string session_counter_note();
// The calling thread's counts since its track began (empty without counters).
WEFT_API std::vector<std::uint64_t> track_counters();

}  // namespace weft::trace
