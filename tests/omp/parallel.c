/* omp-test parallel: `parallel` regions and the team queries (plain C).
 *
 * Checks thread numbering (every id 0..n-1 exactly once, all threads agree on
 * n), num_threads(k), if(0) and if(expr), nested regions with
 * max-active-levels 2 and 1 (levels, ancestors, team sizes), omp_in_parallel,
 * omp_get_level / omp_get_active_level, omp_get_max_threads and
 * omp_set_num_threads, firstprivate copies, and omp_get_wtime (never goes back
 * on any thread, advances over a sleep). A team asking for k threads has
 * 1 <= n <= k; exactly k when dyn-var is false and k is within the thread
 * limit and the size of the default team (which the runtime showed it can
 * form).
 */
#include <omp.h>
#include <time.h>

#include "check.h"

enum { MAX_TEAM = 64 };

/* Size of the default team (no num_threads clause), measured first. A
 * runtime may form fewer threads than asked (weft never has more threads than
 * PEs), but one that formed this team can form any team up to its size. */
static int default_team = 0;

/* Size a team asking for `requested` threads must have, or -1 if the
 * runtime may choose anything in [1, requested]: exactly `requested` when
 * dyn-var is false and `requested` is within the thread limit and the
 * default team's size. */
static int expected_team(int requested) {
  if (omp_get_dynamic()) return -1;
  if (requested > omp_get_thread_limit()) return -1;
  if (requested > default_team) return -1;
  return requested;
}

/* One region: every thread records its id; returns the team size. */
static int check_team(const char* label, int requested) {
  int seen[MAX_TEAM] = {0};
  int team = -1, disagree = 0, level = -1, in_parallel = -1, active = -1;
#pragma omp parallel num_threads(requested)
  {
    probe_here();
    int id = omp_get_thread_num();
    int n = omp_get_num_threads();
    if (id >= 0 && id < MAX_TEAM) count_hit(&seen[id]);
#pragma omp master
    {
      team = n;
      level = omp_get_level();
      in_parallel = omp_in_parallel();
      active = omp_get_active_level();
    }
#pragma omp barrier
    if (n != team) __atomic_store_n(&disagree, 1, __ATOMIC_RELAXED);
  }
  int expected = expected_team(requested);
  if (expected > 0) {
    CHECK_EQ(team, expected, "%s: team size for num_threads(%d)", label, requested);
  } else {
    check_range(team, 1, requested, "%s: team size for num_threads(%d)", label, requested);
  }
  CHECK_EQ(disagree, 0, "%s: threads disagreeing on omp_get_num_threads", label);
  if (team >= 1 && team <= MAX_TEAM) {
    check_counts(seen, team, 1, "%s: thread ids 0..n-1 (n=%d)", label, team);
    for (int id = team; id < MAX_TEAM; ++id) {
      CHECK_EQ(seen[id], 0, "%s: regions run by thread id %d beyond team size %d", label, id,
               team);
    }
  }
  CHECK_EQ(level, 1, "%s: omp_get_level() inside", label);
  CHECK_EQ(in_parallel, team > 1, "%s: omp_in_parallel() inside a team of %d", label, team);
  CHECK_EQ(active, team > 1, "%s: omp_get_active_level() inside a team of %d", label, team);
  return team;
}

static void test_outside(void) {
  CHECK_EQ(omp_in_parallel(), 0, "omp_in_parallel() outside any region");
  CHECK_EQ(omp_get_thread_num(), 0, "omp_get_thread_num() outside any region");
  CHECK_EQ(omp_get_num_threads(), 1, "omp_get_num_threads() outside any region");
  CHECK_EQ(omp_get_level(), 0, "omp_get_level() outside any region");
  CHECK_EQ(omp_get_active_level(), 0, "omp_get_active_level() outside any region");
  check_true(omp_get_max_threads() >= 1, "omp_get_max_threads() >= 1 (is %d)",
             omp_get_max_threads());
  check_true(omp_get_num_procs() >= 1, "omp_get_num_procs() >= 1 (is %d)", omp_get_num_procs());
  check_true(omp_get_thread_limit() >= 1, "omp_get_thread_limit() >= 1 (is %d)",
             omp_get_thread_limit());
}

