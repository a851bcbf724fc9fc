/* omp-test target_teams: programs written for accelerators, run where there
 * is none (plain C).
 *
 * Host teams: num_teams gives that many teams, each number once, and a
 * distribute loop shares its iterations among them (each once); the
 * thread_limit clause holds inside (omp_get_thread_limit, the size of a
 * parallel region) and ends with the construct; omp_set_num_teams and
 * omp_set_teams_thread_limit are what the constructs without clauses use.
 * Target regions on the host: the body runs as an initial thread (level 0,
 * a team of one, the device's initial ICVs, not the encountering task's),
 * map(tofrom) results come back, firstprivate copies are the construct's;
 * `target teams distribute parallel for` and `target parallel for
 * reduction` compute what a loop computes, also met by every thread of a
 * region; a target nowait depend(inout) chain runs in order; target data,
 * update and enter/exit data leave host values as they are; the device
 * memory routines work for the host device. Task ICVs: an included task's
 * omp_set_num_threads ends with it, a deferred task starts with its
 * creator's; omp_get_max_threads inside an inactive region is nthreads-var,
 * and omp_set_max_active_levels is one thread's.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum { N = 1000 };

static void host_teams(void) {
  int seen[8] = {0};
  int counts[N];
  memset(counts, 0, sizeof counts);
  int wrong_count = 0;
#pragma omp teams num_teams(5)
  {
    if (omp_get_num_teams() != 5) __atomic_add_fetch(&wrong_count, 1, __ATOMIC_RELAXED);
    int me = omp_get_team_num();
    if (me >= 0 && me < 8) __atomic_add_fetch(&seen[me], 1, __ATOMIC_RELAXED);
#pragma omp distribute
    for (int i = 0; i < N; ++i) __atomic_add_fetch(&counts[i], 1, __ATOMIC_RELAXED);
  }
  CHECK_EQ(wrong_count, 0, "teams num_teams(5): omp_get_num_teams() != 5 in that many teams");
  for (int t = 0; t < 5; ++t) CHECK_EQ(seen[t], 1, "teams num_teams(5): team %d ran", t);
  CHECK_EQ(seen[5], 0, "teams num_teams(5): a sixth team ran");
  check_counts(counts, N, 1, "teams distribute");
  CHECK_EQ(omp_get_num_teams(), 1, "omp_get_num_teams() outside teams");
  CHECK_EQ(omp_get_team_num(), 0, "omp_get_team_num() outside teams");

  const int limit_before = omp_get_thread_limit();
  int limit_inside = -1, team_inside = -1;
#pragma omp teams num_teams(2) thread_limit(2)
  {
    /* A teams region may call few routines itself: these ask from a region. */
    if (omp_get_team_num() == 1) {
#pragma omp parallel if (0)
      limit_inside = omp_get_thread_limit();
#pragma omp parallel num_threads(4)
#pragma omp single
      team_inside = omp_get_num_threads();
    }
  }
  CHECK_EQ(limit_inside, 2, "omp_get_thread_limit() in teams thread_limit(2)");
  check_range(team_inside, 1, 2, "a parallel region's size in teams thread_limit(2)");
  CHECK_EQ(omp_get_thread_limit(), limit_before, "omp_get_thread_limit() after the teams");

  omp_set_num_teams(3);
  omp_set_teams_thread_limit(1);
  CHECK_EQ(omp_get_max_teams(), 3, "omp_get_max_teams() after omp_set_num_teams(3)");
  CHECK_EQ(omp_get_teams_thread_limit(), 1, "omp_get_teams_thread_limit()");
  int teams = 0, limit = 0;
#pragma omp teams
  {
    if (omp_get_team_num() == 0) {
      teams = omp_get_num_teams();
#pragma omp parallel if (0)
      limit = omp_get_thread_limit();
    }
  }
  CHECK_EQ(teams, 3, "teams without num_teams after omp_set_num_teams(3)");
  CHECK_EQ(limit, 1, "thread limit in teams after omp_set_teams_thread_limit(1)");
  omp_set_num_teams(0);
  omp_set_teams_thread_limit(0);
}

