/* mpi-test hybrid: MPI with OpenMP in one program (compiled with -fopenmp,
 * linked as weft-mpicc links, so its OpenMP runtime is the compiler's
 * libgomp): each rank runs parallel regions of its own team while the
 * ranks exchange messages outside them (MPI_THREAD_FUNNELED). Checks each
 * rank's reduction and its team's size; rank 0 prints "hybrid: ok N ranks". */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>

int main(int argc, char** argv) {
  int provided = -1, rank, size, bad = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (provided < MPI_THREAD_FUNNELED) {
    printf("hybrid: FAIL: provided %d\n", provided);
    bad = 1;
  }
  for (int round = 0; round < 20; ++round) {
    long sum = 0;
#pragma omp parallel for reduction(+ : sum)
    for (long i = 0; i < 100000; ++i) sum += i % 7 + rank;
    int team = 0;
#pragma omp parallel
    {
#pragma omp single
      team = omp_get_num_threads();
    }
    long expect = 0;
    for (long i = 0; i < 100000; ++i) expect += i % 7 + rank;
    if (sum != expect || team != 2) {
      printf("hybrid: FAIL on rank %d round %d: sum %ld (expected %ld), team %d\n", rank, round,
             sum, expect, team);
      bad = 1;
    }
    /* A ring exchange between the regions. */
    long token = sum, got = -1;
    MPI_Sendrecv(&token, 1, MPI_LONG, (rank + 1) % size, round, &got, 1, MPI_LONG,
                 (rank + size - 1) % size, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (got < 0) bad = 1;
  }
  if (rank == 0) {
    for (int r = 1; r < size; ++r) {
      int b = 0;
      MPI_Recv(&b, 1, MPI_INT, r, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      bad |= b;
    }
    if (!bad) printf("hybrid: ok %d ranks\n", size);
  } else {
    MPI_Send(&bad, 1, MPI_INT, 0, 99, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return bad;
}
