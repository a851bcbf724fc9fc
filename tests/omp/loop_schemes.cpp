// omp-test loop_schemes: loops scheduled at run time (schedule(runtime))
// as libweft-omp's idle-counter and history schemes run them
// (--weft:omp-scheme, OMP_SCHEDULE=weft_idle|weft_history; docs/omp.md,
// "Loop schemes"), and as libgomp runs the same program under
// OMP_SCHEDULE=static, which validates it. Teams of 1, 2, 3, 4 and 8
// threads (more than the PEs), bodies balanced and imbalanced (the first
// quarter of the iterations costs more), each loop many times at one call
// site (history learns):
//  - every iteration runs exactly once, over long and unsigned long long
//    spaces counting up and down with steps of 1 and 3, in `for` and the
//    combined `parallel for`, with empty loops and loops shorter than the
//    team;
//  - nowait loops one after another, then a barrier;
//  - lastprivate takes the last iteration's value, a reduction the sum;
//  - ordered loops (which keep their own path) run their ordered regions
//    in order;
//  - --expect-kind=K: omp_get_schedule reports kind K (weft_idle and
//    weft_history are static schedules).
#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "check.h"

namespace {

const int kTeams[] = {1, 2, 3, 4, 8};
const long kSizes[] = {0, 1, 5, 64, 1001};
constexpr int kRepeats = 2;

// Work the imbalanced bodies do on a quarter of the iterations.
void spin_work(long i) {
  volatile unsigned long x = (unsigned long)i;
  for (int k = 0; k < 100; ++k) x = x * 3 + 1;
}

void check_once(const std::vector<int>& hits, const char* what, int team, long n) {
  int bad = 0;
  for (long i = 0; i < n && bad < 3; ++i)
    if (!CHECK_EQ(hits[size_t(i)], 1, "%s team=%d n=%ld: iteration %ld ran", what, team, n, i))
      ++bad;
}

void test_up_down(bool imbalanced) {
  const char* what = imbalanced ? "imbalanced" : "balanced";
  for (int team : kTeams) {
    for (long n : kSizes) {
      for (int r = 0; r < kRepeats; ++r) {
        std::vector<int> hits(size_t(n) + 1, 0);
        long sum = 0;
#pragma omp parallel num_threads(team)
        {
          probe_here();
#pragma omp for schedule(runtime) reduction(+ : sum)
          for (long i = 0; i < n; ++i) {
            if (imbalanced && i < n / 4) spin_work(i);
            __atomic_add_fetch(&hits[size_t(i)], 1, __ATOMIC_RELAXED);
            sum += i;
          }
        }
        check_once(hits, what, team, n);
        CHECK_EQ(sum, n * (n - 1) / 2, "%s team=%d n=%ld: reduction", what, team, n);
        // Down by 3 over long, from n - 1 to 0.
        std::fill(hits.begin(), hits.end(), 0);
#pragma omp parallel for num_threads(team) schedule(runtime)
        for (long i = n - 1; i >= 0; i -= 3) {
          if (imbalanced && i > 3 * n / 4) spin_work(i);
          __atomic_add_fetch(&hits[size_t(i)], 1, __ATOMIC_RELAXED);
        }
        int bad = 0;
        for (long i = 0; i < n && bad < 3; ++i)
          if (!CHECK_EQ(hits[size_t(i)], (n - 1 - i) % 3 == 0 ? 1 : 0,
                        "%s down by 3, team=%d n=%ld: iteration %ld ran", what, team, n, i))
            ++bad;
      }
    }
  }
}

// unsigned long long above LLONG_MAX, up by 1 and down by 3.
void test_ull() {
  const unsigned long long base = 0x8000000000000000ull + 17;
  for (int team : kTeams) {
    for (long n : kSizes) {
      std::vector<int> hits(size_t(n) + 1, 0);
#pragma omp parallel num_threads(team)
      {
#pragma omp for schedule(runtime)
        for (unsigned long long i = base; i < base + (unsigned long long)n; ++i)
          __atomic_add_fetch(&hits[size_t(i - base)], 1, __ATOMIC_RELAXED);
      }
      check_once(hits, "ull up", team, n);
      std::fill(hits.begin(), hits.end(), 0);
#pragma omp parallel num_threads(team)
      {
#pragma omp for schedule(runtime)
        for (unsigned long long i = base + (unsigned long long)n; i > base; i -= 3)
          __atomic_add_fetch(&hits[size_t(i - base - 1)], 1, __ATOMIC_RELAXED);
      }
      int bad = 0;
      for (long k = 0; k < n && bad < 3; ++k)
        if (!CHECK_EQ(hits[size_t(k)], (n - 1 - k) % 3 == 0 ? 1 : 0,
                      "ull down by 3, team=%d n=%ld: iteration %ld ran", team, n, k))
          ++bad;
    }
  }
}

// Three nowait loops, the second imbalanced, then a barrier.
void test_nowait() {
  for (int team : kTeams) {
    const long n = 777;
    std::vector<int> a(n, 0), b(n, 0), c(n, 0);
    for (int r = 0; r < kRepeats; ++r) {
#pragma omp parallel num_threads(team)
      {
#pragma omp for schedule(runtime) nowait
        for (long i = 0; i < n; ++i) __atomic_add_fetch(&a[size_t(i)], 1, __ATOMIC_RELAXED);
#pragma omp for schedule(runtime) nowait
        for (long i = 0; i < n; ++i) {
          if (i < n / 4) spin_work(i);
          __atomic_add_fetch(&b[size_t(i)], 1, __ATOMIC_RELAXED);
        }
#pragma omp for schedule(runtime) nowait
        for (long i = 0; i < n; ++i) __atomic_add_fetch(&c[size_t(i)], 1, __ATOMIC_RELAXED);
#pragma omp barrier
      }
    }
    int bad = 0;
    for (long i = 0; i < n && bad < 3; ++i) {
      bool ok =
          CHECK_EQ(a[size_t(i)], kRepeats, "nowait team=%d: first loop, iteration %ld", team, i);
      ok &= CHECK_EQ(b[size_t(i)], kRepeats, "nowait team=%d: second loop, iteration %ld", team, i);
      ok &= CHECK_EQ(c[size_t(i)], kRepeats, "nowait team=%d: third loop, iteration %ld", team, i);
      if (!ok) ++bad;
    }
  }
}

void test_lastprivate() {
  for (int team : kTeams) {
    for (long n : kSizes) {
      if (n == 0) continue;
      long last = -1, last_combined = -1;
#pragma omp parallel num_threads(team)
      {
#pragma omp for schedule(runtime) lastprivate(last)
        for (long i = 0; i < n; ++i) {
          if (i < n / 4) spin_work(i);
          last = i * 2;
        }
      }
#pragma omp parallel for num_threads(team) schedule(runtime) lastprivate(last_combined)
      for (long i = 0; i < n; ++i) last_combined = i + 7;
      CHECK_EQ(last, (n - 1) * 2, "lastprivate team=%d n=%ld", team, n);
      CHECK_EQ(last_combined, n - 1 + 7, "lastprivate (parallel for) team=%d n=%ld", team, n);
    }
  }
}

// ordered keeps its own path: the ordered regions in iteration order.
void test_ordered() {
  for (int team : kTeams) {
    const long n = 200;
    std::vector<long> order;
    order.reserve(size_t(n));
#pragma omp parallel num_threads(team)
    {
#pragma omp for schedule(runtime) ordered
      for (long i = 0; i < n; ++i) {
#pragma omp ordered
        order.push_back(i);
      }
    }
    CHECK_EQ(long(order.size()), n, "ordered team=%d: regions run", team);
    for (long i = 0; i < long(order.size()); ++i)
      if (!CHECK_EQ(order[size_t(i)], i, "ordered team=%d: region %ld", team, i)) break;
  }
}

void test_kind(const std::string& expected) {
  omp_sched_t kind;
  int chunk = 0;
  omp_get_schedule(&kind, &chunk);
  const omp_sched_t want = expected == "static"    ? omp_sched_static
                           : expected == "dynamic" ? omp_sched_dynamic
                           : expected == "guided"  ? omp_sched_guided
                                                   : omp_sched_auto;
  const char* env = std::getenv("OMP_SCHEDULE");
  CHECK_EQ(kind & ~omp_sched_monotonic, want, "OMP_SCHEDULE=%s: omp_get_schedule's kind",
           env != nullptr ? env : "(unset)");
}

}  // namespace

int main(int argc, char** argv) {
  test_begin("loop_schemes");
  const char* prefix = "--expect-kind=";
  for (int a = 1; a < argc; ++a) {
    if (std::strncmp(argv[a], prefix, std::strlen(prefix)) == 0) {
      test_kind(argv[a] + std::strlen(prefix));
    } else {
      std::printf(
          "omp-test loop_schemes: FAIL: unknown argument '%s' (accepted: --expect-kind=K)\n",
          argv[a]);
      return 2;
    }
  }
  test_up_down(false);
  test_up_down(true);
  test_ull();
  test_nowait();
  test_lastprivate();
  test_ordered();
  return test_end();
}
