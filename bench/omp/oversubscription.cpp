// Oversubscription (issue 5): E objects per PE, each running an OpenMP loop
// of T threads every step. The objects are a chare array (E x PEs
// elements, block map); a step broadcasts `work` to every element, each
// computes its units in `#pragma omp parallel for num_threads(T)` and
// contributes the sum; the main coroutine awaits the reduction and starts
// the next step. Time per step, median over steps and repeats.
//
// The same source is built twice:
//  - omp_oversub_weft links libweft-omp (weft::omp): every region's threads
//    are weft's PEs (fibers on them), so E x PEs regions at once share the
//    PEs;
//  - omp_oversub_gomp links libgomp: each PE that meets a region runs it
//    with libgomp's own threads (a pool per PE thread), so the process has
//    PEs x T threads competing for PEs cores.
// bench/run_all.sh runs both, interleaved, and report.py forms the ratio
// gomp / weft per round. Defaults: E = 4, T = 2 (the issue's "8 objects on
// 2 PEs each running an OpenMP loop of 2 threads").
#include <omp.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>
#include "common/harness.hpp"
#include "weft/base/timer.hpp"
#include "weft/weft.hpp"

#ifndef WEFT_OVERSUB_RUNTIME
#error "build with -DWEFT_OVERSUB_RUNTIME=\"weft\" or \"gomp\""
#endif

namespace {

const char* about =
    "omp_oversub: time per step of E objects per PE, each running `#pragma omp parallel for\n"
    "num_threads(T)` over its work units, then a sum reduction (built twice: linked with\n"
    "libweft-omp, and with libgomp). Flags:\n"
    "  --objects=E     objects per PE (default 4)\n"
    "  --omp-threads=T threads of each object's loop (default 2)\n"
    "  --units=N       work units per object per step (default 32)\n"
    "  --work=W        inner iterations of a unit (default 1000, ~2 us here)\n"
    "  --steps=S       steps per measurement (default 200)";

int g_omp_threads = 2;
long g_units = 64, g_work = 2000;

// A unit of work: W dependent floating-point updates, reproducible.
double unit(long object, long u) {
  double x = 1.0 + double((object * 131 + u) % 97) * 1e-3;
  for (long k = 0; k < g_work; ++k) x = x * 0.999999 + 1e-6;
  return x;
}

struct Worker : weft::array_element<Worker, int> {
  void work(long units, weft::callback<double> cb) {
    double sum = 0;
    const long me = this_index();
#pragma omp parallel for num_threads(g_omp_threads) reduction(+ : sum) schedule(static)
    for (long u = 0; u < units; ++u) sum += unit(me, u);
    contribute(sum, weft::op::sum, cb);
  }
};

double expected(long objects) {
  double s = 0;
  for (long o = 0; o < objects; ++o)
    for (long u = 0; u < g_units; ++u) s += unit(o, u);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  weft::bench::cli c = weft::bench::parse_cli(argc, argv, about);
  weft::bench::reject_unknown(c, {"objects", "omp-threads", "units", "work", "steps"});
  const int per_pe = int(weft::bench::positive_arg(c, "objects", 4, 1 << 16));
  g_omp_threads = int(weft::bench::positive_arg(c, "omp-threads", 2, 1024));
  g_units = weft::bench::positive_arg(c, "units", 32, 1 << 24);
  g_work = weft::bench::positive_arg(c, "work", 1000, 1 << 30);
  const long steps = weft::bench::positive_arg(c, "steps", 200, 1 << 24);
  std::vector<double> step_us;
  int pes = 0;
  const int rc = weft::run(argc, argv, [&](weft::args) -> weft::task<> {
    pes = weft::num_pes();
    const long objects = long(per_pe) * pes;
    const double want = expected(objects);
    auto workers = weft::array<Worker>::create(int(objects));
    for (int r = 0; r < c.repeat; ++r) {
      for (long s = -5; s < steps; ++s) {  // 5 warm-up steps
        const std::uint64_t t0 = weft::base::wall_ns();
        auto f = weft::make_future<double>();
        workers.broadcast<&Worker::work>(g_units, weft::callback<double>(f));
        const double got = co_await f;
        const std::uint64_t t1 = weft::base::wall_ns();
        if (std::fabs(got - want) > 1e-9 * std::fabs(want)) {
          std::fprintf(stderr, "omp_oversub: step sum %.17g, expected %.17g\n", got, want);
          weft::exit(1);
          co_return;
        }
        if (s >= 0) step_us.push_back(double(t1 - t0) / 1e3);
      }
    }
    weft::exit(0);
  });
  if (rc != 0) return rc;
  const weft::bench::summary s = weft::bench::summarize(step_us);
  weft::bench::reporter rep("omp_oversub", c.json);
  rep.row({{"runtime", std::string(WEFT_OVERSUB_RUNTIME)},
           {"pes", pes},
           {"objects_per_pe", per_pe},
           {"omp_threads", g_omp_threads},
           {"units", g_units},
           {"metric", "step_us"},
           {"value", s.median},
           {"spread", s.spread()}});
  return 0;
}
