// omp-test taskloop_reduction: a reduction(+) on taskloop (an OpenMP 5.0
// task reduction, with entry points of its own: GOMP_taskgroup_reduction_*)
// checked against the serial sum.
#include <omp.h>

#include "check.h"

namespace {

// Opaque to the optimizer: the loop below then reads and writes `sum` each iteration,
// so a missing reduction shows up as lost updates.
__attribute__((noipa)) long term(long i) { return i * i % 97; }

void test_reduction() {
  constexpr long kReductionSizes[] = {0, 1, 3, 1001, 100000};
  for (long n : kReductionSizes) {
    long sum = 11, ref = 11;
    for (long i = 0; i < n; ++i) ref += term(i);
#pragma omp parallel
    {
      probe_here();
#pragma omp single
#pragma omp taskloop reduction(+ : sum) num_tasks(50)
      for (long i = 0; i < n; ++i) sum += term(i);
    }
    CHECK_EQ(sum, ref, "taskloop reduction(+), n=%ld", n);
  }
}

}  // namespace

int main() {
  test_begin("taskloop_reduction");
  test_reduction();
  return test_end();
}
