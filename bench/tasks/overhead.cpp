// Overhead of an empty parallel loop over the node's PEs: weft::parallel_for
// with each scheme beside libgomp's `#pragma omp parallel for` and oneTBB's
// tbb::parallel_for over as many threads, in one run (issue 5's first
// benchmark). The loop has one iteration per PE (grain 1), so the time is the
// cost of sharing it: exposing, waking, taking, and waiting for the last
// piece.
//
// libgomp and TBB are measured outside the weft node, before it starts in
// each repeat, one after the other with a pause between (settle()), so that
// their threads (which spin a while after a loop, then sleep) and the PEs do
// not run at once. TBB is limited to the same number of threads
// (tbb::global_control) and measured with its default partitioner and with
// static_partitioner (tbb_loop.cpp); without TBB at build time its rows are
// absent. Reported per scheme: microseconds per loop (median over repeats,
// with the spread; min and max in --json), the ratio to libgomp (formed per
// repeat, then the median; its range in --json), and whether it is the
// default scheme (--weft:tasks-scheme), the one issue 5 holds to libgomp;
// and remote_frac, the share of the iterations that ran off the calling
// thread (median over repeats; counted in an untimed pass after each
// measurement): libgomp's static schedule always hands each thread its
// iteration, while weft's adaptive schemes may rightly run an empty loop
// entirely on the caller.
//
// Also reported for weft's schemes, from the runtime's counts of what a
// path touches that other PEs write (bench/common/op_counts.hpp), per loop
// of the untimed pass: caller_touches, the calling PE's, and node_touches,
// all PEs' -- peer visits and shared read-modify-writes (a task stolen
// included), not the probes of PEs looking for work, whose number depends
// on how long they wait (polls_per_loop, all PEs'). Run at 2, 4, 8 and 16 PEs, they show whether a
// scheme's cost grows with P where the machine cannot time it.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>
#include "common/harness.hpp"
#include "common/op_counts.hpp"
#include "weft/weft.hpp"

double omp_empty_loop_us(int threads, long iterations, long loops);
double omp_remote_fraction(int threads, long iterations, long loops);
#ifdef WEFT_BENCH_HAVE_TBB
double tbb_empty_loop_us(int threads, long iterations, long loops, bool static_partition);
double tbb_remote_fraction(int threads, long iterations, long loops, bool static_partition);
#endif

