/* What the mpi-test programs of tests/mpi share. A program defines
 * TEST_NAME ("extras") and `int failures[MAX_RANKS]` (by world rank: the
 * ranks of a process share its globals), then includes this.
 *
 * CHECK(cond, fmt, ...): a failed check prints "<name>: FAIL on rank R:
 * <what>" and counts against `rank` (the calling rank, in scope).
 *
 * tally(): the end of the program. Every rank's count of failed checks
 * reaches rank 0 by point-to-point (nothing the test checks is needed for
 * it), which prints "<name>: ok N ranks" if there were none. Returns the
 * calling rank's exit code. */
#ifndef WEFT_TESTS_MPI_TALLY_H
#define WEFT_TESTS_MPI_TALLY_H
#include <mpi.h>
#include <stdio.h>

#define CHECK(cond, ...)                                \
  do {                                                  \
    if (!(cond)) {                                      \
      ++failures[rank];                                 \
      printf("%s: FAIL on rank %d: ", TEST_NAME, rank); \
      printf(__VA_ARGS__);                              \
      printf("\n");                                     \
    }                                                   \
  } while (0)

static inline int tally(const char* name, int rank, int size, int failures) {
  int all = failures;
  if (rank == 0) {
    for (int i = 1; i < size; ++i) {
      int f = 0;
      MPI_Recv(&f, 1, MPI_INT, i, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      all += f;
    }
    if (all == 0) printf("%s: ok %d ranks\n", name, size);
  } else {
    MPI_Send(&failures, 1, MPI_INT, 0, 99, MPI_COMM_WORLD);
  }
  return failures != 0;
}

#endif
