/* omp-test program_threads: two threads of the program meet their first
 * parallel regions at the same time (plain C, POSIX threads).
 *
 * Either may start the runtime; the other then runs its regions with the
 * threads it can have (one, where its thread is not one of the runtime's).
 * Each region must still run whole: every thread of its team once, a
 * reduction over them right, each program thread's own nthreads-var seen
 * inside and unchanged by the other's.
 */
#include <omp.h>
#include <pthread.h>

#include "check.h"

enum { ROUNDS = 20 };

static pthread_barrier_t start;

static void* program_thread(void* arg) {
  const int want = arg != NULL ? 3 : 2;
  omp_set_num_threads(want);
  pthread_barrier_wait(&start);
  for (int round = 0; round < ROUNDS; ++round) {
    int sum = 0, size = 0, max_wrong = 0;
#pragma omp parallel reduction(+ : sum)
    {
      probe_here();
      sum += omp_get_thread_num() + 1;
      if (omp_get_max_threads() != want) max_wrong = 1;
#pragma omp single
      size = omp_get_num_threads();
    }
    check_range(size, 1, want, "team size of program thread %d's region", want);
    CHECK_EQ(sum, size * (size + 1) / 2, "sum over program thread %d's team", want);
    CHECK_EQ(max_wrong, 0, "omp_get_max_threads() inside program thread %d's region", want);
    CHECK_EQ(omp_get_max_threads(), want, "program thread %d's nthreads-var after a region", want);
  }
  return NULL;
}

int main(void) {
  test_begin("program_threads");
  pthread_barrier_init(&start, NULL, 2);
  pthread_t other;
  if (pthread_create(&other, NULL, program_thread, NULL) != 0) return 2;
  program_thread("main");
  pthread_join(other, NULL);
  pthread_barrier_destroy(&start);
  return test_end();
}
