// omp-test loop_lastprivate_conditional: lastprivate(conditional: x) on
// worksharing loops and sections (OpenMP 5.0).
//
// The original variable must end with the value assigned in the
// sequentially last iteration (or lexically last section) that assigned it,
// and keep its value when none did; checked against the serial loop for
// several assignment patterns (sparse, one early iteration only, none, all),
// several sizes, and the schedules dynamic, dynamic,7, monotonic:dynamic,3,
// guided, guided,5, runtime (set to dynamic,4, guided,2, static,3 and
// static through omp_set_schedule), static, static,4, ordered runtime,
// over long and unsigned long long (above LLONG_MAX), with two conditional
// variables on one loop. The loops count up: GCC 12.2 gets decreasing loops
// with a dynamic schedule wrong (an earlier iteration's value wins, with
// libgomp too), so there are none here.
//
// How GCC 12 lowers it decides which entry points run: an orphaned loop (a
// function called inside the parallel region, on a variable shared there)
// asks the runtime for per-thread memory, the `mem` argument of
// GOMP_loop_start / GOMP_loop_ull_start / GOMP_loop_ordered_start
// (GOMP_sections2_start for sections), even for schedule(static), then
// merges the threads' last iterations under GOMP_atomic_start/_end. A loop
// lexically inside `parallel` keeps that state in the region's data
// instead (GOMP_loop_dynamic_start etc., no mem); both forms are here.
#include <omp.h>

#include <vector>

#include "check.h"