static void target_regions(void) {
  CHECK_EQ(omp_get_num_devices(), 0, "omp_get_num_devices()");
  CHECK_EQ(omp_is_initial_device(), 1, "omp_is_initial_device() on the host");
  const int initial_max = omp_get_max_threads();
  omp_set_num_threads(3);
  omp_set_dynamic(1);

  int level = -1, threads = -1, num = -1, initial = -1, max = -1, dynamic = -1;
  int x = 5, fp = 7;
#pragma omp target map(tofrom : x, level, threads, num, initial, max, dynamic) firstprivate(fp)
  {
    level = omp_get_level();
    threads = omp_get_num_threads();
    num = omp_get_thread_num();
    initial = omp_is_initial_device();
    max = omp_get_max_threads();
    dynamic = omp_get_dynamic();
    x += fp;
    fp = 100;               /* the copy's, not the host's */
    omp_set_num_threads(2); /* the target region's own ICV */
  }
  CHECK_EQ(x, 12, "map(tofrom) result of a target region");
  CHECK_EQ(fp, 7, "a firstprivate variable after the target region");
  CHECK_EQ(level, 0, "omp_get_level() in a target region");
  CHECK_EQ(threads, 1, "omp_get_num_threads() in a target region");
  CHECK_EQ(num, 0, "omp_get_thread_num() in a target region");
  CHECK_EQ(initial, 1, "omp_is_initial_device() in a target region");
  CHECK_EQ(max, initial_max, "omp_get_max_threads() in a target region: the initial value");
  CHECK_EQ(dynamic, 0, "omp_get_dynamic() in a target region: the initial value");
  CHECK_EQ(omp_get_max_threads(), 3, "omp_get_max_threads() after a target region");
  omp_set_num_threads(initial_max);
  omp_set_dynamic(0);

  double a[N], b[N];
  for (int i = 0; i < N; ++i) a[i] = i;
#pragma omp target teams distribute parallel for map(to : a) map(from : b)
  for (int i = 0; i < N; ++i) b[i] = 2 * a[i];
  int bad = 0;
  for (int i = 0; i < N; ++i) bad += b[i] != 2.0 * i;
  CHECK_EQ(bad, 0, "target teams distribute parallel for: wrong elements");

  long sum = 0;
#pragma omp target parallel for reduction(+ : sum) map(tofrom : sum)
  for (int i = 1; i <= N; ++i) sum += i;
  CHECK_EQ(sum, (long)N * (N + 1) / 2, "target parallel for reduction");

  /* Every thread of a region meets a target region of its own. */
  int per_thread[64] = {0};
  int levels_wrong = 0;
#pragma omp parallel num_threads(4)
  {
    probe_here();
    int id = omp_get_thread_num();
    int l = -1;
#pragma omp target map(from : l)
    l = omp_get_level();
    if (l != 0) __atomic_add_fetch(&levels_wrong, 1, __ATOMIC_RELAXED);
    if (id < 64) per_thread[id] += 1;
  }
  CHECK_EQ(levels_wrong, 0, "omp_get_level() in target regions met inside a parallel region");
  CHECK_EQ(per_thread[0], 1, "thread 0's target region");

  /* A chain of target nowait tasks on one variable runs in order. */
  int order[16], next = 0;
#pragma omp parallel num_threads(2)
#pragma omp single
  {
    for (int k = 0; k < 16; ++k) {
#pragma omp target nowait depend(inout : next) map(tofrom : order, next) firstprivate(k)
      order[next++] = k;
    }
#pragma omp taskwait
  }
  CHECK_EQ(next, 16, "target nowait tasks run");
  for (int k = 0; k < 16; ++k) CHECK_EQ(order[k], k, "target nowait depend chain, step %d", k);

  int limit = -1;
#pragma omp target thread_limit(3) map(from : limit)
  limit = omp_get_thread_limit();
  check_range(limit, 1, 3, "omp_get_thread_limit() in a target thread_limit(3)");

  int y = 1;
#pragma omp target data map(tofrom : y)
  {
    y = 2;
#pragma omp target update to(y)
#pragma omp target map(tofrom : y)
    y += 1;
  }
#pragma omp target enter data map(to : y)
#pragma omp target exit data map(from : y)
  CHECK_EQ(y, 3, "a variable through target data, update, enter and exit data");

  const int host = omp_get_initial_device();
  CHECK_EQ(host, omp_get_num_devices(), "omp_get_initial_device()");
  int* p = omp_target_alloc(4 * sizeof(int), host);
  check_true(p != NULL, "omp_target_alloc on the host device");
  int src[4] = {1, 2, 3, 4};
  CHECK_EQ(omp_target_memcpy(p, src, sizeof src, 0, 0, host, host), 0, "omp_target_memcpy");
  CHECK_EQ(p[3], 4, "omp_target_memcpy copied");
  CHECK_EQ(omp_target_is_present(src, host), 1, "omp_target_is_present on the host");
  omp_target_free(p, host);
  int grid[3][4], copy[3][4];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) grid[i][j] = 10 * i + j, copy[i][j] = -1;
  size_t volume[2] = {2, 2}, offsets[2] = {1, 2}, dims[2] = {3, 4};
  CHECK_EQ(omp_target_memcpy_rect(copy, grid, sizeof(int), 2, volume, offsets, offsets, dims, dims,
                                  host, host),
           0, "omp_target_memcpy_rect");
  CHECK_EQ(copy[1][2] + copy[1][3] + copy[2][2] + copy[2][3], 12 + 13 + 22 + 23,
           "omp_target_memcpy_rect: the rectangle");
  CHECK_EQ(copy[0][0] + copy[1][1] + copy[2][1], -3, "omp_target_memcpy_rect: outside it");
}

