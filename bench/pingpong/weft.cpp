// pingpong: weft's program of the ping-pong workload; bench/pingpong/ holds
// one program per competitor (weft.cpp, mpi.cpp: plain MPI, ucx.cpp: plain
// UCX), each built under its own name (bench/CMakeLists.txt).
//
// Intra-node ping-pong: one-way latency of a message between PE 0 and PE 1,
// next to the physical floor between the same two cores — a cache line
// bounced by a tight spin on one atomic flag (no pause instruction), measured
// by the same two PEs inside handlers, so on the same CPUs. Floor and
// latency are measured alternately (floor, latency, floor, latency, ...)
// because on a virtual machine the floor itself drifts between minutes; each
// latency is divided by the floor measured just before it.
//
// The message is handed back and forth: the handler sends the very message
// it received, so this measures the runtime's delivery path (queue push, wake
// check, pop, dispatch), not the allocator.
//
// Across nodes (a job of several processes started by mpirun), the pair is
// PE 0 of node 0 and the first PE of node 1, and the message goes through the
// transport: there is no cache-line floor then (the two PEs are in different
// processes); each size reports the one-way latency (round trip / 2) and the
// bandwidth (bytes / one-way time), with the transport's name, in the rows
// mpi_pingpong (mpi.cpp) prints for plain MPI, measured in the same order as
// mpi_pingpong and ucx_pingpong (ucx.cpp) measure: size after size, each
// warmed up once and then repeated (a measurement makes fewer round trips
// for large messages, about 64 MiB moved), so that the ratios to them
// compare like with like. (The sizes used to interleave, as the one-node
// run does: every 8-byte repeat then came right after a 4 MiB one. On this
// VM the 8-byte ratios did not measurably change with the order.) With
// --touch=true each side reads the
// whole payload it received and writes it whole before sending it on (as
// mpi_pingpong --touch=true does): a transport that lends large
// messages in place must then move the data through memory like one that
// copies it.
#include "weft/weft.hpp"
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include "common/harness.hpp"
#include "common/nodes.hpp"
#include "weft/base/cache.hpp"
#include "weft/base/timer.hpp"

