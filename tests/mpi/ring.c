/* mpi-test ring: a token goes around the ranks ROUNDS times, each rank
 * adding its rank; rank 0 checks the sum. Blocking MPI_Send / MPI_Recv
 * only, with MPI_Init and MPI_Finalize; prints "ring: ok N ranks". */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int rounds = 50;
  long token = 0;
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  for (int r = 0; r < rounds; ++r) {
    if (rank == 0) {
      token += rank;
      MPI_Send(&token, 1, MPI_LONG, next, r, MPI_COMM_WORLD);
      MPI_Recv(&token, 1, MPI_LONG, prev, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(&token, 1, MPI_LONG, prev, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      token += rank;
      MPI_Send(&token, 1, MPI_LONG, next, r, MPI_COMM_WORLD);
    }
  }
  int code = 0;
  if (rank == 0) {
    const long want = (long)rounds * size * (size - 1) / 2;
    if (token != want) {
      printf("ring: FAIL: token %ld, expected %ld\n", token, want);
      code = 1;
    } else {
      printf("ring: ok %d ranks\n", size);
    }
  }
  MPI_Finalize();
  return code;
}
