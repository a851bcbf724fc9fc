/* The end of an mpi-test program: every rank's count of failed checks
 * reaches rank 0 by point-to-point (nothing the test checks is needed for
 * it), which prints "<name>: ok N ranks" if there were none. Returns the
 * calling rank's exit code. */
#ifndef WEFT_TESTS_MPI_TALLY_H
#define WEFT_TESTS_MPI_TALLY_H
#include <mpi.h>
#include <stdio.h>

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