static void test_default_team(void) {
  int max_threads = omp_get_max_threads();
  int seen[MAX_TEAM] = {0};
  int team = 0, disagree = 0, max_inside = -1;
#pragma omp parallel
  {
    probe_here();
    int id = omp_get_thread_num();
    if (id >= 0 && id < MAX_TEAM) count_hit(&seen[id]);
#pragma omp single
    {
      team = omp_get_num_threads();
      max_inside = omp_get_max_threads();
    }
    if (omp_get_num_threads() != team) __atomic_store_n(&disagree, 1, __ATOMIC_RELAXED);
  }
  check_range(team, 1, max_threads, "default team size (omp_get_max_threads() = %d)",
              max_threads);
  default_team = team;
  CHECK_EQ(disagree, 0, "default team: threads disagreeing on omp_get_num_threads");
  /* nthreads-var is inherited, but OMP_NUM_THREADS may be a list (one value
   * per level) and a runtime may answer what a nested region would get. */
  check_range(max_inside, 1, max_threads, "omp_get_max_threads() inside the region");
  if (team >= 1 && team <= MAX_TEAM) check_counts(seen, team, 1, "default team: thread ids");
}

static void test_num_threads(void) {
  static const int requests[] = {1, 2, 3, 5, 8};
  for (unsigned r = 0; r < sizeof requests / sizeof requests[0]; ++r) {
    char label[32];
    snprintf(label, sizeof label, "num_threads(%d)", requests[r]);
    check_team(label, requests[r]);
  }
  /* A variable num_threads expression and one of 1 in a row. */
  for (int k = 1; k <= 4; ++k) check_team("num_threads(k) loop", k);
}

static void test_set_num_threads(void) {
  int saved = omp_get_max_threads();
  omp_set_num_threads(3);
  /* It returns nthreads-var, which omp_set_num_threads just set. */
  const int three = omp_get_max_threads();
  CHECK_EQ(three, 3, "omp_get_max_threads() after omp_set_num_threads(3)");
  int team = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp master
    team = omp_get_num_threads();
  }
  int expected = expected_team(3);
  if (expected > 0) {
    CHECK_EQ(team, expected, "team size after omp_set_num_threads(3)");
  } else {
    check_range(team, 1, 3, "team size after omp_set_num_threads(3)");
  }
  /* The ICV belongs to the task: setting it inside a region changes only what
   * that thread's nested regions would use, not the outer value. */
  int bad_inner = 0;
#pragma omp parallel num_threads(2)
  {
    int want = 1 + omp_get_thread_num();
    omp_set_num_threads(want);
    int got = omp_get_max_threads();
    if (got < 1 || got > want) __atomic_store_n(&bad_inner, 1, __ATOMIC_RELAXED);
  }
  CHECK_EQ(bad_inner, 0,
           "omp_get_max_threads() inside a region above what the thread set (or below 1)");
  CHECK_EQ(omp_get_max_threads(), three,
           "omp_get_max_threads() after a region whose threads set their own");
  omp_set_num_threads(saved);
  CHECK_EQ(omp_get_max_threads(), saved, "omp_get_max_threads() restored");
}

