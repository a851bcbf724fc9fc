// omp-test loops: worksharing loops (`parallel for` and `for` inside
// `parallel`).
//
// Every loop counts the executions of each logical iteration (each must run
// exactly once) and remembers which thread ran it, so that the schedules whose
// assignment OpenMP fixes are checked exactly: static (one contiguous chunk per
// thread in thread order, sizes within one), static with chunk c (chunk j on
// thread j mod n), dynamic with chunk c (whole aligned chunks of c), and
// monotonic schedules (each thread sees increasing iterations). Covered:
// schedule static / static,c / dynamic / dynamic,7 / monotonic and
// nonmonotonic modifiers / guided / runtime (set by omp_set_schedule and, with
// --env-schedule=<kind>,<chunk>, by OMP_SCHEDULE) / auto / none; int, long and
// unsigned long long induction variables (values above LLONG_MAX) counting up
// and down with unit and non-unit steps; empty ranges and ranges smaller than
// the team; collapse(2); ordered; nowait; lastprivate, firstprivate, linear;
// many nowait loops in a row; an orphaned `for`.
#include <omp.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check.h"

#define OMP_TEST_STR(x) #x
#define OMP_PRAGMA(x) _Pragma(OMP_TEST_STR(x))

namespace {

constexpr int kMaxTeam = 64;
constexpr long kSizes[] = {0, 1, 3, 100, 1001};
using ull = unsigned long long;

void pause(int rounds) {
  for (int k = 0; k < rounds; ++k) __asm__ __volatile__("" ::: "memory");
}

// Start of the int loops, not known to the compiler.
int lo_base() {
  static volatile int base = -37;
  return base;
}

// What a loop did: executions and (last) thread per logical iteration.
struct Record {
  std::vector<int> count;
  std::vector<int> owner;
  int team = 0;           // omp_get_num_threads() in the region
  int not_monotonic = 0;  // a thread saw a smaller index after a larger one
  long last[kMaxTeam];    // per thread: last index it ran (written by that thread)

  explicit Record(long n) : count(n), owner(n, -1) {
    for (long& l : last) l = -1;
  }

