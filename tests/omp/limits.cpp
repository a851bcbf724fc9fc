// omp-test limits: OMP_THREAD_LIMIT over a whole contention group, and
// cancelled tasks whose firstprivate objects are C++ objects (run with
// OMP_THREAD_LIMIT=4 and OMP_CANCELLATION=true).
//
// Nested teams (two active levels, 3 x 3 asked for) never have more than 4
// threads alive at once, and the threads they took are given back: a region
// after them has 4 again. In a cancelled taskgroup, a task whose arguments
// hold copy-constructed objects still runs its body -- the only code that
// destroys them -- so every object made is destroyed, as under libgomp.
#include <omp.h>
#include <unistd.h>

#include "check.h"

namespace {

int live_objects = 0;  // __atomic

struct counted {
  int v = 0;
  counted() { __atomic_add_fetch(&live_objects, 1, __ATOMIC_RELAXED); }
  counted(const counted& o) : v(o.v) { __atomic_add_fetch(&live_objects, 1, __ATOMIC_RELAXED); }
  ~counted() { __atomic_sub_fetch(&live_objects, 1, __ATOMIC_RELAXED); }
};

void nested_teams_within_the_limit() {
  CHECK_EQ(omp_get_thread_limit(), 4, "omp_get_thread_limit() from OMP_THREAD_LIMIT=4");
  omp_set_max_active_levels(2);
  int alive = 0, most = 0, outer = 0;
#pragma omp parallel num_threads(3)
  {
    probe_here();
#pragma omp single
    outer = omp_get_num_threads();
#pragma omp parallel num_threads(3)
    {
      int now = __atomic_add_fetch(&alive, 1, __ATOMIC_RELAXED);
      int seen = __atomic_load_n(&most, __ATOMIC_RELAXED);
      while (now > seen && !__atomic_compare_exchange_n(&most, &seen, now, false, __ATOMIC_RELAXED,
                                                        __ATOMIC_RELAXED)) {
      }
      usleep(2000);
      __atomic_sub_fetch(&alive, 1, __ATOMIC_RELAXED);
    }
  }
  check_range(outer, 1, 3, "outer team under the limit");
  check_range(most, 1, 4, "threads alive at once in nested teams under OMP_THREAD_LIMIT=4");
  int again = 0;
#pragma omp parallel num_threads(4)
#pragma omp single
  again = omp_get_num_threads();
  CHECK_EQ(again, 4, "a team of 4 after the nested teams gave their threads back");
  omp_set_max_active_levels(1);
}

void cancelled_tasks_destroy_their_copies() {
  CHECK_EQ(omp_get_cancellation(), 1, "omp_get_cancellation() with OMP_CANCELLATION=true");
  {
    counted a;
#pragma omp parallel num_threads(2)
#pragma omp single
#pragma omp taskgroup
    for (int i = 0; i < 40; ++i) {
#pragma omp task firstprivate(a)
      {
        a.v++;
        usleep(20);
#pragma omp cancel taskgroup if (i > 3)
      }
    }
  }
  CHECK_EQ(live_objects, 0, "objects alive after a cancelled taskgroup's tasks");
}

}  // namespace

int main() {
  test_begin("limits");
  nested_teams_within_the_limit();
  cancelled_tasks_destroy_their_copies();
  return test_end();
}