static void test_if_clause(void) {
  volatile int no = 0, yes = 1;
  int team = -1, id = -1, level = -1, active = -1, in_parallel = -1, runs = 0;
#pragma omp parallel if (0)
  {
    probe_here();
    count_hit(&runs);
    team = omp_get_num_threads();
    id = omp_get_thread_num();
    level = omp_get_level();
    active = omp_get_active_level();
    in_parallel = omp_in_parallel();
  }
  CHECK_EQ(runs, 1, "parallel if(0): body executions");
  CHECK_EQ(team, 1, "parallel if(0): team size");
  CHECK_EQ(id, 0, "parallel if(0): thread id");
  CHECK_EQ(level, 1, "parallel if(0): omp_get_level() (inactive regions count)");
  CHECK_EQ(active, 0, "parallel if(0): omp_get_active_level()");
  CHECK_EQ(in_parallel, 0, "parallel if(0): omp_in_parallel()");

  runs = 0;
#pragma omp parallel if (no) num_threads(4)
  count_hit(&runs);
  CHECK_EQ(runs, 1, "parallel if(runtime false) num_threads(4): body executions");

  runs = 0;
  team = 0;
#pragma omp parallel if (yes) num_threads(2)
  {
    count_hit(&runs);
#pragma omp master
    team = omp_get_num_threads();
  }
  CHECK_EQ(runs, team, "parallel if(runtime true) num_threads(2): body executions = team");
  int expected = expected_team(2);
  if (expected > 0) CHECK_EQ(team, expected, "parallel if(runtime true) num_threads(2): team");
}

/* Outer team of 2 (or what the runtime gives), inner teams of up to 3. */
static void test_nested(void) {
  int saved_levels = omp_get_max_active_levels();
  check_true(saved_levels >= 1, "omp_get_max_active_levels() >= 1 (is %d)", saved_levels);
  omp_set_max_active_levels(2);
  CHECK_EQ(omp_get_max_active_levels(), 2, "omp_get_max_active_levels() after setting 2");

  int outer_team = 0;
  int inner_seen[MAX_TEAM][MAX_TEAM];
  int inner_team[MAX_TEAM];
  int bad_level = 0, bad_ancestor = 0, bad_size = 0, bad_active = 0;
  memset(inner_seen, 0, sizeof inner_seen);
  memset(inner_team, 0, sizeof inner_team);
#pragma omp parallel num_threads(2)
  {
    int outer_id = omp_get_thread_num();
    int outer_n = omp_get_num_threads();
#pragma omp master
    outer_team = outer_n;
#pragma omp parallel num_threads(3)
    {
      probe_here();
      int id = omp_get_thread_num();
      int n = omp_get_num_threads();
      if (outer_id < MAX_TEAM && id < MAX_TEAM) count_hit(&inner_seen[outer_id][id]);
      if (id == 0 && outer_id < MAX_TEAM) inner_team[outer_id] = n;
      if (omp_get_level() != 2) __atomic_store_n(&bad_level, 1, __ATOMIC_RELAXED);
      if (omp_get_ancestor_thread_num(1) != outer_id || omp_get_ancestor_thread_num(2) != id ||
          omp_get_ancestor_thread_num(0) != 0) {
        __atomic_store_n(&bad_ancestor, 1, __ATOMIC_RELAXED);
      }
      if (omp_get_team_size(1) != outer_n || omp_get_team_size(2) != n ||
          omp_get_team_size(0) != 1) {
        __atomic_store_n(&bad_size, 1, __ATOMIC_RELAXED);
      }
      if (omp_get_active_level() != (outer_n > 1) + (n > 1)) {
        __atomic_store_n(&bad_active, 1, __ATOMIC_RELAXED);
      }
    }
  }
  int expected_outer = expected_team(2);
  if (expected_outer > 0) CHECK_EQ(outer_team, expected_outer, "nested: outer team size");
  for (int o = 0; o < outer_team && o < MAX_TEAM; ++o) {
    int n = inner_team[o];
    if (!check_range(n, 1, 3, "nested: inner team size under outer thread %d", o)) continue;
    check_counts(inner_seen[o], n, 1, "nested: inner thread ids under outer thread %d", o);
  }
  CHECK_EQ(bad_level, 0, "nested: threads seeing omp_get_level() != 2");
  CHECK_EQ(bad_ancestor, 0, "nested: threads seeing a wrong omp_get_ancestor_thread_num()");
  CHECK_EQ(bad_size, 0, "nested: threads seeing a wrong omp_get_team_size()");
  CHECK_EQ(bad_active, 0, "nested: threads seeing a wrong omp_get_active_level()");

  /* With max-active-levels 1 the inner regions are inactive: teams of 1. */
  omp_set_max_active_levels(1);
  int inner_max = 0, inner_runs = 0, outer_n = 0;
#pragma omp parallel num_threads(2)
  {
#pragma omp master
    outer_n = omp_get_num_threads();
#pragma omp parallel num_threads(3)
    {
      probe_here();
      count_hit(&inner_runs);
      int n = omp_get_num_threads();
      int cur = __atomic_load_n(&inner_max, __ATOMIC_RELAXED);
      while (n > cur && !__atomic_compare_exchange_n(&inner_max, &cur, n, 0, __ATOMIC_RELAXED,
                                                      __ATOMIC_RELAXED)) {
      }
      if (omp_get_level() != 2) __atomic_store_n(&bad_level, 1, __ATOMIC_RELAXED);
    }
  }
  CHECK_EQ(inner_max, 1, "nested with max-active-levels 1: inner team size");
  CHECK_EQ(inner_runs, outer_n, "nested with max-active-levels 1: inner bodies run");
  CHECK_EQ(bad_level, 0, "nested inactive: threads seeing omp_get_level() != 2");

  /* Three levels with max-active-levels 2: the third is inactive. */
  omp_set_max_active_levels(2);
  int third_runs = 0, third_max = 0, expected_third = 0;
#pragma omp parallel num_threads(2)
#pragma omp parallel num_threads(2)
  {
    count_hit(&expected_third);
#pragma omp parallel num_threads(2)
    {
      count_hit(&third_runs);
      if (omp_get_num_threads() > 1) __atomic_store_n(&third_max, omp_get_num_threads(),
                                                      __ATOMIC_RELAXED);
      if (omp_get_level() != 3) __atomic_store_n(&bad_level, 1, __ATOMIC_RELAXED);
    }
  }
  CHECK_EQ(third_max, 0, "third nesting level under max-active-levels 2: inner team > 1");
  CHECK_EQ(third_runs, expected_third, "third nesting level: bodies run");
  CHECK_EQ(bad_level, 0, "third nesting level: threads seeing omp_get_level() != 3");
  omp_set_max_active_levels(saved_levels);
}

