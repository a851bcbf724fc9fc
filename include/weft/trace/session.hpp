// A node's trace from start to end: what core calls around a run (the
// program uses weft/trace/trace.hpp). One session per node at a time.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>
#include "weft/base/export.hpp"

namespace weft::trace {

enum class trace_mode { full, summary };

struct session_config {
  std::string dir;               // --weft:trace; empty: no trace
  trace_mode mode = trace_mode::full;
  std::size_t buffer_bytes = 0;  // per track (full mode)
  std::vector<std::string> counters;  // names to open per PE (empty: none)
  bool quiet = false;                 // --weft:quiet: no line about refused counters
  // The job, for the metadata.
  int node = 0, nodes = 1, first_pe = 0, pes = 1;
  std::vector<std::string> argv;
};

// Names of ids the layers below put in events ("handler", "entry",
// "collection"): asked for when the metadata is written, so ids registered
// while the node runs are named too.
using name_source = std::function<std::vector<std::pair<std::uint32_t, std::string>>()>;
WEFT_API void set_name_source(const std::string& space, name_source source);

// Starts the session: creates DIR (an error naming it when it cannot),
// takes the clock's base and writes the first metadata. Before any track
// thread starts. A config with an empty dir only opens counters for
// --weft:stats (session_counters).
WEFT_API void start_session(const session_config& config);
// Every PE track has ended: the end of the node's time line.
WEFT_API void pes_ended();
// Ends it: writes the summary (summary mode) and the final metadata. After
// every track thread has ended.
WEFT_API void end_session();
// After a fatal error, from the failing thread: writes what the buffers
// hold, as far as it can, and marks the metadata aborted. Safe to call when
// no session runs.
WEFT_API void abort_session() noexcept;
// Whether a session with a trace directory runs.
WEFT_API bool session_traces();

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
