// Explicit OpenMP tasks, libweft-omp beside libgomp: microseconds per task
// for three patterns, all tasks created by one thread (`single`) of the
// default team:
//  - independent: empty tasks, then one taskwait (creation, queueing and
//    the run, or -- past 64 outstanding tasks per thread, in both runtimes --
//    a task run at once);
//  - chain: every task depend(inout) on one variable (the dependence graph
//    at its narrowest: each task waits for the one before);
//  - wavefront: a B x B grid, each cell depend(in) on its upper and left
//    neighbours and depend(inout) on itself (the graph with parallelism);
//  - recursive: Fibonacci as task benchmarks write it, two tasks and a
//    taskwait per call, `if(n > cutoff)`: deferred near the root, included
//    (run at once, as their own tasks) below the cutoff, where most are.
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
#pragma omp task depend(in                             \
                        : g[up], g[left]) depend(inout \
                                                 : g[i * b + j]) firstprivate(i, j, up, left)
      g[i * b + j] = 1 + (i > 0 ? g[up] : 0) + (j > 0 ? g[left] : 0);
    }
  const double us = us_per(t0, long(b) * b);
  // Cell (i, 0) is i + 1 once the cells above it ran first.
  if (g[std::size_t(b - 1) * std::size_t(b)] != (unsigned long)b)
    fail("wavefront: cell (%d, 0) is %lu, not %d", b - 1, g[std::size_t(b - 1) * std::size_t(b)],
         b);
  return us;
}

long fib_tasks(int n, int cutoff) {
  if (n < 2) return n;
  long a = 0, b = 0;
#pragma omp task shared(a) if (n > cutoff)
  a = fib_tasks(n - 1, cutoff);
#pragma omp task shared(b) if (n > cutoff)
  b = fib_tasks(n - 2, cutoff);
#pragma omp taskwait
  return a + b;
}

// Task constructs met by fib_tasks(n), and fib(n).
void fib_count(int n, long& tasks, long& value) {
  long f0 = 0, f1 = 1, calls0 = 1, calls1 = 1;  // calls of fib(0), fib(1)
  for (int k = 2; k <= n; ++k) {
    const long calls = 1 + calls1 + calls0;
    calls0 = calls1, calls1 = calls;
    const long f = f0 + f1;
    f0 = f1, f1 = f;
  }
  // Every call with n >= 2 makes two tasks: all calls but the leaves.
  const long leaves = (calls1 + 1) / 2;
  tasks = n < 2 ? 0 : 2 * (calls1 - leaves);
  value = n < 1 ? 0 : f1;
}

double recursive(int n, int cutoff) {
  long result = 0;
  const auto t0 = clock_type::now();
#pragma omp parallel
#pragma omp single
  result = fib_tasks(n, cutoff);
  long tasks = 0, value = 0;
  fib_count(n, tasks, value);
  const double us = us_per(t0, tasks);
  if (result != value) fail("recursive: fib(%d) is %ld, not %ld", n, result, value);
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
      "  --grid=B    side of the wavefront grid (default 100)\n"
      "  --fib=N     the recursive pattern's Fibonacci number (default 27)\n"
      "  --cutoff=C  ... and its cutoff: tasks of fib(n <= C) are included (default 15)");
  weft::bench::reject_unknown(c, {"tasks", "grid", "fib", "cutoff"});
  const long n = weft::bench::positive_arg(c, "tasks", 20000, 10'000'000);
  const int b = int(weft::bench::positive_arg(c, "grid", 100, 3000));
  const int fib_n = int(weft::bench::positive_arg(c, "fib", 27, 40));
  const int cutoff = int(weft::bench::positive_arg(c, "cutoff", 15, 40));
  // Warm-up: starts the runtime's threads or node.
  independent(1000);
  chain(1000);
  wavefront(20);
  recursive(15, 10);
  struct pattern {
    const char* name;
    std::vector<double> us;
  } patterns[] = {{"independent", {}}, {"chain", {}}, {"wavefront", {}}, {"recursive", {}}};
  for (int r = 0; r < c.repeat; ++r) {
    patterns[0].us.push_back(independent(n));
    patterns[1].us.push_back(chain(n));
    patterns[2].us.push_back(wavefront(b));
    patterns[3].us.push_back(recursive(fib_n, cutoff));
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
