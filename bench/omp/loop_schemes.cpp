// The loop schemes of libweft-omp (docs/omp.md, "Loop schemes") against
// libgomp's static and dynamic schedules: microseconds per
// `#pragma omp parallel for schedule(runtime)` loop of --iters iterations,
// balanced (every iteration --work units) and imbalanced (iteration i costs
// 2 * work * i / iters: a triangle, so that with static blocks the last
// thread has most of the work). The schedule is OMP_SCHEDULE's (and, under
// libweft-omp, --weft:omp-scheme's / WEFT_OMP_SCHEME's): the program is
// run once per configuration, and bench/omp/loop_schemes.py runs them in
// interleaved rounds and puts the ratios side by side.
// A plain OpenMP program, built twice: omp_loop_schemes_weft is linked with
// libweft-omp, omp_loop_schemes_gomp with libgomp.
#include <omp.h>
#include <chrono>
#include <string>
#include <vector>
#include "common/harness.hpp"

#ifndef WEFT_OMP_RUNTIME
#error "build with -DWEFT_OMP_RUNTIME=\"weft\" or \"gomp\""
#endif

namespace {

// `units` rounds of a dependent multiply-add: compute only, no memory, so
// that the figures measure the schedule and not the caches.
inline double work(long units, double x) {
  for (long k = 0; k < units; ++k) x = x * 1.0000001 + 1e-9;
  return x;
}

double loops_us(long loops, long iters, long units, bool imbalanced, double& sink) {
  const auto t0 = std::chrono::steady_clock::now();
  for (long l = 0; l < loops; ++l) {
    double sum = 0;
#pragma omp parallel for schedule(runtime) reduction(+ : sum)
    for (long i = 0; i < iters; ++i) {
      const long u = imbalanced ? 2 * units * i / iters : units;
      sum += work(u, double(i));
    }
    sink += sum;
  }
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / double(loops);
}

}  // namespace

int main(int argc, char** argv) {
  weft::bench::cli c = weft::bench::parse_cli(
      argc, argv,
      "omp_loop_schemes: microseconds per `#pragma omp parallel for schedule(runtime)`\n"
      "loop, balanced and imbalanced (a triangle), OMP_NUM_THREADS threads, the schedule\n"
      "from OMP_SCHEDULE (and WEFT_OMP_SCHEME under libweft-omp).\n"
      "  --iters=N   iterations per loop (default 20000)\n"
      "  --work=N    units of work per iteration, balanced; the triangle's mean (default 200)\n"
      "  --loops=N   loops per measurement (default 40)");
  weft::bench::reject_unknown(c, {"iters", "work", "loops"});
  const long iters = weft::bench::positive_arg(c, "iters", 20000, 1'000'000'000);
  const long units = weft::bench::positive_arg(c, "work", 200, 1'000'000);
  const long loops = weft::bench::positive_arg(c, "loops", 40, 1'000'000);
  double sink = 0;
  loops_us(2, iters, units, false, sink);  // warm-up: starts the runtime's threads or node
  weft::bench::reporter rep("omp_loop_schemes", c.json);
  const char* env = std::getenv("OMP_SCHEDULE");
  const char* scheme = std::getenv("WEFT_OMP_SCHEME");
  for (bool imbalanced : {false, true}) {
    std::vector<double> us;
    for (int r = 0; r < c.repeat; ++r)
      us.push_back(loops_us(loops, iters, units, imbalanced, sink));
    const weft::bench::summary s = weft::bench::summarize(us);
    rep.row({{"runtime", std::string(WEFT_OMP_RUNTIME) == "weft" ? "libweft-omp" : "libgomp"},
             {"schedule", env != nullptr ? env : "(default)"},
             {"scheme", std::string(WEFT_OMP_RUNTIME) != "weft" ? "-"
                        : scheme != nullptr                     ? scheme
                                                                : "static"},
             {"threads", omp_get_max_threads()},
             {"loop", imbalanced ? "imbalanced" : "balanced"},
             {"metric", "loop_us"},
             {"value", s.median},
             {"spread", s.spread()}});
  }
  return sink == 12345.678 ? 1 : 0;  // keeps the work
}
