// Explicit OpenMP tasks, libweft-omp beside libgomp: microseconds per task
// for three patterns, all tasks created by one thread (`single`) of the
// default team:
//  - independent: empty tasks, then one taskwait (creation, queueing and
//    the run, or -- past 64 outstanding tasks per thread, in both runtimes --
//    a task run at once);
//  - chain: every task depend(inout) on one variable (the dependence graph
//    at its narrowest: each task waits for the one before);
//  - wavefront: a B x B grid, each cell depend(in) on its upper and left
//    neighbours and depend(inout) on itself (the graph with parallelism).
// A plain OpenMP program built twice, as omp_empty_loop; bench/run_all.sh
// runs the two builds interleaved per round.
#include <omp.h>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "common/harness.hpp"

#ifndef WEFT_OMP_RUNTIME
#error "build with -DWEFT_OMP_RUNTIME=\"weft\" or \"gomp\""
#endif

namespace {

using clock_type = std::chrono::steady_clock;

// A wrong result: the runtime lost or misordered tasks.
[[noreturn]] __attribute__((format(printf, 1, 2))) void fail(const char* fmt, ...) {
  std::va_list ap;
  va_start(ap, fmt);
  std::fputs("omp_tasks: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
  std::exit(1);
}

double us_per(clock_type::time_point t0, long tasks) {
  return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count() / double(tasks);
}

double independent(long n) {
  long done = 0;
  const auto t0 = clock_type::now();
#pragma omp parallel
#pragma omp single
  {
    for (long k = 0; k < n; ++k) {
#pragma omp task shared(done)
      __atomic_fetch_add(&done, 1, __ATOMIC_RELAXED);
    }
#pragma omp taskwait
  }
  const double us = us_per(t0, n);
  if (done != n) fail("independent: %ld of %ld tasks ran", done, n);
  return us;
}

double chain(long n) {
  long x = 0;
  const auto t0 = clock_type::now();
#pragma omp parallel
#pragma omp single
  for (long k = 0; k < n; ++k) {
#pragma omp task depend(inout : x) shared(x)
    ++x;
  }
  const double us = us_per(t0, n);
  if (x != n) fail("chain: %ld of %ld tasks ran", x, n);
  return us;
}

double wavefront(int b) {
  // Unsigned: cell counts grow as binomials and wrap.
  std::vector<unsigned long> grid(std::size_t(b) * std::size_t(b), 0);
  unsigned long* g = grid.data();
  const auto t0 = clock_type::now();
#pragma omp parallel
#pragma omp single
  for (int i = 0; i < b; ++i)
    for (int j = 0; j < b; ++j) {
      const int up = (i > 0 ? i - 1 : i) * b + j, left = i * b + (j > 0 ? j - 1 : j);
#pragma omp task depend(in : g[up], g[left]) depend(inout : g[i * b + j]) firstprivate(i, j, up, left)
      g[i * b + j] = 1 + (i > 0 ? g[up] : 0) + (j > 0 ? g[left] : 0);
    }
  const double us = us_per(t0, long(b) * b);
  // Cell (i, 0) is i + 1 once the cells above it ran first.
  if (g[std::size_t(b - 1) * std::size_t(b)] != (unsigned long)b)
    fail("wavefront: cell (%d, 0) is %lu, not %d", b - 1, g[std::size_t(b - 1) * std::size_t(b)], b);
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  weft::bench::cli c = weft::bench::parse_cli(
      argc, argv,
      "omp_tasks: microseconds per explicit OpenMP task, created by one thread: independent\n"
      "tasks, a depend(inout) chain, and a B x B wavefront of depend(in/inout) tasks;\n"
      "OMP_NUM_THREADS threads (default: the cores).\n"
      "  --tasks=N   tasks of the independent and chain patterns (default 20000)\n"
      "  --grid=B    side of the wavefront grid (default 100)");
  weft::bench::reject_unknown(c, {"tasks", "grid"});
  const long n = weft::bench::positive_arg(c, "tasks", 20000, 10'000'000);
  const int b = int(weft::bench::positive_arg(c, "grid", 100, 3000));
  // Warm-up: starts the runtime's threads or node.
  independent(1000);
  chain(1000);
  wavefront(20);
  struct pattern {
    const char* name;
    std::vector<double> us;
  } patterns[] = {{"independent", {}}, {"chain", {}}, {"wavefront", {}}};
  for (int r = 0; r < c.repeat; ++r) {
    patterns[0].us.push_back(independent(n));
    patterns[1].us.push_back(chain(n));
    patterns[2].us.push_back(wavefront(b));
  }
  weft::bench::reporter rep("omp_tasks", c.json);
  for (const pattern& p : patterns) {
    const weft::bench::summary s = weft::bench::summarize(p.us);
    rep.row({{"runtime", std::string(WEFT_OMP_RUNTIME) == "weft" ? "libweft-omp" : "libgomp"},
             {"threads", omp_get_max_threads()},
             {"pattern", p.name},
             {"metric", "task_us"},
             {"value", s.median},
             {"spread", s.spread()}});
  }
  return 0;
}
