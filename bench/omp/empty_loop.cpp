// Empty-loop overhead of `#pragma omp parallel for` (issue 5's first
// benchmark, OpenMP side): microseconds per empty loop of one iteration per
// thread, over all threads of the default team. A plain OpenMP program,
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

}  // namespace

int main(int argc, char** argv) {
  weft::bench::cli c = weft::bench::parse_cli(
      argc, argv,
      "omp_empty_loop: microseconds per empty `#pragma omp parallel for` (one iteration per\n"
      "thread), OMP_NUM_THREADS threads (default: the cores).\n"
      "  --loops=N   loops per measurement (default 2000)");
  weft::bench::reject_unknown(c, {"loops"});
  const long loops = weft::bench::positive_arg(c, "loops", 2000, 100'000'000);
  empty_loops_us(loops);  // warm-up: starts the runtime's threads or node
  std::vector<double> us;
  for (int r = 0; r < c.repeat; ++r) us.push_back(empty_loops_us(loops));
  const weft::bench::summary s = weft::bench::summarize(us);
  weft::bench::reporter rep("omp_empty_loop", c.json);
  rep.row({{"runtime", std::string(WEFT_OMP_RUNTIME) == "weft" ? "libweft-omp" : "libgomp"},
           {"threads", omp_get_max_threads()},
           {"metric", "loop_us"},
           {"value", s.median},
           {"spread", s.spread()}});
  return 0;
}
