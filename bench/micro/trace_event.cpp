// trace_event: what one trace event costs the thread that records it
// (docs/tracing.md, "What it costs").
//
// One thread, no node: a trace session is started by hand around each
// measurement, as core does around a run. Measured, each as ns per event
// over N events (median of --repeat interleaved repeats, min-max):
//  - clock: the time-stamp read alone (base::cycles(), rdtsc on x86-64), the
//    floor of any event;
//  - off: a hook with tracing off (`if (trace::on()) ...`): one branch;
//  - full: trace::detail::emit into the thread's buffer, full mode, each
//    event with its own clock read; a full buffer (--buffer MiB, default 4)
//    is handed to the session's writer thread, which writes it to --dir
//    (default /dev/shm, else /tmp) while the thread fills the next of its
//    pool (--pool buffers; by default enough for a measurement's events, as
//    a tight loop of events outruns any writer): the hand-offs are in the
//    figure;
//  - full_adjacent: an entry event that takes the time of the handler event
//    before it (emit_adjacent: no clock read), as objects' entry_begin does;
//  - full_message: what the scheduler records for each message of a batch
//    to an entry method, per event: handler_begin (the time of the previous
//    handler_end), entry_begin (the same), entry_end (a clock read),
//    handler_end (entry_end's time): one clock read per four events;
//  - full_dropped: events the full-mode measurements dropped (the writer
//    fell behind; a dropped event costs less than a stored one, so a
//    figure with drops is not the cost of recording): 0 for a valid run;
//  - summary: begin/end pairs in summary mode (per-name totals and the
//    utilization histogram), per event; summary_message: the four events
//    of a message to an entry method in summary mode, per event (most
//    slices counted only: docs/tracing.md, "Summary mode").
// Ratios to the clock are formed per repeat.
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "common/harness.hpp"
#include "weft/base/timer.hpp"
#include "weft/trace/hooks.hpp"
#include "weft/trace/session.hpp"

namespace {

namespace wb = weft::bench;
namespace tr = weft::trace;
using weft::base::wall_ns;

const char* about =
    "trace_event: ns per trace event on the recording thread: the clock read alone, a hook\n"
    "with tracing off, an event in full mode (buffer flushes included), an event that reuses\n"
    "the previous one's time, and summary mode. Flags:\n"
    "  --events=N     events per measurement (default 4000000)\n"
    "  --buffer=MiB   trace buffer (default 4)\n"
    "  --pool=N       trace buffers per track, 2..64 (default: enough for one measurement's\n"
    "                 events, so that the writer thread never makes it drop)\n"
    "  --dir=DIR      where full mode writes (default /dev/shm, else /tmp)";

std::string g_dir;
std::size_t g_buffer = 4u << 20;
unsigned g_pool = 3;
std::uint64_t g_dropped = 0;

void start(tr::trace_mode mode) {
  tr::session_config c;
  c.dir = g_dir;
  c.mode = mode;
  c.buffer_bytes = g_buffer;
  c.pool_buffers = g_pool;
  c.pes = 1;
  c.quiet = true;
  tr::start_session(c);
  tr::begin_track(tr::track_kind::pe, 0, 0);
}

void stop() {
  tr::end_track();
  g_dropped += tr::dropped_events();
  tr::pes_ended();
  tr::end_session();
}

template <class F>
double per_event(long n, F&& f) {
  const std::uint64_t t0 = wall_ns();
  f(n);
  return double(wall_ns() - t0) / double(n);
}

}  // namespace

