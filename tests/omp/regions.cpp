// omp-test regions: many short parallel regions in a row (region start and
// end under stress).
//
// The program first runs a serial part that touches no OpenMP call (the
// runtime starts lazily at the first region), then 1000 small regions whose
// kind changes every time and whose team is full or (every fifth) one thread:
// a plain region where each thread writes its slot, a `parallel for` with a
// reduction, a region with `single` and a barrier, a region with a dynamic
// `for nowait` and `critical`, each checked right after it ends, with serial
// checks (omp_in_parallel, omp_get_thread_num) between regions. After ten
// failed regions it stops.
#include <omp.h>

#include <vector>

#include "check.h"

namespace {

constexpr int kRegions = 1000;
constexpr int kMaxTeam = 64;
constexpr long kN = 257;

// Opaque to the optimizer: the loops then update their sums in memory every iteration.
__attribute__((noipa)) long term(long i, int salt) { return (i * 31 + salt) % 101; }

long serial_sum(long n, int salt) {
  long s = 0;
  for (long i = 0; i < n; ++i) s += term(i, salt);
  return s;
}

}  // namespace

int main() {
  test_begin("regions");
  // Serial part, before any OpenMP call.
  std::vector<long> expected(kRegions);
  for (int r = 0; r < kRegions; ++r) expected[r] = serial_sum(kN, r);

  const int max_threads = omp_get_max_threads();
  int failed_regions = 0;
  for (int r = 0; r < kRegions; ++r) {
    // Full teams, and every fifth region a team of one. (Other sizes are
    // parallel.c's business: libgomp ends surplus threads when a team shrinks
    // and starts new ones when it grows, which would make this slow.)
    const int requested = r % 5 == 4 ? 1 : (max_threads < kMaxTeam ? max_threads : kMaxTeam);
    const int failures_before = __atomic_load_n(&check_failures, __ATOMIC_RELAXED);
    switch (r % 4) {
      case 0: {
        int slots[kMaxTeam] = {};
        int team = 0;
#pragma omp parallel num_threads(requested)
        {
          probe_here();
          int t = omp_get_thread_num();
          if (t < kMaxTeam) count_hit(&slots[t]);
#pragma omp master
          team = omp_get_num_threads();
        }
        if (check_range(team, 1, requested, "region %d (plain): team size", r)) {
          check_counts(slots, team, 1, "region %d (plain): thread ids", r);
        }
        break;
      }
      case 1: {
        long sum = 0;
#pragma omp parallel for num_threads(requested) reduction(+ : sum)
        for (long i = 0; i < kN; ++i) sum += term(i, r);
        CHECK_EQ(sum, expected[r], "region %d (parallel for reduction): sum", r);
        break;
      }
      case 2: {
        int singles = 0, arrived = 0, early = 0, team = 0;
        long value = -1;
#pragma omp parallel num_threads(requested)
        {
          probe_here();
#pragma omp single
          {
            count_hit(&singles);
            value = expected[r];
            team = omp_get_num_threads();
          }
          if (value != expected[r]) __atomic_store_n(&early, 1, __ATOMIC_RELAXED);
          count_hit(&arrived);
#pragma omp barrier
          if (__atomic_load_n(&arrived, __ATOMIC_RELAXED) != omp_get_num_threads()) {
            __atomic_store_n(&early, 1, __ATOMIC_RELAXED);
          }
        }
        CHECK_EQ(singles, 1, "region %d (single + barrier): single executions", r);
        CHECK_EQ(early, 0, "region %d (single + barrier): a thread passed too early", r);
        CHECK_EQ(arrived, team, "region %d (single + barrier): arrivals", r);
        break;
      }
      case 3: {
        long sum = 0;
        int hits[kN] = {};
#pragma omp parallel num_threads(requested)
        {
          probe_here();
          long mine = 0;
#pragma omp for schedule(dynamic, 16) nowait
          for (long i = 0; i < kN; ++i) {
            count_hit(&hits[i]);
            mine += term(i, r);
          }
#pragma omp critical
          sum += mine;
        }
        CHECK_EQ(sum, expected[r], "region %d (for nowait + critical): sum", r);
        check_counts(hits, kN, 1, "region %d (for nowait + critical): iterations", r);
        break;
      }
    }
    CHECK_EQ(omp_in_parallel(), 0, "after region %d: omp_in_parallel()", r);
    CHECK_EQ(omp_get_thread_num(), 0, "after region %d: omp_get_thread_num()", r);
    if (__atomic_load_n(&check_failures, __ATOMIC_RELAXED) != failures_before) {
      if (++failed_regions >= 10) break;  // enough lines to diagnose
    }
  }
  return test_end();
}