static void task_icvs(void) {
  omp_set_num_threads(4);
  int in_task = -1, after_task = -1, deferred = -1;
  int nested_inner = -1, nested_dynamic = -1, nested_outer = -1;
#pragma omp parallel num_threads(2)
#pragma omp single
  {
    omp_set_num_threads(6);
#pragma omp task if (0)
    {
      omp_set_num_threads(5);
      in_task = omp_get_max_threads();
    }
    after_task = omp_get_max_threads();
#pragma omp task shared(deferred)
    deferred = omp_get_max_threads();
#pragma omp taskwait
    /* Included in included: each change ends with its own task. */
#pragma omp task if (0)
    {
      omp_set_num_threads(7);
#pragma omp task if (0)
      {
        omp_set_num_threads(8);
        omp_set_dynamic(1);
      }
      nested_inner = omp_get_max_threads();
      nested_dynamic = omp_get_dynamic();
    }
    nested_outer = omp_get_max_threads();
  }
  CHECK_EQ(nested_inner, 7, "omp_get_max_threads() after an inner included task set it");
  CHECK_EQ(nested_dynamic, 0, "omp_get_dynamic() after an inner included task set it");
  CHECK_EQ(nested_outer, 6, "omp_get_max_threads() after nested included tasks set it");
  CHECK_EQ(in_task, 5, "omp_get_max_threads() in an included task after setting it");
  CHECK_EQ(after_task, 6, "omp_get_max_threads() after an included task set it");
  CHECK_EQ(deferred, 6, "a deferred task's nthreads-var: its creator's");

  int inside = -1;
#pragma omp parallel num_threads(2)
  {
#pragma omp parallel num_threads(2)
    {
      if (omp_get_thread_num() == 0 && omp_get_ancestor_thread_num(1) == 0)
        inside = omp_get_max_threads();
    }
  }
  CHECK_EQ(inside, 4, "omp_get_max_threads() in an inactive nested region");

  omp_set_max_active_levels(1);
  int others = -1;
#pragma omp parallel num_threads(2)
  {
    if (omp_get_thread_num() == 0) omp_set_max_active_levels(3);
#pragma omp barrier
    if (omp_get_thread_num() == 1) others = omp_get_max_active_levels();
  }
  CHECK_EQ(others, 1, "omp_set_max_active_levels of another thread");
  CHECK_EQ(omp_get_max_active_levels(), 1, "omp_get_max_active_levels() after the region");
}

int main(void) {
  test_begin("target_teams");
  host_teams();
  target_regions();
  task_icvs();
  return test_end();
}
