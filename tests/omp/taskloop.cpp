// omp-test taskloop: the taskloop construct.
//
// Each iteration exactly once for default, grainsize(7) and num_tasks(5)
// taskloops over long and unsigned long long (above LLONG_MAX) induction
// variables, counting up and down, empty ranges and ranges smaller than the
// team; complete at the end of the construct (its implicit taskgroup), or
// with nogroup after a taskwait; lastprivate; taskloop called from every
// thread of the team at once. (Its reduction clause, a task reduction, is
// taskloop_reduction.cpp.)
#include <omp.h>

#include <vector>

#include "check.h"

namespace {

constexpr long kSizes[] = {0, 1, 3, 100, 1001};
using ull = unsigned long long;

ull ull_base() {
  static volatile ull base = (1ULL << 63) + 999;
  return base;
}

void test_counts() {
  for (long n : kSizes) {
    std::vector<int> plain(n), grain(n), tasks(n), down(n), wide(n), nogroup(n);
    int incomplete = 0;
    long last = -1;
#pragma omp parallel
    {
      probe_here();
#pragma omp single
      {
#pragma omp taskloop
        for (long i = 0; i < n; ++i) count_hit(&plain[i]);
        // The construct's implicit taskgroup: all iterations are done here.
        for (long i = 0; i < n; ++i) {
          if (__atomic_load_n(&plain[i], __ATOMIC_RELAXED) != 1) incomplete = 1;
        }
#pragma omp taskloop grainsize(7)
        for (long i = n - 1; i >= 0; --i) count_hit(&grain[i]);
#pragma omp taskloop num_tasks(5) lastprivate(last)
        for (long i = 0; i < n; ++i) {
          count_hit(&tasks[i]);
          last = i;
        }
        const ull lo = ull_base();
#pragma omp taskloop grainsize(3)
        for (ull i = lo; i < lo + n; ++i) count_hit(&wide[i - lo]);
#pragma omp taskloop num_tasks(4)
        for (ull i = lo + 2 * n; i > lo; i -= 2) count_hit(&down[(lo + 2 * n - i) / 2]);
#pragma omp taskloop nogroup
        for (long i = 0; i < n; ++i) count_hit(&nogroup[i]);
#pragma omp taskwait
      }
    }
    CHECK_EQ(incomplete, 0, "taskloop, n=%ld: iterations not done at the end of the construct", n);
    check_counts(plain.data(), n, 1, "taskloop, n=%ld", n);
    check_counts(grain.data(), n, 1, "taskloop grainsize(7) step -1, n=%ld", n);
    check_counts(tasks.data(), n, 1, "taskloop num_tasks(5), n=%ld", n);
    check_counts(wide.data(), n, 1, "taskloop grainsize(3) unsigned long long, n=%ld", n);
    check_counts(down.data(), n, 1, "taskloop num_tasks(4) unsigned long long step -2, n=%ld", n);
    check_counts(nogroup.data(), n, 1, "taskloop nogroup + taskwait, n=%ld", n);
    if (n > 0) CHECK_EQ(last, n - 1, "taskloop lastprivate, n=%ld", n);
  }
}

void test_from_all_threads() {
  constexpr long kN = 500;
  int team = 0;
  std::vector<int> hits(kN, 0);
#pragma omp parallel
  {
    probe_here();
#pragma omp master
    team = omp_get_num_threads();
    // Every thread runs the whole loop: each index once per thread.
#pragma omp taskloop grainsize(10)
    for (long i = 0; i < kN; ++i) count_hit(&hits[i]);
  }
  check_counts(hits.data(), kN, team, "taskloop encountered by all %d threads", team);
}

}  // namespace

int main() {
  test_begin("taskloop");
  test_counts();
  test_from_all_threads();
  return test_end();
}
