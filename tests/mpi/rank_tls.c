/* mpi-test rank_tls: the program's thread-local variables are each rank's
 * own (--weft:rank-tls=private, the default), although the ranks of a PE
 * run on its one OS thread: each starts as a new thread's (initialized
 * ones with their value, the rest zero), keeps what its rank wrote across
 * calls that switch to the other ranks, and keeps its address.
 * With "shared" as argument (run with --weft:rank-tls=shared) it counts
 * instead the ranks that found another rank's value, and prints it: more
 * ranks than PEs must find some. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

__thread int tls_rank = -1; /* .tdata */
_Thread_local long tls_counter = 7;
__thread double tls_buf[64]; /* .tbss */
static __thread char tls_name[32];

static int check_rank_at(const int* where, int rank) {
  MPI_Barrier(MPI_COMM_WORLD); /* the other ranks of the PE run meanwhile */
  return *where == rank && where == &tls_rank;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int shared = argc > 1 && strcmp(argv[1], "shared") == 0;
  int bad = 0;
  if (!shared) {
    if (tls_rank != -1 || tls_counter != 7 || tls_name[0] != 0) ++bad;
    for (int i = 0; i < 64; ++i)
      if (tls_buf[i] != 0.0) ++bad;
    if (bad) printf("FAIL rank %d: its thread-locals did not start as a new thread's\n", rank);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  tls_rank = rank;
  for (int i = 0; i < 64; ++i) tls_buf[i] = rank + i;
  snprintf(tls_name, sizeof tls_name, "rank %d", rank);
  int foreign = 0;
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  for (int round = 0; round < 20; ++round) {
    int token = rank, got = -1;
    MPI_Sendrecv(&token, 1, MPI_INT, right, round, &got, 1, MPI_INT, left, round, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (got != left) ++bad;
    if (tls_rank != rank) ++foreign;
    if (!check_rank_at(&tls_rank, rank)) ++foreign;
    tls_counter += 1;
  }
  char want[32];
  snprintf(want, sizeof want, "rank %d", rank);
  if (tls_counter != 27 || strcmp(tls_name, want) != 0) ++foreign;
  for (int i = 0; i < 64; ++i)
    if (tls_buf[i] != rank + i) ++foreign;
  int totals[2] = {bad, foreign != 0}, sums[2];
  MPI_Allreduce(totals, sums, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (shared)
      printf("rank_tls: shared, %d of %d ranks found another rank's values\n", sums[1], size);
    else if (sums[0] == 0 && sums[1] == 0)
      printf("rank_tls: ok %d ranks\n", size);
    else
      printf("FAIL: %d errors, %d ranks found another rank's thread-locals\n", sums[0], sums[1]);
  }
  MPI_Finalize();
  return 0;
}
