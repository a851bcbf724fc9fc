// omp-test exit_calls: the OpenMP routines called from the constructor and
// the destructor of a global object -- before main, and at exit after the
// main thread's thread-locals were destroyed (GCC's pr27337 does this). The
// destructor's calls must answer as the initial thread does (thread 0 of
// a team of one) and touch nothing freed: the AddressSanitizer build
// checks the second part.
#include <omp.h>
#include <cstdio>
#include <cstdlib>

namespace {

struct asks_at_both_ends {
  asks_at_both_ends() {
    if (omp_get_thread_num() != 0 || omp_get_num_threads() != 1) std::abort();
  }
  ~asks_at_both_ends() {
    // No check.h here: its counters may already be gone. A wrong answer
    // ends the program with a distinct status.
    if (omp_get_thread_num() != 0 || omp_get_num_threads() != 1 || omp_in_parallel() != 0 ||
        omp_get_max_threads() < 1)
      std::_Exit(7);
  }
} global_object;

}  // namespace

int main() {
  int team = 0;
#pragma omp parallel
#pragma omp single
  team = omp_get_num_threads();
  if (team < 1) return 1;
  std::printf("omp-test exit_calls: ok\n");
  return 0;
}