namespace {

const char* about =
    "pingpong: one-way latency between PE 0 and PE 1 of one node, 8 B .. 4 MiB, beside the\n"
    "cache-line ping-pong latency between the same two cores (the physical floor), measured\n"
    "alternately in the same run; prints the ratio latency/floor per pair and its median.\n"
    "Run as several processes (mpirun -n 2 ...): between PE 0 of node 0 and the first PE of\n"
    "node 1, through the transport; one-way latency and bandwidth per size, no floor. Flags:\n"
    "  --bytes=LIST    sizes (default 8,16,64,256,1024,4096,16384,65536,262144,1048576,4194304)\n"
    "  --iters=N       round trips per latency measurement (default 5000; across nodes, fewer\n"
    "                  for large messages: at least 20, about 64 MiB moved per measurement)\n"
    "  --touch=BOOL    true: the receiver reads every byte (and checks it) and the sender\n"
    "                  writes every byte before each send (default false)\n"
    "Needs --weft:threads >= 2 in one process; PE 0 and PE 1 should be on different CPUs.";

// The floor's flag, alone on its line.
alignas(weft::base::cache_line) std::atomic<std::uint64_t> g_flag{0};

struct step {
  std::uint32_t bytes;
  int repeat;  // -1: warm-up (across nodes only)
};

struct driver_state {
  weft::bench::cli cli;
  std::vector<std::uint32_t> sizes;
  std::vector<step> plan;
  std::size_t next = 0;
  int iters = 5000;
  int left = 0;
  std::uint64_t t0 = 0;
  double floor_ns = 0;
  std::vector<double> floors;                      // every floor measured
  std::vector<std::vector<double>> oneway, ratio;  // per size index
  bool warm = false;
  bool touch = false;
  unsigned char fill = 0;  // the value this PE writes next (--touch)
  // Across nodes: the PE that answers (the first of node 1), the round trips
  // of the current step, the transport's name.
  bool across = false;
  int peer = 1;
  long trips = 0;
  std::string transport;
} g_d;

weft::handler_id h_ping, h_ping_touch, h_floor;
constexpr int floor_rounds = 20000;

// PE 1's side of the floor measurement: answers PE 0 round by round.
void on_floor(weft::message_ptr) {
  for (std::uint64_t i = 0; i < floor_rounds; ++i) {
    while (g_flag.load(std::memory_order_acquire) != 2 * i + 1) {
    }
    g_flag.store(2 * i + 2, std::memory_order_release);
  }
}

// PE 0's side; returns the one-way time in ns.
double measure_floor() {
  g_flag.store(0, std::memory_order_relaxed);
  weft::send(1, weft::make_message(h_floor, 0));
  // Wait until PE 1 is in its handler and ready: the first round trip also
  // absorbs its wake-up, so it is not timed.
  g_flag.store(1, std::memory_order_release);
  while (g_flag.load(std::memory_order_acquire) != 2) {
  }
  const std::uint64_t t0 = weft::base::cycles();
  for (std::uint64_t i = 1; i < floor_rounds; ++i) {
    g_flag.store(2 * i + 1, std::memory_order_release);
    while (g_flag.load(std::memory_order_acquire) != 2 * i + 2) {
    }
  }
  const std::uint64_t t1 = weft::base::cycles();
  return weft::base::cycles_to_ns(t1 - t0) / (2.0 * (floor_rounds - 1));
}

void start_step();
void finish();
void across_step_done();

void on_ping(weft::message_ptr m) {
  if (weft::my_pe() != 0) {
    weft::send(0, std::move(m));
    return;
  }
  driver_state& d = g_d;
  if (--d.left > 0) {
    weft::send(d.peer, std::move(m));
    return;
  }
  if (d.across) {
    across_step_done();
    return;
  }
  const double ns = weft::base::cycles_to_ns(weft::base::cycles() - d.t0) / (2.0 * d.iters);
  if (d.warm) {
    const step& s = d.plan[d.next];
    std::size_t idx =
        std::size_t(std::find(d.sizes.begin(), d.sizes.end(), s.bytes) - d.sizes.begin());
    d.oneway[idx].push_back(ns);
    d.ratio[idx].push_back(ns / d.floor_ns);
    ++d.next;
  }
  d.warm = true;
  if (d.next < d.plan.size())
    start_step();
  else
    finish();
}

// --touch=true's handler: the same, after touching the payload. A handler
// of its own, so that the untouched runs execute exactly on_ping.
void on_ping_touch(weft::message_ptr m) {
  weft::bench::touch_message("pingpong", *m, g_d.fill);
  on_ping(std::move(m));
}

void start_step() {
  driver_state& d = g_d;
  const step& s = d.plan[d.next];
  d.floor_ns = measure_floor();
  d.floors.push_back(d.floor_ns);
  d.left = d.iters;
  // Let PE 1 leave its floor handler before timing starts: the first message
  // also carries it back into its scheduler.
  weft::message_ptr m = weft::make_message(d.touch ? h_ping_touch : h_ping, s.bytes);
  std::memset(m->data(), d.fill, d.touch ? s.bytes : std::min<std::size_t>(s.bytes, 64));
  d.t0 = weft::base::cycles();
  weft::send(1, std::move(m));
}

// ---- across nodes ---------------------------------------------------------------

void start_across_step() {
  driver_state& d = g_d;
  const step& s = d.plan[d.next];
  d.trips = weft::bench::round_trips(d.iters, long(s.bytes));
  d.left = int(d.trips);
  weft::message_ptr m = weft::make_message(d.touch ? h_ping_touch : h_ping, s.bytes);
  std::memset(m->data(), d.fill, d.touch ? s.bytes : std::min<std::size_t>(s.bytes, 64));
  d.t0 = weft::base::cycles();
  weft::send(d.peer, std::move(m));
}

void finish_across();

void across_step_done() {
  driver_state& d = g_d;
  const double ns = weft::base::cycles_to_ns(weft::base::cycles() - d.t0) / (2.0 * d.trips);
  const step& s = d.plan[d.next];
  if (s.repeat >= 0) {
    std::size_t idx =
        std::size_t(std::find(d.sizes.begin(), d.sizes.end(), s.bytes) - d.sizes.begin());
    d.oneway[idx].push_back(ns);
  }
  if (++d.next < d.plan.size())
    start_across_step();
  else
    finish_across();
}

void finish_across() {
  driver_state& d = g_d;
  weft::bench::reporter out("pingpong", d.cli.json);
  for (std::size_t i = 0; i < d.sizes.size(); ++i) {
    const long bytes = long(d.sizes[i]);
    weft::bench::latency_bandwidth_rows(out,
                                        {{"transport", d.transport},
                                         {"nodes", weft::num_nodes()},
                                         {"pes_per_node", weft::node_size()},
                                         {"touch", d.touch},
                                         {"bytes", bytes}},
                                        bytes, d.oneway[i]);
  }
  out.flush();
  weft::exit(0);
}

// ---- report (one node) -------------------------------------------------------------

void finish() {
  driver_state& d = g_d;
  weft::bench::reporter out("pingpong", d.cli.json);
  auto fl = weft::bench::summarize(d.floors);
  out.row(
      {{"metric", "cacheline_oneway_ns"}, {"value", fl.median}, {"min", fl.min}, {"max", fl.max}});
  out.flush();
  for (std::size_t i = 0; i < d.sizes.size(); ++i) {
    auto s = weft::bench::summarize(d.oneway[i]);
    auto r = weft::bench::summarize(d.ratio[i]);
    out.row({{"metric", "oneway_ns"},
             {"bytes", long(d.sizes[i])},
             {"value", s.median},
             {"min", s.min},
             {"max", s.max},
             {"ratio_median", r.median},
             {"ratio_min", r.min},
             {"ratio_max", r.max}});
  }
  out.flush();
  auto it = std::find(d.sizes.begin(), d.sizes.end(), 16u);
  if (it != d.sizes.end()) {
    auto r = weft::bench::summarize(d.ratio[std::size_t(it - d.sizes.begin())]);
    out.row({{"metric", "ratio_oneway16_over_cacheline"},
             {"value", r.median},
             {"min", r.min},
             {"max", r.max},
             {"requirement", "<= 3"},
             {"met", r.median <= 3.0}});
  }
  out.flush();
  weft::exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  h_ping = weft::register_handler("pingpong.ping", on_ping);
  h_ping_touch = weft::register_handler("pingpong.ping_touch", on_ping_touch);
  h_floor = weft::register_handler("pingpong.floor", on_floor);
  driver_state& d = g_d;
  d.cli = weft::bench::parse_cli(argc, argv, about);
  weft::bench::reject_unknown(d.cli, {"bytes", "iters", "touch"});
  d.touch = weft::bench::touch_arg(d.cli, false);
  d.iters = int(weft::bench::positive_arg(d.cli, "iters", 5000, 100000000));
  for (long b : weft::bench::int_list_arg(
           d.cli, "bytes", "8,16,64,256,1024,4096,16384,65536,262144,1048576,4194304", 1, 1l << 30))
    d.sizes.push_back(std::uint32_t(b));
  if (d.iters < 1) {
    std::fprintf(stderr, "error: --iters must be >= 1\n");
    return 2;
  }
  d.oneway.resize(d.sizes.size());
  d.ratio.resize(d.sizes.size());

  weft::runtime_config cfg = weft::parse_options(argc, argv);
  if (weft::bench::launched_as_several_processes()) {
    // Across nodes: size after size, a warm-up and then the repeats (the
    // baselines' order, see the top of this file).
    for (std::uint32_t b : d.sizes) {
      d.plan.push_back({b, -1});
      for (int r = 0; r < d.cli.repeat; ++r) d.plan.push_back({b, r});
    }
    return weft::bench::run_across_processes("pingpong across nodes", cfg, argc, argv, [] {
      driver_state& dr = g_d;
      dr.transport = weft::config().transport;
      dr.across = true;
      dr.peer = weft::node_size();  // the first PE of node 1
      start_across_step();
    });
  }
  for (int r = 0; r < d.cli.repeat; ++r)
    for (std::uint32_t b : d.sizes) d.plan.push_back({b, r});
  if (cfg.threads < 2) {
    std::fprintf(stderr, "error: pingpong needs --weft:threads >= 2 (got %d)\n", cfg.threads);
    return 2;
  }
  if (cfg.pe_cpus[0] >= 0 && cfg.pe_cpus[0] == cfg.pe_cpus[1])
    std::fprintf(stderr, "warning: PE 0 and PE 1 share CPU %d: the floor spin will crawl\n",
                 cfg.pe_cpus[0]);
  return weft::run(cfg, argc, argv, [](weft::args) { start_step(); });
}