int main(int argc, char** argv) {
  wb::cli cli = wb::parse_cli(argc, argv, about);
  wb::reject_unknown(cli, {"events", "buffer", "pool", "dir"});
  const long events = wb::positive_arg(cli, "events", 4'000'000, 1L << 40);
  g_buffer = std::size_t(wb::positive_arg(cli, "buffer", 4, 4096)) << 20;
  const long fit = long((std::size_t(events) * 24 + g_buffer - 1) / g_buffer) + 2;
  g_pool = unsigned(wb::positive_arg(cli, "pool", std::min(fit, 64L), 64));
  if (g_pool < 2) {
    std::fprintf(stderr, "trace_event: --pool=%u: expected 2..64 buffers per track\n", g_pool);
    return 2;
  }
  struct stat st {};
  g_dir = wb::arg(
      cli, "dir",
      ::stat("/dev/shm", &st) == 0 && ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
  g_dir += "/weft-trace-event-bench." + std::to_string(getpid());

  std::vector<double> clock, off, full, adjacent, message, summary, summary_message, r_full,
      r_message, r_summary;
  volatile std::uint64_t sink = 0;
  for (int rep = 0; rep < cli.repeat; ++rep) {
    const double c = per_event(events, [&](long n) {
      std::uint64_t s = 0;
      for (long i = 0; i < n; ++i) s += weft::base::cycles();
      sink = s;
    });
    clock.push_back(c);
    off.push_back(per_event(events, [&](long n) {
      for (long i = 0; i < n; ++i) {
        if (tr::on()) tr::detail::emit(tr::kind::mark, 1, 2, 3, 4);
        asm volatile("" ::: "memory");
      }
    }));
    start(tr::trace_mode::full);
    const double f = per_event(events, [&](long n) {
      for (long i = 0; i < n; ++i) tr::detail::emit(tr::kind::mark, std::uint32_t(i), 2, 3, 4);
    });
    full.push_back(f);
    // A session each: the pool holds one measurement's records.
    stop();
    start(tr::trace_mode::full);
    adjacent.push_back(per_event(events, [&](long n) {
      for (long i = 0; i < n; i += 2) {
        tr::detail::emit(tr::kind::handler_begin, 1, 2, 3, 4);
        tr::detail::emit_adjacent(tr::kind::handler_begin, tr::kind::entry_begin, 5, 6, 7, 8);
      }
    }));
    stop();
    // Messages to an entry method, as the scheduler and the objects layer
    // record them: four events each.
    const auto messages = [](long n) {
      // The first handler_begin reads the clock: no handler ended before it.
      tr::detail::emit(tr::kind::handler_end, 1, 0, 0, 0);
      for (long i = 0; i < n; i += 4) {
        tr::detail::emit_adjacent(tr::kind::handler_end, tr::kind::handler_begin, 1, 2, 16, 0);
        tr::detail::emit_adjacent(tr::kind::handler_begin, tr::kind::entry_begin, 5, 6, 7, 0);
        tr::detail::emit(tr::kind::entry_end, 5, 0, 0, 0);
        tr::detail::emit_adjacent(tr::kind::entry_end, tr::kind::handler_end, 1, 0, 0, 0);
      }
    };
    start(tr::trace_mode::full);
    const double m = per_event(events, messages);
    message.push_back(m);
    stop();
    start(tr::trace_mode::summary);
    const double s = per_event(events, [&](long n) {
      for (long i = 0; i < n; i += 2) {
        tr::detail::emit(tr::kind::handler_begin, 1, 0, 0, 0);
        tr::detail::emit(tr::kind::handler_end, 1, 0, 0, 0);
      }
    });
    summary.push_back(s);
    stop();
    start(tr::trace_mode::summary);
    summary_message.push_back(per_event(events, messages));
    stop();
    r_full.push_back(f / c);
    r_message.push_back(m / c);
    r_summary.push_back(s / c);
  }
  std::string rm = "rm -rf '" + g_dir + "'";
  if (std::system(rm.c_str()) != 0)
    std::fprintf(stderr, "trace_event: could not remove %s\n", g_dir.c_str());

  wb::reporter rep("trace_event", cli.json);
  auto row = [&](const char* metric, const std::vector<double>& xs) {
    const wb::summary s = wb::summarize(xs);
    rep.row({{"metric", metric},
             {"value", s.median},
             {"min", s.min},
             {"max", s.max},
             {"buffer_mib", long(g_buffer >> 20)}});
  };
  row("clock_ns", clock);
  row("off_ns", off);
  row("full_ns", full);
  row("full_adjacent_ns", adjacent);
  row("full_message_ns", message);
  row("summary_ns", summary);
  row("summary_message_ns", summary_message);
  row("ratio_full_over_clock", r_full);
  row("ratio_full_message_over_clock", r_message);
  row("ratio_summary_over_clock", r_summary);
  rep.row({{"metric", "full_dropped"},
           {"value", double(g_dropped)},
           {"min", double(g_dropped)},
           {"max", double(g_dropped)},
           {"buffer_mib", long(g_buffer >> 20)}});
  return int(sink & 0);
}