namespace {

using ull = unsigned long long;

__attribute__((noipa)) long value(long i) { return 3 * i + 1; }

// GCC 12.2 miscompiles `x = value(i);` (a call's result stored straight
// into x) in a loop lexically inside `parallel`: the store escapes the
// conditional tracking, and x keeps its original value unless the last
// iteration assigns it. An assignment from a local is tracked: the loops
// compute `v = value(i)` first and assign `x = v`.

enum Pattern { kSparse, kEarlyOnly, kNone, kAll };
constexpr const char* kPatternNames[] = {"sparse", "early only", "none", "all"};

std::vector<int> make_flags(long n, Pattern pattern) {
  std::vector<int> f(n, 0);
  for (long i = 0; i < n; ++i) {
    switch (pattern) {
      case kSparse: f[i] = (i * i % 97) % 13 == 0 ? 1 : 0; break;
      case kEarlyOnly: f[i] = i == 3 ? 1 : 0; break;
      case kNone: f[i] = 0; break;
      case kAll: f[i] = 1 + (i & 1); break;
    }
  }
  // Sparse: nothing assigns in the last tenth, so the last iteration is not
  // the last assignment.
  if (pattern == kSparse) {
    for (long i = n - n / 10; i < n; ++i) f[i] = 0;
  }
  return f;
}

long serial_last(const std::vector<int>& f, long initial, int mask) {
  long last = initial;
  for (long i = 0; i < static_cast<long>(f.size()); ++i) {
    if (f[i] & mask) last = value(i);
  }
  return last;
}

// Orphaned loops, on namespace-scope variables (shared in every region).
// (A reference parameter works too, but GCC 12 then warns that its private
// copy may be used uninitialized.)
long g_last, g_odd, g_even;

__attribute__((noinline)) void loop_dynamic(long n, const int* f) {
#pragma omp for lastprivate(conditional : g_last) schedule(dynamic)
  for (long i = 0; i < n; ++i) {
    const long v = value(i);
    if (f[i]) g_last = v;
  }
}

__attribute__((noinline)) void loop_dynamic7(long n, const int* f) {
#pragma omp for lastprivate(conditional : g_last) schedule(dynamic, 7)
  for (long i = 0; i < n; ++i) {
    const long v = value(i);
    if (f[i]) g_last = v;
  }
}

__attribute__((noinline)) void loop_monotonic(long n, const int* f) {
#pragma omp for lastprivate(conditional : g_last) schedule(monotonic : dynamic, 3)
  for (long i = 0; i < n; ++i) {
    const long v = value(i);
    if (f[i]) g_last = v;
  }
}

__attribute__((noinline)) void loop_guided(long n, const int* f) {
#pragma omp for lastprivate(conditional : g_last) schedule(guided)
  for (long i = 0; i < n; ++i) {
    const long v = value(i);
    if (f[i]) g_last = v;
  }
}

__attribute__((noinline)) void loop_guided5(long n, const int* f) {
#pragma omp for lastprivate(conditional : g_last) schedule(guided, 5)
  for (long i = 0; i < n; ++i) {
    const long v = value(i);
    if (f[i]) g_last = v;
  }
}

__attribute__((noinline)) void loop_runtime(long n, const int* f) {
#pragma omp for lastprivate(conditional : g_last) schedule(runtime)
  for (long i = 0; i < n; ++i) {
    const long v = value(i);
    if (f[i]) g_last = v;
  }
}

__attribute__((noinline)) void loop_static(long n, const int* f) {
#pragma omp for lastprivate(conditional : g_last) schedule(static)
  for (long i = 0; i < n; ++i) {
    const long v = value(i);
    if (f[i]) g_last = v;
  }
}

__attribute__((noinline)) void loop_static4(long n, const int* f) {
#pragma omp for lastprivate(conditional : g_last) schedule(static, 4)
  for (long i = 0; i < n; ++i) {
    const long v = value(i);
    if (f[i]) g_last = v;
  }
}

// `seq` (shared) counts the ordered blocks, which run in iteration order.
__attribute__((noinline)) void loop_ordered(long n, const int* f, long& seq,
                                            int& order_bad) {
#pragma omp for lastprivate(conditional : g_last) schedule(runtime) ordered
  for (long i = 0; i < n; ++i) {
#pragma omp ordered
    {
      if (seq != i) order_bad = 1;
      seq = i + 1;
      const long v = value(i);
      if (f[i]) g_last = v;
    }
  }
}

// Over unsigned long long, above LLONG_MAX.
__attribute__((noinline)) void loop_ull(ull n, const int* f) {
  const ull base = (1ULL << 63) + 5;
#pragma omp for lastprivate(conditional : g_last) schedule(dynamic, 5)
  for (ull j = base; j < base + n; ++j) {
    const long i = static_cast<long>(j - base);
    const long v = value(i);
    if (f[i]) g_last = v;
  }
}

// Two conditional variables, assigned under different conditions.
__attribute__((noinline)) void loop_two(long n, const int* f) {
#pragma omp for lastprivate(conditional : g_odd, g_even) schedule(guided, 3)
  for (long i = 0; i < n; ++i) {
    const long v = value(i);
    if (f[i] & 1) g_odd = v;
    if (f[i] & 2) g_even = v;
  }
}

// GCC 12 warns (wrongly) that the sections' private copy of g_last may be
// used uninitialized: it is copied out only when a section assigned it.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((noinline)) void sections_orphaned(const int* f) {
#pragma omp sections lastprivate(conditional : g_last)
  {
#pragma omp section
    {
      const long v = value(0);
      if (f[0]) g_last = v;
    }
#pragma omp section
    {
      const long v = value(1);
      if (f[1]) g_last = v;
    }
#pragma omp section
    {
      const long v = value(2);
      if (f[2]) g_last = v;
    }
#pragma omp section
    {
      const long v = value(3);
      if (f[3]) g_last = v;
    }
  }
}
#pragma GCC diagnostic pop

using LoopFn = void (*)(long, const int*);

struct NamedLoop {
  const char* name;
  LoopFn fn;
  omp_sched_t runtime_kind;  // for schedule(runtime): set first
  int runtime_chunk;
};

