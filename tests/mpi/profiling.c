/* mpi-test profiling: the profiling interface. The program defines
 * MPI_Send and MPI_Recv itself, counts its calls and hands each to
 * PMPI_Send and PMPI_Recv (weft's functions under their second names), as
 * a profiling tool does; it calls PMPI_Comm_rank, PMPI_Comm_size and
 * PMPI_Wtime directly. A ring of 10 rounds: each rank's counts must be 10
 * sends and 10 receives, and every token must arrive.
 * Every failed check prints a line; rank 0 prints "profiling: ok N ranks". */
#include <mpi.h>
#include <stdio.h>
#define TEST_NAME "profiling"
#define MAX_RANKS 256
/* By world rank: the ranks of a process share its globals. */
static int sends[MAX_RANKS], recvs[MAX_RANKS], failures[MAX_RANKS];
#include "tally.h"

static int world_rank(void) {
  int r;
  PMPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int MPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  ++sends[world_rank()];
  return PMPI_Send(buf, count, type, dest, tag, comm);
}

int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status* status) {
  ++recvs[world_rank()];
  return PMPI_Recv(buf, count, type, source, tag, comm, status);
}

int main(int argc, char** argv) {
  PMPI_Init(&argc, &argv);
  int rank, size;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  const double t0 = PMPI_Wtime();
  for (int round = 0; round < 10; ++round) {
    int token = round * 1000 + rank, got = -1;
    if (rank % 2 == 0) {
      MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, round, MPI_COMM_WORLD);
      MPI_Recv(&got, 1, MPI_INT, (rank + size - 1) % size, round, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(&got, 1, MPI_INT, (rank + size - 1) % size, round, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
      MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, round, MPI_COMM_WORLD);
    }
    if (got != round * 1000 + (rank + size - 1) % size) {
      ++failures[rank];
      printf("profiling: FAIL on rank %d: round %d got %d\n", rank, round, got);
    }
  }
  if (sends[rank] != 10 || recvs[rank] != 10) {
    ++failures[rank];
    printf("profiling: FAIL on rank %d: %d sends and %d receives counted, not 10 and 10\n", rank,
           sends[rank], recvs[rank]);
  }
  if (!(PMPI_Wtime() >= t0)) {
    ++failures[rank];
    printf("profiling: FAIL on rank %d: PMPI_Wtime went back\n", rank);
  }
  /* tally's messages go through the counting MPI_Send and MPI_Recv too,
   * after the counts were checked. */
  const int code = tally(TEST_NAME, rank, size, failures[rank]);
  PMPI_Finalize();
  return code;
}