  // Called in the loop body with the logical iteration number.
  void hit(long k) {
    int t = omp_get_thread_num();
    count_hit(&count[k]);
    __atomic_store_n(&owner[k], t, __ATOMIC_RELAXED);
    __atomic_store_n(&team, omp_get_num_threads(), __ATOMIC_RELAXED);
    if (t < kMaxTeam) {
      if (k <= last[t]) __atomic_store_n(&not_monotonic, 1, __ATOMIC_RELAXED);
      last[t] = k;
    }
  }
  // Called once per thread at the start of a region body.
  void enter() {
    probe_here();
    __atomic_store_n(&team, omp_get_num_threads(), __ATOMIC_RELAXED);
  }
};

// What a schedule lets us check beyond "each iteration once".
enum Shape { kAny, kStaticEven, kStaticChunk, kBlocks };
struct Expect {
  Shape shape = kAny;
  long chunk = 0;
  bool monotonic = false;
};
constexpr Expect kOnce{};
constexpr Expect kStatic{kStaticEven, 0, true};
constexpr Expect static_chunk(long c) { return Expect{kStaticChunk, c, true}; }
constexpr Expect blocks(long c, bool monotonic) { return Expect{kBlocks, c, monotonic}; }

void check_loop(const std::string& label, const Record& r, const Expect& e) {
  const char* what = label.c_str();
  long n = static_cast<long>(r.count.size());
  if (!check_counts(r.count.data(), n, 1, "%s, n=%ld: each iteration once", what, n)) return;
  if (n == 0) return;
  if (!check_range(r.team, 1, kMaxTeam, "%s, n=%ld: team size", what, n)) return;
  if (e.monotonic) {
    CHECK_EQ(r.not_monotonic, 0, "%s, n=%ld: a thread ran a smaller iteration after a larger one",
             what, n);
  }
  switch (e.shape) {
    case kAny:
      break;
    case kStaticEven: {
      // Chunks in thread order, each thread one contiguous chunk, sizes within one.
      long per_thread[kMaxTeam] = {};
      for (long k = 0; k < n; ++k) {
        if (k > 0 && r.owner[k] < r.owner[k - 1]) {
          CHECK_EQ(r.owner[k], r.owner[k - 1],
                   "%s, n=%ld: schedule(static) thread of iteration %ld below that of %ld", what,
                   n, k, k - 1);
          return;
        }
        if (r.owner[k] >= 0 && r.owner[k] < kMaxTeam) ++per_thread[r.owner[k]];
      }
      long lo = n, hi = 0;
      for (int t = 0; t < r.team; ++t) {
        lo = per_thread[t] < lo ? per_thread[t] : lo;
        hi = per_thread[t] > hi ? per_thread[t] : hi;
      }
      check_range(hi - lo, 0, 1, "%s, n=%ld: schedule(static) chunk sizes differ (team %d)", what,
                  n, r.team);
      break;
    }
    case kStaticChunk:
      for (long k = 0; k < n; ++k) {
        long expected = (k / e.chunk) % r.team;
        if (!CHECK_EQ(r.owner[k], expected,
                      "%s, n=%ld: thread of iteration %ld (chunk %ld round-robin over %d)", what, n,
                      k, e.chunk, r.team)) {
          return;
        }
      }
      break;
    case kBlocks:
      for (long k = 0; k < n; ++k) {
        long first = k - k % e.chunk;
        if (!CHECK_EQ(r.owner[k], r.owner[first],
                      "%s, n=%ld: thread of iteration %ld vs %ld (chunks of %ld)", what, n, k,
                      first, e.chunk)) {
          return;
        }
      }
      break;
  }
}

// `for (int i = lo; i < lo + n; ++i)` as `parallel for` and as `for` in
// `parallel`, for every size of kSizes.
#define UNIT_LOOP_CASE(label, expect, clauses)                         \
  for (long n : kSizes) {                                              \
    const int lo = lo_base();                                          \
    const int hi = lo + static_cast<int>(n);                           \
    Record combined(n);                                                \
    OMP_PRAGMA(omp parallel for clauses)                               \
    for (int i = lo; i < hi; ++i) combined.hit(i - lo);                \
    check_loop(std::string(label) + " / parallel for", combined, expect); \
    Record inside(n);                                                  \
    OMP_PRAGMA(omp parallel) {                                         \
      inside.enter();                                                  \
      OMP_PRAGMA(omp for clauses)                                      \
      for (int i = lo; i < hi; ++i) inside.hit(i - lo);                \
    }                                                                  \
    check_loop(std::string(label) + " / for in parallel", inside, expect); \
  }

void test_unit_loops() {
  UNIT_LOOP_CASE("schedule(static)", kStatic, schedule(static))
  UNIT_LOOP_CASE("schedule(static,3)", static_chunk(3), schedule(static, 3))
  UNIT_LOOP_CASE("schedule(static,1)", static_chunk(1), schedule(static, 1))
  UNIT_LOOP_CASE("schedule(dynamic)", kOnce, schedule(dynamic))
  UNIT_LOOP_CASE("schedule(dynamic,7)", blocks(7, false), schedule(dynamic, 7))
  UNIT_LOOP_CASE("schedule(monotonic:dynamic,7)", blocks(7, true), schedule(monotonic : dynamic, 7))
  UNIT_LOOP_CASE("schedule(nonmonotonic:dynamic)", kOnce, schedule(nonmonotonic : dynamic))
  UNIT_LOOP_CASE("schedule(guided)", kOnce, schedule(guided))
  UNIT_LOOP_CASE("schedule(guided,5)", kOnce, schedule(guided, 5))
  UNIT_LOOP_CASE("schedule(monotonic:guided,5)", blocks(1, true), schedule(monotonic : guided, 5))
  UNIT_LOOP_CASE("schedule(auto)", kOnce, schedule(auto))
  UNIT_LOOP_CASE("no schedule clause", kOnce, )
}

// `parallel for` with bounds known at compile time: GCC then calls the
// combined GOMP_parallel_loop_* entry points (variable bounds give
// GOMP_parallel + GOMP_loop_*_start).
#define CONST_LOOP_CASE(label, expect, clauses)                          \
  {                                                                      \
    Record big(1000);                                                    \
    OMP_PRAGMA(omp parallel for clauses)                                 \
    for (int i = 0; i < 1000; ++i) big.hit(i);                           \
    check_loop(std::string(label) + " / parallel for, constant bounds", big, expect); \
    Record small(3);                                                     \
    OMP_PRAGMA(omp parallel for clauses)                                 \
    for (long i = 30; i > 0; i -= 10) small.hit((30 - i) / 10);          \
    check_loop(std::string(label) + " / parallel for, constant bounds", small, expect); \
    Record wide(5);                                                      \
    OMP_PRAGMA(omp parallel for clauses)                                 \
    for (ull i = 1ULL << 63; i < (1ULL << 63) + 5; ++i) wide.hit(static_cast<long>(i - (1ULL << 63))); \
    check_loop(std::string(label) + " / parallel for, constant ull bounds", wide, expect); \
  }

void test_constant_bounds() {
  CONST_LOOP_CASE("schedule(static)", kStatic, schedule(static))
  CONST_LOOP_CASE("schedule(static,3)", static_chunk(3), schedule(static, 3))
  CONST_LOOP_CASE("schedule(dynamic)", kOnce, schedule(dynamic))
  CONST_LOOP_CASE("schedule(dynamic,7)", blocks(7, false), schedule(dynamic, 7))
  CONST_LOOP_CASE("schedule(monotonic:dynamic,7)", blocks(7, true), schedule(monotonic : dynamic, 7))
  CONST_LOOP_CASE("schedule(guided)", kOnce, schedule(guided))
  CONST_LOOP_CASE("schedule(monotonic:guided,5)", blocks(1, true), schedule(monotonic : guided, 5))
  CONST_LOOP_CASE("schedule(runtime)", kOnce, schedule(runtime))
  CONST_LOOP_CASE("schedule(monotonic:runtime)", blocks(1, true), schedule(monotonic : runtime))
  CONST_LOOP_CASE("schedule(nonmonotonic:runtime)", kOnce, schedule(nonmonotonic : runtime))
  CONST_LOOP_CASE("schedule(auto)", kOnce, schedule(auto))
}

// run-sched-var set by omp_set_schedule, used by schedule(runtime).
void test_runtime_schedule() {
  struct Case {
    omp_sched_t kind;
    int chunk;
    Expect expect;
    const char* label;
  };
  const Case cases[] = {
      {omp_sched_static, 5, static_chunk(5), "omp_set_schedule(static,5)"},
      {omp_sched_static, 0, kStatic, "omp_set_schedule(static,0)"},
      {omp_sched_dynamic, 7, blocks(7, false), "omp_set_schedule(dynamic,7)"},
      {omp_sched_dynamic, 1, kOnce, "omp_set_schedule(dynamic,1)"},
      {omp_sched_guided, 3, kOnce, "omp_set_schedule(guided,3)"},
      {omp_sched_auto, 0, kOnce, "omp_set_schedule(auto)"},
  };
  for (const Case& c : cases) {
    omp_set_schedule(c.kind, c.chunk);
    omp_sched_t kind;
    int chunk;
    omp_get_schedule(&kind, &chunk);
    CHECK_EQ(kind & ~omp_sched_monotonic, c.kind, "%s: kind from omp_get_schedule", c.label);
    if (c.kind != omp_sched_auto && c.chunk > 0) {
      CHECK_EQ(chunk, c.chunk, "%s: chunk from omp_get_schedule", c.label);
    }
    UNIT_LOOP_CASE(std::string(c.label) + " schedule(runtime)", c.expect, schedule(runtime))
    Expect monotonic = c.expect;
    monotonic.monotonic = c.kind != omp_sched_auto;
    UNIT_LOOP_CASE(std::string(c.label) + " schedule(monotonic:runtime)", monotonic,
                   schedule(monotonic : runtime))
    Expect nonmonotonic = c.expect;
    nonmonotonic.monotonic = false;
    UNIT_LOOP_CASE(std::string(c.label) + " schedule(nonmonotonic:runtime)", nonmonotonic,
                   schedule(nonmonotonic : runtime))
  }
  omp_set_schedule(omp_sched_static, 0);
}

// OMP_SCHEDULE=<kind>,<chunk> in the environment (spec in `arg`).
void test_env_schedule(const char* arg) {
  std::string spec(arg);
  size_t comma = spec.find(',');
  std::string kind_name = spec.substr(0, comma);
  int expected_chunk = comma == std::string::npos ? 0 : std::atoi(spec.c_str() + comma + 1);
  omp_sched_t expected_kind = kind_name == "static"    ? omp_sched_static
                              : kind_name == "dynamic" ? omp_sched_dynamic
                              : kind_name == "guided"  ? omp_sched_guided
                                                       : omp_sched_auto;
  omp_sched_t kind;
  int chunk;
  omp_get_schedule(&kind, &chunk);
  const char* env = std::getenv("OMP_SCHEDULE");
  CHECK_EQ(kind & ~omp_sched_monotonic, expected_kind,
           "OMP_SCHEDULE=%s: kind from omp_get_schedule", env ? env : "(unset)");
  if (expected_chunk > 0) {
    CHECK_EQ(chunk, expected_chunk, "OMP_SCHEDULE=%s: chunk from omp_get_schedule",
             env ? env : "(unset)");
  }
  Expect expect = kOnce;
  if (expected_kind == omp_sched_static) {
    expect = expected_chunk > 0 ? static_chunk(expected_chunk) : kStatic;
  } else if (expected_kind == omp_sched_dynamic && expected_chunk > 0) {
    expect = blocks(expected_chunk, false);
  }
  UNIT_LOOP_CASE("OMP_SCHEDULE=" + spec + " schedule(runtime)", expect, schedule(runtime))
}

// `for (long i = hi; i > lo; i -= 3)`: negative step.
#define DOWN_LOOP_CASE(label, expect, clauses)                              \
  for (long n : kSizes) {                                                   \
    const long lo = lo_base() * 1000L;                                      \
    const long hi = lo + 3 * n;                                             \
    Record combined(n);                                                     \
    OMP_PRAGMA(omp parallel for clauses)                                    \
    for (long i = hi; i > lo; i -= 3) combined.hit((hi - i) / 3);           \
    check_loop(std::string(label) + " step -3 / parallel for", combined, expect); \
    Record inside(n);                                                       \
    OMP_PRAGMA(omp parallel) {                                              \
      inside.enter();                                                       \
      OMP_PRAGMA(omp for clauses)                                           \
      for (long i = hi; i > lo; i -= 3) inside.hit((hi - i) / 3);           \
    }                                                                       \
    check_loop(std::string(label) + " step -3 / for in parallel", inside, expect); \
  }

// `for (int i = lo; i < hi; i += 5)` with hi not on the step.
#define STEP_LOOP_CASE(label, expect, clauses)                              \
  for (long n : kSizes) {                                                   \
    const int lo = lo_base();                                               \
    const int hi = n == 0 ? lo : lo + 5 * static_cast<int>(n) - 2;         \
    Record combined(n);                                                     \
    OMP_PRAGMA(omp parallel for clauses)                                    \
    for (int i = lo; i < hi; i += 5) combined.hit((i - lo) / 5);            \
    check_loop(std::string(label) + " step 5 / parallel for", combined, expect); \
    Record inside(n);                                                       \
    OMP_PRAGMA(omp parallel) {                                              \
      inside.enter();                                                       \
      OMP_PRAGMA(omp for clauses)                                           \
      for (int i = lo; i < hi; i += 5) inside.hit((i - lo) / 5);            \
    }                                                                       \
    check_loop(std::string(label) + " step 5 / for in parallel", inside, expect); \
  }

void test_steps() {
  DOWN_LOOP_CASE("schedule(static)", kStatic, schedule(static))
  DOWN_LOOP_CASE("schedule(static,2)", static_chunk(2), schedule(static, 2))
  DOWN_LOOP_CASE("schedule(dynamic,4)", blocks(4, false), schedule(dynamic, 4))
  DOWN_LOOP_CASE("schedule(monotonic:dynamic)", blocks(1, true), schedule(monotonic : dynamic))
  DOWN_LOOP_CASE("schedule(guided)", kOnce, schedule(guided))
  DOWN_LOOP_CASE("schedule(runtime)", kOnce, schedule(runtime))
  STEP_LOOP_CASE("schedule(static)", kStatic, schedule(static))
  STEP_LOOP_CASE("schedule(static,4)", static_chunk(4), schedule(static, 4))
  STEP_LOOP_CASE("schedule(dynamic,3)", blocks(3, false), schedule(dynamic, 3))
  STEP_LOOP_CASE("schedule(guided,2)", kOnce, schedule(guided, 2))
}

// unsigned long long induction variables above LLONG_MAX (GCC calls the
// GOMP_loop_ull_* entry points for the non-static schedules).
ull ull_base() {
  static volatile ull base = (1ULL << 63) + 12345;
  return base;
}

#define ULL_LOOP_CASE(label, expect, clauses)                                  \
  for (long n : kSizes) {                                                      \
    const ull lo = ull_base();                                                 \
    const ull hi = lo + 4 * static_cast<ull>(n);                               \
    Record up(n);                                                              \
    OMP_PRAGMA(omp parallel for clauses)                                       \
    for (ull i = lo; i < hi; i += 4) up.hit(static_cast<long>((i - lo) / 4));   \
    check_loop(std::string(label) + " ull step 4 / parallel for", up, expect); \
    Record down(n);                                                            \
    OMP_PRAGMA(omp parallel) {                                                 \
      down.enter();                                                            \
      OMP_PRAGMA(omp for clauses)                                              \
      for (ull i = lo + n; i > lo; --i) down.hit(static_cast<long>(lo + n - i)); \
    }                                                                          \
    check_loop(std::string(label) + " ull step -1 / for in parallel", down, expect); \
  }

void test_ull() {
  ULL_LOOP_CASE("schedule(static)", kStatic, schedule(static))
  ULL_LOOP_CASE("schedule(static,3)", static_chunk(3), schedule(static, 3))
  ULL_LOOP_CASE("schedule(dynamic)", kOnce, schedule(dynamic))
  ULL_LOOP_CASE("schedule(dynamic,7)", blocks(7, false), schedule(dynamic, 7))
  ULL_LOOP_CASE("schedule(monotonic:dynamic,7)", blocks(7, true), schedule(monotonic : dynamic, 7))
  ULL_LOOP_CASE("schedule(guided)", kOnce, schedule(guided))
  ULL_LOOP_CASE("schedule(monotonic:guided)", blocks(1, true), schedule(monotonic : guided))
  ULL_LOOP_CASE("schedule(runtime)", kOnce, schedule(runtime))
  ULL_LOOP_CASE("schedule(monotonic:runtime)", blocks(1, true), schedule(monotonic : runtime))
  ULL_LOOP_CASE("schedule(nonmonotonic:runtime)", kOnce, schedule(nonmonotonic : runtime))
  ULL_LOOP_CASE("schedule(auto)", kOnce, schedule(auto))
}

// collapse(2) over rows x cols, including empty dimensions; the inner loop
// counts down by 2.
#define COLLAPSE_CASE(label, expect, clauses)                                   \
  for (const auto& shape : shapes) {                                            \
    const long rows = shape[0], cols = shape[1], n = rows * cols;               \
    Record combined(n);                                                         \
    OMP_PRAGMA(omp parallel for collapse(2) clauses)                            \
    for (long i = 0; i < rows; ++i)                                             \
      for (long j = 2 * cols; j > 0; j -= 2) combined.hit(i * cols + (2 * cols - j) / 2); \
    check_loop(std::string(label) + " collapse(2) " + std::to_string(rows) + "x" + \
                   std::to_string(cols) + " / parallel for",                    \
               combined, expect);                                               \
    Record inside(n);                                                           \
    OMP_PRAGMA(omp parallel) {                                                  \
      inside.enter();                                                           \
      OMP_PRAGMA(omp for collapse(2) clauses)                                   \
      for (long i = 0; i < rows; ++i)                                           \
        for (long j = 2 * cols; j > 0; j -= 2) inside.hit(i * cols + (2 * cols - j) / 2); \
    }                                                                           \
    check_loop(std::string(label) + " collapse(2) " + std::to_string(rows) + "x" + \
                   std::to_string(cols) + " / for in parallel",                 \
               inside, expect);                                                 \
  }

void test_collapse() {
  static volatile long dims[][2] = {{0, 5}, {5, 0}, {1, 1}, {1, 3}, {3, 7}, {17, 13}};
  std::vector<std::array<long, 2>> shapes;
  for (auto& d : dims) shapes.push_back({d[0], d[1]});
  COLLAPSE_CASE("schedule(static)", kStatic, schedule(static))
  COLLAPSE_CASE("schedule(static,4)", static_chunk(4), schedule(static, 4))
  COLLAPSE_CASE("schedule(dynamic,3)", blocks(3, false), schedule(dynamic, 3))
  COLLAPSE_CASE("schedule(guided)", kOnce, schedule(guided))
  COLLAPSE_CASE("schedule(runtime)", kOnce, schedule(runtime))
}

// `ordered`: the ordered blocks run in iteration order. Fewer iterations
// than elsewhere: each one is a hand-off between threads, slow when they
// share cores.
constexpr long kOrderedSizes[] = {0, 1, 3, 64};

#define ORDERED_CASE(label, clauses)                                             \
  for (long n : kOrderedSizes) {                                                 \
    std::vector<long> order;                                                     \
    order.reserve(n);                                                            \
    Record r(n);                                                                 \
    OMP_PRAGMA(omp parallel for ordered clauses)                                 \
    for (long i = 0; i < n; ++i) {                                               \
      r.hit(i);                                                                  \
      OMP_PRAGMA(omp ordered)                                                    \
      order.push_back(i);                                                        \
    }                                                                            \
    check_loop(std::string(label) + " ordered", r, kOnce);                       \
    bool in_order = static_cast<long>(order.size()) == n;                        \
    for (long k = 0; in_order && k < n; ++k) in_order = order[k] == k;           \
    check_true(in_order, "%s ordered, n=%ld: ordered blocks ran in iteration order", label, n); \
  }

#define ULL_ORDERED_CASE(label, clauses)                                         \
  for (long n : kOrderedSizes) {                                                 \
    std::vector<long> order;                                                     \
    const ull lo = ull_base();                                                   \
    Record r(n);                                                                 \
    OMP_PRAGMA(omp parallel) {                                                   \
      r.enter();                                                                 \
      OMP_PRAGMA(omp for ordered clauses)                                        \
      for (ull i = lo; i < lo + n; ++i) {                                        \
        r.hit(static_cast<long>(i - lo));                                        \
        OMP_PRAGMA(omp ordered)                                                  \
        order.push_back(static_cast<long>(i - lo));                              \
      }                                                                          \
    }                                                                            \
    check_loop(std::string(label) + " ull ordered", r, kOnce);                   \
    bool in_order = static_cast<long>(order.size()) == n;                        \
    for (long k = 0; in_order && k < n; ++k) in_order = order[k] == k;           \
    check_true(in_order, "%s ull ordered, n=%ld: ordered blocks ran in iteration order", label, n); \
  }

void test_ordered() {
  ORDERED_CASE("schedule(static)", schedule(static))
  ORDERED_CASE("schedule(static,2)", schedule(static, 2))
  ORDERED_CASE("schedule(dynamic,3)", schedule(dynamic, 3))
  ORDERED_CASE("schedule(guided)", schedule(guided))
  ORDERED_CASE("schedule(runtime)", schedule(runtime))
  ULL_ORDERED_CASE("schedule(static)", schedule(static))
  ULL_ORDERED_CASE("schedule(dynamic)", schedule(dynamic))
  ULL_ORDERED_CASE("schedule(guided,2)", schedule(guided, 2))
  ULL_ORDERED_CASE("schedule(runtime)", schedule(runtime))
}

// nowait: two static loops with the same iteration space give each thread
// the same iterations, so the second may read what the first wrote without a
// barrier; and many dynamic nowait loops in a row (threads in different loops
// at once).
void test_nowait() {
  for (long n : kSizes) {
    std::vector<long> a(n, -1), b(n, -1), c(n, -1), d(n, -1);
    OMP_PRAGMA(omp parallel) {
      probe_here();
      // Thread 0 writes slowly: a thread given one of its iterations in
      // the second loop would read before the write.
      const bool slow = omp_get_thread_num() == 0;
      OMP_PRAGMA(omp for schedule(static) nowait)
      for (long i = 0; i < n; ++i) {
        if (slow) pause(2000);
        __atomic_store_n(&a[i], 2 * i + 1, __ATOMIC_RELAXED);
      }
      OMP_PRAGMA(omp for schedule(static) nowait)
      for (long i = 0; i < n; ++i) b[i] = __atomic_load_n(&a[i], __ATOMIC_RELAXED) + 1;
      OMP_PRAGMA(omp for schedule(static, 3) nowait)
      for (long i = 0; i < n; ++i) {
        if (slow) pause(2000);
        __atomic_store_n(&c[i], 3 * i, __ATOMIC_RELAXED);
      }
      OMP_PRAGMA(omp for schedule(static, 3) nowait)
      for (long i = 0; i < n; ++i) d[i] = __atomic_load_n(&c[i], __ATOMIC_RELAXED) - 1;
    }
    for (int pair = 0; pair < 2; ++pair) {
      const std::vector<long>& v = pair == 0 ? b : d;
      long wrong = 0, first = -1;
      for (long i = 0; i < n; ++i) {
        if (v[i] != (pair == 0 ? 2 * i + 2 : 3 * i - 1)) {
          if (first < 0) first = i;
          ++wrong;
        }
      }
      if (wrong > 0) {
        CHECK_EQ(v[first], pair == 0 ? 2 * first + 2 : 3 * first - 1,
                 "two schedule(%s) nowait loops, n=%ld: value at %ld (%ld wrong)",
                 pair == 0 ? "static" : "static,3", n, first, wrong);
      }
    }
  }

  constexpr int kLoops = 24;
  constexpr long kN = 257;
  std::vector<Record> records;
  records.reserve(kLoops);
  for (int l = 0; l < kLoops; ++l) records.emplace_back(kN);
  int after_barrier_bad = 0;
  OMP_PRAGMA(omp parallel) {
    records[0].enter();
    for (int l = 0; l < kLoops; ++l) {
      if (l % 3 == 0) {
        OMP_PRAGMA(omp for schedule(dynamic) nowait)
        for (long i = 0; i < kN; ++i) records[l].hit(i);
      } else if (l % 3 == 1) {
        OMP_PRAGMA(omp for schedule(guided, 2) nowait)
        for (long i = 0; i < kN; ++i) records[l].hit(i);
      } else {
        OMP_PRAGMA(omp for schedule(dynamic, 5) nowait)
        for (long i = 0; i < kN; ++i) records[l].hit(i);
      }
    }
    OMP_PRAGMA(omp barrier)
    // After the barrier every loop is complete.
    for (int l = 0; l < kLoops; ++l) {
      for (long i = 0; i < kN; ++i) {
        if (__atomic_load_n(&records[l].count[i], __ATOMIC_RELAXED) != 1) {
          __atomic_store_n(&after_barrier_bad, 1, __ATOMIC_RELAXED);
        }
      }
    }
  }
  CHECK_EQ(after_barrier_bad, 0, "nowait loops: an iteration not done (once) after the barrier");
  for (int l = 0; l < kLoops; ++l) {
    check_loop("nowait loop " + std::to_string(l) + " of " + std::to_string(kLoops), records[l],
               l % 3 == 2 ? blocks(5, false) : kOnce);
  }
}

void orphaned_for(Record& r, long n) {
  OMP_PRAGMA(omp for schedule(dynamic, 2))
  for (long i = 0; i < n; ++i) r.hit(i);
}

void test_clauses() {
  for (long n : kSizes) {
    // lastprivate: the value of the sequentially last iteration. Not for
    // n = 0, with either schedule: GCC's code copies a thread's private
    // value out when its counter ends equal to n, and with no iteration
    // every thread's counter is 0, so every thread copies its (unset)
    // value out: a race of the compiled code itself, which
    // ThreadSanitizer reports whatever the runtime (seen in CI).
    long last = -5;
    if (n > 0) {
      OMP_PRAGMA(omp parallel for schedule(dynamic, 3) lastprivate(last))
      for (long i = 0; i < n; ++i) last = 2 * i;
      CHECK_EQ(last, 2 * (n - 1), "lastprivate with schedule(dynamic,3), n=%ld", n);
    }

    long static_last = -5;
    if (n > 0) {
      OMP_PRAGMA(omp parallel for schedule(static) lastprivate(static_last))
      for (long i = 0; i < n; ++i) static_last = 3 * i;
      CHECK_EQ(static_last, 3 * (n - 1), "lastprivate with schedule(static), n=%ld", n);
    }

    // firstprivate: every thread's copy starts with the original value.
    long first = 77;
    int bad_first = 0;
    OMP_PRAGMA(omp parallel for schedule(guided) firstprivate(first))
    for (long i = 0; i < n; ++i) {
      if (first < 77) __atomic_store_n(&bad_first, 1, __ATOMIC_RELAXED);
      first += 1;  // the thread's own copy only grows
    }
    CHECK_EQ(bad_first, 0, "firstprivate copy below the original, n=%ld", n);
    CHECK_EQ(first, 77, "firstprivate original changed, n=%ld", n);

    // linear: j == 10 + 3 * i in every iteration. Not for n = 0, where
    // GCC's code copies j out of every thread (as lastprivate above).
    if (n > 0) {
      long j = 10;
      int bad_linear = 0;
      OMP_PRAGMA(omp parallel for linear(j : 3))
      for (long i = 0; i < n; ++i) {
        if (j != 10 + 3 * i) __atomic_store_n(&bad_linear, 1, __ATOMIC_RELAXED);
        j += 3;
      }
      CHECK_EQ(bad_linear, 0, "linear(j:3): j != 10 + 3*i in an iteration, n=%ld", n);
      CHECK_EQ(j, 10 + 3 * n, "linear(j:3): value after the loop, n=%ld", n);
    }

    // parallel for with num_threads: at most 3 threads.
    Record few(n);
    OMP_PRAGMA(omp parallel for num_threads(3) schedule(dynamic, 2))
    for (long i = 0; i < n; ++i) few.hit(i);
    check_loop("parallel for num_threads(3) schedule(dynamic,2)", few, blocks(2, false));
    if (n > 0) check_range(few.team, 1, 3, "parallel for num_threads(3), n=%ld: team size", n);

    // An orphaned `for` in a function called from the region.
    Record r(n);
    OMP_PRAGMA(omp parallel) {
      r.enter();
      orphaned_for(r, n);
    }
    check_loop("orphaned for schedule(dynamic,2)", r, blocks(2, false));
  }
}

}  // namespace

int main(int argc, char** argv) {
  test_begin("loops");
  // OMP_SCHEDULE must be checked before anything calls omp_set_schedule.
  const char* prefix = "--env-schedule=";
  for (int a = 1; a < argc; ++a) {
    if (std::strncmp(argv[a], prefix, std::strlen(prefix)) == 0) {
      test_env_schedule(argv[a] + std::strlen(prefix));
    } else {
      std::printf("omp-test loops: FAIL: unknown argument '%s'\n", argv[a]);
      return 2;
    }
  }
  test_unit_loops();
  test_constant_bounds();
  test_runtime_schedule();
  test_steps();
  test_ull();
  test_collapse();
  test_ordered();
  test_nowait();
  test_clauses();
  return test_end();
}