void test_orphaned() {
  const NamedLoop loops[] = {
      {"dynamic", loop_dynamic, omp_sched_static, 0},
      {"dynamic,7", loop_dynamic7, omp_sched_static, 0},
      {"monotonic:dynamic,3", loop_monotonic, omp_sched_static, 0},
      {"guided", loop_guided, omp_sched_static, 0},
      {"guided,5", loop_guided5, omp_sched_static, 0},
      {"runtime=dynamic,4", loop_runtime, omp_sched_dynamic, 4},
      {"runtime=guided,2", loop_runtime, omp_sched_guided, 2},
      {"runtime=static,3", loop_runtime, omp_sched_static, 3},
      {"runtime=static", loop_runtime, omp_sched_static, 0},
      {"static", loop_static, omp_sched_static, 0},
      {"static,4", loop_static4, omp_sched_static, 0},
  };
  for (long n : {0L, 1L, 5L, 4000L}) {
    for (Pattern pattern : {kSparse, kEarlyOnly, kNone, kAll}) {
      const std::vector<int> f = make_flags(n, pattern);
      const long expected = serial_last(f, -7, 3);
      for (const NamedLoop& loop : loops) {
        g_last = -7;
        omp_set_schedule(loop.runtime_kind, loop.runtime_chunk);
#pragma omp parallel
        {
          probe_here();
          loop.fn(n, f.data());
        }
        CHECK_EQ(g_last, expected, "orphaned for lastprivate(conditional) schedule(%s), n=%ld, %s",
                 loop.name, n, kPatternNames[pattern]);
      }

      g_last = -7;
      long seq = 0;
      int order_bad = 0;
      omp_set_schedule(omp_sched_dynamic, 2);
#pragma omp parallel shared(seq, order_bad)
      {
        probe_here();
        loop_ordered(n, f.data(), seq, order_bad);
      }
      CHECK_EQ(g_last, expected,
               "orphaned for ordered lastprivate(conditional) schedule(runtime=dynamic,2), n=%ld, %s",
               n, kPatternNames[pattern]);
      CHECK_EQ(order_bad, 0, "orphaned for ordered: ordered blocks out of order, n=%ld", n);
      CHECK_EQ(seq, n, "orphaned for ordered: ordered blocks run, n=%ld", n);

      g_last = -7;
#pragma omp parallel
      {
        probe_here();
        loop_ull(static_cast<ull>(n), f.data());
      }
      CHECK_EQ(g_last, expected,
               "orphaned for lastprivate(conditional), unsigned long long, dynamic,5, n=%ld, %s", n,
               kPatternNames[pattern]);

      g_odd = -1;
      g_even = -2;
#pragma omp parallel
      {
        probe_here();
        loop_two(n, f.data());
      }
      CHECK_EQ(g_odd, serial_last(f, -1, 1),
               "orphaned for lastprivate(conditional: odd, even), odd, n=%ld, %s", n,
               kPatternNames[pattern]);
      CHECK_EQ(g_even, serial_last(f, -2, 2),
               "orphaned for lastprivate(conditional: odd, even), even, n=%ld, %s", n,
               kPatternNames[pattern]);
    }
  }
  omp_set_schedule(omp_sched_static, 0);
}

void test_nested_in_parallel() {
  for (long n : {0L, 5L, 4000L}) {
    for (Pattern pattern : {kSparse, kEarlyOnly, kNone}) {
      const std::vector<int> fv = make_flags(n, pattern);
      const int* f = fv.data();
      const long expected = serial_last(fv, -7, 3);
      long dynamic_last = -7, guided_last = -7, combined_last = -7;
#pragma omp parallel
      {
        probe_here();
#pragma omp for lastprivate(conditional : dynamic_last) schedule(dynamic, 3)
        for (long i = 0; i < n; ++i) {
          const long v = value(i);
          if (f[i]) dynamic_last = v;
        }
#pragma omp for lastprivate(conditional : guided_last) schedule(guided)
        for (long i = 0; i < n; ++i) {
          const long v = value(i);
          if (f[i]) guided_last = v;
        }
      }
#pragma omp parallel for lastprivate(conditional : combined_last) schedule(dynamic)
      for (long i = 0; i < n; ++i) {
        const long v = value(i);
        if (f[i]) combined_last = v;
      }
      CHECK_EQ(dynamic_last, expected,
               "for lastprivate(conditional) in parallel, dynamic,3, n=%ld, %s", n,
               kPatternNames[pattern]);
      CHECK_EQ(guided_last, expected, "for lastprivate(conditional) in parallel, guided, n=%ld, %s",
               n, kPatternNames[pattern]);
      CHECK_EQ(combined_last, expected,
               "parallel for lastprivate(conditional), dynamic, n=%ld, %s", n,
               kPatternNames[pattern]);
    }
  }
}

void test_sections() {
  // Which of the 4 sections assign: every combination.
  for (int mask = 0; mask < 16; ++mask) {
    int f[4];
    long expected = -7;
    for (int s = 0; s < 4; ++s) {
      f[s] = (mask >> s) & 1;
      if (f[s]) expected = value(s);
    }
    g_last = -7;
#pragma omp parallel
    {
      probe_here();
      sections_orphaned(f);
    }
    CHECK_EQ(g_last, expected, "orphaned sections lastprivate(conditional), sections assigning 0x%x",
             mask);
  }
}

}  // namespace

int main() {
  test_begin("loop_lastprivate_conditional");
  test_orphaned();
  test_nested_in_parallel();
  test_sections();
  return test_end();
}