namespace {

constexpr weft::tasks_scheme schemes[] = {
    weft::tasks_scheme::split, weft::tasks_scheme::broadcast, weft::tasks_scheme::static_blocks,
    weft::tasks_scheme::adaptive_idle, weft::tasks_scheme::adaptive_history};

double weft_empty_loop_us(weft::tasks_scheme s, long iterations, long loops) {
  auto run = [&] {
    for (long k = 0; k < loops; ++k)
      weft::parallel_for(0L, iterations,
                         [](long) {
                           asm volatile("" ::: "memory");
                         },
                         {.grain = 1, .scheme = s});
  };
  run();
  const auto t0 = std::chrono::steady_clock::now();
  run();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / double(loops);
}

// Share of the iterations of `loops` empty loops that ran on a PE other
// than the caller (untimed: the count is not part of the empty loop).
double weft_remote_fraction(weft::tasks_scheme s, long iterations, long loops) {
  const int caller = weft::my_rank();
  std::atomic<long> remote{0};
  for (long k = 0; k < loops; ++k)
    weft::parallel_for(0L, iterations,
                       [&](long) {
                         if (weft::my_rank() != caller)
                           remote.fetch_add(1, std::memory_order_relaxed);
                       },
                       {.grain = 1, .scheme = s});
  return double(remote.load()) / double(iterations * loops);
}

// Lets the previous runtime's threads stop spinning and go to sleep before
// the next one is measured (libgomp spins up to a few hundred thousand
// polls after a region by default, TBB's workers a while too).
void settle() {
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

// A series of measurements, one per repeat: runtime "libgomp", "tbb" or
// "weft"; its scheme (or partitioner) name.
struct series {
  std::string runtime, scheme;
  std::vector<double> us;
  std::vector<double> remote;  // share of the iterations run off the caller
  // weft only: peer visits + shared RMWs per loop (op_counts.hpp).
  std::vector<double> caller_touches, node_touches, polls;
};

}  // namespace

int main(int argc, char** argv) {
  weft::bench::cli c = weft::bench::parse_cli(
      argc, argv,
      "tasks_overhead: microseconds per empty parallel loop (one iteration per PE), weft's "
      "schemes beside libgomp and oneTBB (when built with it).\n"
      "  --loops=N   loops per measurement (default 2000)");
  weft::bench::reject_unknown(c, {"loops"});
  const long loops = weft::bench::positive_arg(c, "loops", 2000, 100'000'000);
  weft::runtime_config cfg = weft::parse_options(argc, argv);
  const int pes = cfg.threads;

  // Rows in this order: the baselines, then weft's schemes.
  std::vector<series> all{{"libgomp", "omp-static", {}, {}, {}, {}, {}}};
#ifdef WEFT_BENCH_HAVE_TBB
  all.push_back({"tbb", "tbb-auto", {}, {}, {}, {}, {}});
  all.push_back({"tbb", "tbb-static", {}, {}, {}, {}, {}});
#endif
  for (auto s : schemes) all.push_back({"weft", weft::to_string(s), {}, {}, {}, {}, {}});
  auto of = [&](const std::string& scheme) -> series& {
    for (auto& x : all)
      if (x.scheme == scheme) return x;
    return all.front();  // not reached: every name is listed above
  };
  // Each measurement is followed by an untimed pass of as many loops that
  // counts where the iterations ran: an empty loop that never leaves the
  // caller costs less than one that is shared, and the table says which.
  for (int r = 0; r < c.repeat; ++r) {
    series& omp = of("omp-static");
    omp.us.push_back(omp_empty_loop_us(pes, pes, loops));
    omp.remote.push_back(omp_remote_fraction(pes, pes, loops));
#ifdef WEFT_BENCH_HAVE_TBB
    for (bool part : {false, true}) {
      settle();
      series& tbb = of(part ? "tbb-static" : "tbb-auto");
      tbb.us.push_back(tbb_empty_loop_us(pes, pes, loops, part));
      tbb.remote.push_back(tbb_remote_fraction(pes, pes, loops, part));
    }
#endif
    settle();
    weft::run(cfg, argc, argv, [&](weft::args) {
      for (auto s : schemes) {
        series& x = of(weft::to_string(s));
        x.us.push_back(weft_empty_loop_us(s, pes, loops));
        const weft::base::op_counts node0 = weft::bench::node_op_counts();
        const weft::base::op_counts mine0 = weft::base::this_thread_op_counts();
        x.remote.push_back(weft_remote_fraction(s, pes, loops));
        const weft::base::op_counts mine1 = weft::base::this_thread_op_counts();
        const weft::base::op_counts node1 = weft::bench::node_op_counts();
        x.caller_touches.push_back(weft::bench::touches(mine1 - mine0) / double(loops));
        x.node_touches.push_back(weft::bench::touches(node1 - node0) / double(loops));
        x.polls.push_back(double((node1 - node0)[weft::base::op::poll]) / double(loops));
      }
      weft::exit(0);
    });
  }
  // Ratios to libgomp per repeat (measured in the same repeat), then their
  // median and range.
  const std::vector<double>& base = of("omp-static").us;
  weft::bench::reporter rep("tasks_overhead", c.json);
  for (const series& x : all) {
    const weft::bench::summary s = weft::bench::summarize(x.us);
    std::vector<double> ratios;
    for (std::size_t i = 0; i < x.us.size() && i < base.size(); ++i)
      if (base[i] > 0) ratios.push_back(x.us[i] / base[i]);
    const weft::bench::summary q = weft::bench::summarize(ratios);
    const bool is_default = x.runtime == "weft" && x.scheme == cfg.tasks_scheme;
    std::vector<weft::bench::field> row{{"runtime", x.runtime},  {"scheme", x.scheme},
                                        {"default", is_default}, {"pes", pes},
                                        {"metric", "loop_us"},   {"value", s.median}};
    if (c.json) row.insert(row.end(), {{"min", s.min}, {"max", s.max}});
    row.push_back({"spread", s.spread()});
    row.push_back({"vs_libgomp", q.median});
    if (c.json) row.insert(row.end(), {{"vs_libgomp_min", q.min}, {"vs_libgomp_max", q.max}});
    row.push_back({"remote_frac", weft::bench::summarize(x.remote).median});
    if (!x.caller_touches.empty()) {
      row.push_back({"caller_touches", weft::bench::summarize(x.caller_touches).median});
      row.push_back({"node_touches", weft::bench::summarize(x.node_touches).median});
      row.push_back({"polls_per_loop", weft::bench::summarize(x.polls).median});
    }
    rep.row(std::move(row));
  }
  return 0;
}
