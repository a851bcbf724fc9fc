/* omp-test spin: threads of a team that wait on each other by spinning
 * (plain C).
 *
 * Wavefront solvers (lower/upper triangular sweeps, as NPB's LU) pipeline
 * their threads with flags and `#pragma omp flush` in busy-wait loops that
 * make no runtime call: thread t starts step k once thread t-1 finished it.
 * OpenMP expects the threads of a team to progress concurrently, so such a
 * team must finish whatever its size against the cores or workers of the
 * runtime. Checked, for teams of 1, 2, 4, 8 and 16 threads:
 *  - a forward and a backward pipeline over `steps` steps (the lower and
 *    upper sweeps), the busy wait only reading a volatile flag and
 *    flushing, with a barrier between the sweeps, and every step of every
 *    thread done once and in pipeline order;
 *  - the same with sched_yield() in the wait (a system call, still no
 *    runtime call), over more steps;
 *  - a ring handoff: a token passes round the team `laps` times, each
 *    thread spinning until it holds it.
 * --steps=N scales the work (default 24); --max-team=N leaves out the
 * larger teams. OMPTEST_LOAD=k adds k spinning processes (load.h).
 *
 * The flags are read and written with __atomic builtins beside the flushes
 * (relaxed reads while spinning, one acquire read once the flag is there,
 * release writes), so that ThreadSanitizer sees the hand-offs (NPB reads
 * plain variables between flushes, which it cannot follow); the waits make
 * no runtime call either way.
 */
#include <omp.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "load.h"

enum { MAX_TEAM = 16, MAX_STEPS = 4096 };

static const int team_sizes[] = {1, 2, 4, 8, 16};
enum { NUM_SIZES = sizeof team_sizes / sizeof team_sizes[0] };

/* progress[t]: steps thread t finished in the current sweep. */
static int progress[MAX_TEAM];
/* order[t][k]: the global sequence number at which thread t did step k. */
static long order[MAX_TEAM][MAX_STEPS];
static long sequence;

static void wait_for(int t, int at_least, int yield) {
  while (__atomic_load_n(&progress[t], __ATOMIC_RELAXED) < at_least) {
    if (yield) sched_yield();
#pragma omp flush
  }
  (void)__atomic_load_n(&progress[t], __ATOMIC_ACQUIRE);
}

/* One sweep: forward (thread t after t-1) or backward (t after t+1). */
static void sweep(int id, int n, int steps, int forward, int yield) {
  const int pred = forward ? id - 1 : id + 1;
  for (int k = 0; k < steps; ++k) {
    if (pred >= 0 && pred < n) wait_for(pred, k + 1, yield);
    order[id][k] = __atomic_add_fetch(&sequence, 1, __ATOMIC_RELAXED);
#pragma omp flush
    __atomic_store_n(&progress[id], k + 1, __ATOMIC_RELEASE);
#pragma omp flush
  }
}

static void check_order(int n, int steps, int forward, const char* what) {
  int bad = 0;
  for (int t = 0; t < n; ++t)
    for (int k = 0; k < steps; ++k) {
      const int pred = forward ? t - 1 : t + 1;
      if (order[t][k] <= 0) ++bad;
      else if (pred >= 0 && pred < n && order[pred][k] >= order[t][k]) ++bad;
      else if (k > 0 && order[t][k - 1] >= order[t][k]) ++bad;
    }
  CHECK_EQ(bad, 0, "%s, teams of %d: steps missing or out of pipeline order", what, n);
}

static void test_pipeline(int n, int steps, int yield) {
  const char* what = yield ? "pipeline with sched_yield" : "pipeline busy-wait";
  int team = 0;
  memset(order, 0, sizeof order);
  for (int t = 0; t < MAX_TEAM; ++t) __atomic_store_n(&progress[t], 0, __ATOMIC_RELAXED);
#pragma omp parallel num_threads(n)
  {
    probe_here();
    const int id = omp_get_thread_num(), nt = omp_get_num_threads();
#pragma omp master
    team = nt;
    sweep(id, nt, steps, 1, yield);
#pragma omp barrier
#pragma omp master
    {
      check_order(nt, steps, 1, what);
      memset(order, 0, sizeof order);
      for (int t = 0; t < MAX_TEAM; ++t) __atomic_store_n(&progress[t], 0, __ATOMIC_RELAXED);
    }
#pragma omp barrier
    sweep(id, nt, steps, 0, yield);
  }
  check_order(team, steps, 0, what);
  if (!omp_get_dynamic()) CHECK_EQ(team, n, "%s: team size", what);
}

/* A token goes round the team: thread t spins until it holds it. */
static void test_ring(int n, int laps) {
  static int token;
  static int held[MAX_TEAM];
  __atomic_store_n(&token, 0, __ATOMIC_RELAXED);
  memset(held, 0, sizeof held);
  int team = 0;
#pragma omp parallel num_threads(n)
  {
    const int id = omp_get_thread_num(), nt = omp_get_num_threads();
#pragma omp master
    team = nt;
    for (int lap = 0; lap < laps; ++lap) {
      const int mine = lap * nt + id;
      while (__atomic_load_n(&token, __ATOMIC_RELAXED) != mine) {
#pragma omp flush
      }
      (void)__atomic_load_n(&token, __ATOMIC_ACQUIRE);
      ++held[id];
#pragma omp flush
      __atomic_store_n(&token, mine + 1, __ATOMIC_RELEASE);
#pragma omp flush
    }
  }
  CHECK_EQ(token, team * laps, "ring, teams of %d: token passes", n);
  for (int t = 0; t < team; ++t) CHECK_EQ(held[t], laps, "ring, teams of %d: laps of thread %d", n, t);
}

int main(int argc, char** argv) {
  test_begin("spin");
  int steps = 24, max_team = MAX_TEAM;
  for (int a = 1; a < argc; ++a) {
    if (strncmp(argv[a], "--steps=", 8) == 0 && atoi(argv[a] + 8) > 0 &&
        atoi(argv[a] + 8) <= MAX_STEPS / 8) {
      steps = atoi(argv[a] + 8);
    } else if (strncmp(argv[a], "--max-team=", 11) == 0 && atoi(argv[a] + 11) > 0) {
      max_team = atoi(argv[a] + 11);
    } else {
      printf("omp-test spin: unknown argument '%s' (accepted: --steps=N, 0 < N <= %d; "
             "--max-team=N, N > 0)\n",
             argv[a], MAX_STEPS / 8);
      return 2;
    }
  }
  load_begin();
  for (int s = 0; s < NUM_SIZES; ++s) {
    const int n = team_sizes[s];
    if (n > max_team) break;
    test_pipeline(n, steps, 0);
    test_pipeline(n, steps * 8, 1);
    test_ring(n, steps / 4 + 1);
  }
  load_end();
  return test_end();
}
