/* omp-test stack_arrays: OpenMP threads get libgomp's stack sizes, so that
 * programs sized by them run unchanged:
 *  - by default the C library's default thread stack (from `ulimit -s`,
 *    8 MiB as a rule): every thread of a team fills a 6 MiB array on its
 *    stack (skipped where the limit is below 8 MiB or unlimited);
 *  - with OMP_STACKSIZE (the ARGS --stacksize-mib=M of the test): an array
 *    of M - 2 MiB per thread but thread 0, which runs on the program's own
 *    stack (OMP_STACKSIZE is not its size) and fills 1 MiB.
 * Each thread checks its own array's sum. */
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static long fill_and_sum(size_t bytes) {
  volatile unsigned char* a = __builtin_alloca(bytes);
  for (size_t i = 0; i < bytes; i += 64) a[i] = (unsigned char)(i >> 6);
  long sum = 0;
  for (size_t i = 0; i < bytes; i += 64) sum += a[i];
  return sum;
}

static long expected_sum(size_t bytes) {
  long sum = 0;
  for (size_t i = 0; i < bytes; i += 64) sum += (unsigned char)(i >> 6);
  return sum;
}

int main(int argc, char** argv) {
  test_begin("stack_arrays");
  size_t mib = 0;
  for (int i = 1; i < argc; ++i)
    if (strncmp(argv[i], "--stacksize-mib=", 16) == 0) mib = (size_t)atol(argv[i] + 16);
  size_t bytes = 0;
  if (mib != 0) {
    bytes = (mib - 2) << 20;
  } else {
    pthread_attr_t attr;
    size_t thread_default = 0;
    pthread_attr_init(&attr);
    pthread_attr_getstacksize(&attr, &thread_default);
    pthread_attr_destroy(&attr);
    if (thread_default < ((size_t)8 << 20)) return test_end();
    bytes = (size_t)6 << 20;
  }
  const size_t first = mib != 0 ? (size_t)1 << 20 : bytes;
  const long want = expected_sum(bytes), want_first = expected_sum(first);
  int wrong = 0, ran = 0;
#pragma omp parallel reduction(+ : wrong, ran)
  {
    probe_here();
    if (omp_get_thread_num() == 0) {
      if (fill_and_sum(first) != want_first) ++wrong;
    } else if (fill_and_sum(bytes) != want) {
      ++wrong;
    }
    ++ran;
  }
  CHECK_EQ(wrong, 0, "threads whose %zu-byte stack array summed wrong", bytes);
  CHECK_EQ(ran, omp_get_max_threads(), "threads that ran");
  return test_end();
}
