// Empty-loop overhead of `#pragma omp parallel for` (issue 5's first
// benchmark, OpenMP side): microseconds per empty loop of one iteration per
// thread, over all threads of the default team. --construct=parallel times
// an empty `#pragma omp parallel` instead, --construct=barrier a
// `#pragma omp barrier` inside one region (issue 25). A plain OpenMP program,
// built twice: omp_empty_loop_weft is linked with libweft-omp.so (its first
// region starts an attached weft node), omp_empty_loop_gomp with libgomp.
// bench/run_all.sh runs both beside tasks_overhead (weft::parallel_for's
// schemes, libgomp and oneTBB inside one program), and report.py puts them
// in one table.
#include <omp.h>
#include <chrono>
#include <string>
#include <vector>
#include "common/harness.hpp"

#ifndef WEFT_OMP_RUNTIME
#error "build with -DWEFT_OMP_RUNTIME=\"weft\" or \"gomp\""
#endif

namespace {

double empty_loops_us(long loops) {
  const int n = omp_get_max_threads();
  const auto t0 = std::chrono::steady_clock::now();
  for (long k = 0; k < loops; ++k) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < n; ++i) asm volatile("" ::: "memory");
  }
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / double(loops);
}

double empty_regions_us(long regions) {
  const auto t0 = std::chrono::steady_clock::now();
  for (long k = 0; k < regions; ++k) {
#pragma omp parallel
    asm volatile("" ::: "memory");
  }
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / double(regions);
}

// Thread 0's time from the first barrier to the last, per barrier.
double barriers_us(long barriers) {
  double us = 0;
#pragma omp parallel
  {
#pragma omp barrier
    const auto t0 = std::chrono::steady_clock::now();
    for (long k = 0; k < barriers; ++k) {
#pragma omp barrier
    }
#pragma omp master
    us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
         double(barriers);
  }
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  weft::bench::cli c = weft::bench::parse_cli(
      argc, argv,
      "omp_empty_loop: microseconds per empty `#pragma omp parallel for` (one iteration per\n"
      "thread), OMP_NUM_THREADS threads (default: the cores).\n"
      "  --loops=N   loops (regions, barriers) per measurement (default 2000)\n"
      "  --construct=for|parallel|barrier   what is timed (default for)");
  weft::bench::reject_unknown(c, {"loops", "construct"});
  const long loops = weft::bench::positive_arg(c, "loops", 2000, 100'000'000);
  const std::string construct = weft::bench::arg(c, "construct", "for");
  double (*measure)(long) = construct == "for"        ? &empty_loops_us
                            : construct == "parallel" ? &empty_regions_us
                            : construct == "barrier"  ? &barriers_us
                                                      : nullptr;
  if (measure == nullptr) {
    std::fprintf(stderr, "error: --construct=%s: expected for, parallel or barrier\n",
                 construct.c_str());
    return 2;
  }
  measure(loops);  // warm-up: starts the runtime's threads or node
  std::vector<double> us;
  for (int r = 0; r < c.repeat; ++r) us.push_back(measure(loops));
  const weft::bench::summary s = weft::bench::summarize(us);
  weft::bench::reporter rep("omp_empty_loop", c.json);
  rep.row({{"runtime", std::string(WEFT_OMP_RUNTIME) == "weft" ? "libweft-omp" : "libgomp"},
           {"threads", omp_get_max_threads()},
           {"metric", construct == "for"        ? "loop_us"
                      : construct == "parallel" ? "region_us"
                                                : "barrier_us"},
           {"value", s.median},
           {"spread", s.spread()}});
  return 0;
}