static void test_data_sharing(void) {
  int shared_sum = 0, first = 41, team = 0, bad_copy = 0;
#pragma omp parallel firstprivate(first) shared(shared_sum, team)
  {
    if (first != 41) __atomic_store_n(&bad_copy, 1, __ATOMIC_RELAXED);
    first += omp_get_thread_num(); /* private copy: no effect outside */
    count_hit(&shared_sum);
#pragma omp master
    team = omp_get_num_threads();
  }
  CHECK_EQ(bad_copy, 0, "firstprivate: a thread's copy differed from the original");
  CHECK_EQ(first, 41, "firstprivate: original changed by the region");
  CHECK_EQ(shared_sum, team, "shared counter incremented once per thread");
}

static void test_wtime(void) {
  check_true(omp_get_wtick() > 0.0, "omp_get_wtick() > 0");
  double start = omp_get_wtime();
  int went_back = 0;
#pragma omp parallel
  {
    probe_here();
    double last = omp_get_wtime();
    if (last < start) __atomic_store_n(&went_back, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 20000; ++i) {
      double now = omp_get_wtime();
      if (now < last) __atomic_store_n(&went_back, 1, __ATOMIC_RELAXED);
      last = now;
    }
  }
  CHECK_EQ(went_back, 0, "omp_get_wtime() went back (per thread, or below a value read before)");
  double before = omp_get_wtime();
  struct timespec pause = {0, 2000000}; /* 2 ms */
  nanosleep(&pause, NULL);
  double elapsed = omp_get_wtime() - before;
  check_true(elapsed >= 0.0019, "omp_get_wtime() advanced by >= 2 ms over a 2 ms sleep (%g s)",
             elapsed);
}

int main(void) {
  test_begin("parallel");
  test_outside();
  test_default_team();
  test_num_threads();
  test_set_num_threads();
  test_if_clause();
  test_nested();
  test_data_sharing();
  test_wtime();
  test_outside();
  return test_end();
}
