/* ring: a token goes around the ranks, LAPS times; each rank adds its rank
 * number to it. Plain MPI: build it with weft-mpicc (examples/mpi/README.md).
 *   ./ring [LAPS] --weft:threads=2 --weft:vp=8
 * Rank 0 checks the token: LAPS * (0 + 1 + ... + size-1). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const long laps = argc > 1 ? atol(argv[1]) : 1000;
  if (laps <= 0) {
    if (rank == 0) fprintf(stderr, "usage: ring [LAPS > 0]\n");
    MPI_Finalize();
    return 2;
  }
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  long token = 0;
  const double t0 = MPI_Wtime();
  for (long lap = 0; lap < laps; ++lap) {
    if (rank == 0) {
      token += rank;
      MPI_Send(&token, 1, MPI_LONG, next, 0, MPI_COMM_WORLD);
      MPI_Recv(&token, 1, MPI_LONG, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(&token, 1, MPI_LONG, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      token += rank;
      MPI_Send(&token, 1, MPI_LONG, next, 0, MPI_COMM_WORLD);
    }
  }
  const double t = MPI_Wtime() - t0;
  int code = 0;
  if (rank == 0) {
    const long expect = laps * (long)size * (size - 1) / 2;
    code = token == expect ? 0 : 1;
    printf("ring: %d ranks, %ld laps, token %ld (%s), %.3f us per hop\n", size, laps, token,
           code == 0 ? "right" : "WRONG", t / (double)(laps * size) * 1e6);
  }
  MPI_Finalize();
  return code;
}
