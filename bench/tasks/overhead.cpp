// Overhead of an empty parallel loop over the node's PEs: weft::parallel_for
// with each scheme beside libgomp's `#pragma omp parallel for` over as many
// threads, in one run (issue 5's first benchmark). The loop has one
// iteration per PE (grain 1), so the time is the cost of sharing it: exposing,
// waking, taking, and waiting for the last piece.
//
// libgomp is measured outside the weft node, before it starts in each
// repeat, so its threads (which spin a while after a region, then sleep) and
// the PEs do not run at once. Reported per scheme: microseconds per loop
// (median over repeats, with the spread) and the ratio to libgomp.
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>
#include "common/harness.hpp"
#include "weft/weft.hpp"

double omp_empty_loop_us(int threads, long iterations, long loops);

namespace {

constexpr weft::tasks_scheme schemes[] = {
    weft::tasks_scheme::split, weft::tasks_scheme::broadcast, weft::tasks_scheme::static_blocks,
    weft::tasks_scheme::adaptive_idle, weft::tasks_scheme::adaptive_history};

double weft_empty_loop_us(weft::tasks_scheme s, long iterations, long loops) {
  auto run = [&] {
    for (long k = 0; k < loops; ++k)
      weft::parallel_for(0L, iterations, [](long) { asm volatile("" ::: "memory"); },
                         {.grain = 1, .scheme = s});
  };
  run();
  const auto t0 = std::chrono::steady_clock::now();
  run();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / double(loops);
}

}  // namespace

int main(int argc, char** argv) {
  weft::bench::cli c = weft::bench::parse_cli(
      argc, argv,
      "tasks_overhead: microseconds per empty parallel loop (one iteration per PE), weft's "
      "schemes beside libgomp.\n  --loops=N   loops per measurement (default 2000)");
  weft::bench::reject_unknown(c, {"loops"});
  const long loops = weft::bench::positive_arg(c, "loops", 2000, 100'000'000);
  weft::runtime_config cfg = weft::parse_options(argc, argv);
  const int pes = cfg.threads;

  std::map<std::string, std::vector<double>> us;
  for (int r = 0; r < c.repeat; ++r) {
    us["libgomp"].push_back(omp_empty_loop_us(pes, pes, loops));
    weft::run(cfg, argc, argv, [&](weft::args) {
      for (auto s : schemes) us[weft::to_string(s)].push_back(weft_empty_loop_us(s, pes, loops));
      weft::exit(0);
    });
  }
  const double base = weft::bench::summarize(us["libgomp"]).median;
  weft::bench::reporter rep("tasks_overhead", c.json);
  for (auto& [name, xs] : us) {
    const weft::bench::summary s = weft::bench::summarize(xs);
    rep.row({{"runtime", name == "libgomp" ? std::string("libgomp") : std::string("weft")},
             {"scheme", name == "libgomp" ? std::string("omp-static") : name},
             {"pes", pes},
             {"metric", "loop_us"},
             {"value", s.median},
             {"spread", s.spread()},
             {"vs_libgomp", base > 0 ? s.median / base : 0.0}});
  }
  return 0;
}
