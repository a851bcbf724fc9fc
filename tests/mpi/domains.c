/* mpi-test domains: --weft:rank-domain=node lets a PE whose ranks all wait
 * run another PE's rank between that rank's MPI calls. The first half of
 * the ranks compute for a while each round (so their PEs lag), the others
 * hardly at all, then all agree on a sum. Each rank notes the OS thread it
 * computes on against the one it started on (its home PE's): under node
 * some heavy ranks must have computed elsewhere; under pe (the argument
 * "pe") none may. Either way the sums are right and each rank's stack
 * and heap data stay its own across the moves. (A program with
 * thread-locals of its own keeps its ranks home: docs/mpi.md.) */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Computes for `seconds`, calling MPI now and then (each call's end is a
 * chance to move to a free PE); notes whether it ran on another thread
 * than `home`. */
static double spin(double seconds, double seed, pid_t home, int* moved) {
  const double end = MPI_Wtime() + seconds;
  double x = seed;
  while (MPI_Wtime() < end) {
    for (int i = 0; i < 1000; ++i) x = x * 0.999999 + 1e-7;
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (gettid() != home) *moved = 1;
  }
  return x;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int expect_moves = !(argc > 1 && strcmp(argv[1], "pe") == 0);
  const pid_t home = gettid();
  volatile int my_rank = rank;
  double* acc = calloc(16, sizeof *acc);
  int moved = 0, bad = 0;
  for (int round = 0; round < 20; ++round) {
    const int heavy = rank < size / 2;
    spin(heavy ? 2e-3 : 1e-5, rank, home, &moved);
    acc[round % 16] += rank;
    if (my_rank != rank) ++bad;
    int mine = rank + round, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (sum != size * (size - 1) / 2 + size * round) ++bad;
    if (my_rank != rank) ++bad;
  }
  for (int i = 0; i < 16; ++i)
    if (acc[i] != rank * (i < 4 ? 2 : 1)) ++bad;
  free(acc);
  int totals[2] = {bad, moved}, sums[2];
  MPI_Allreduce(totals, sums, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (sums[0] != 0)
      printf("FAIL domains: %d errors\n", sums[0]);
    else if (expect_moves && size > 2 && sums[1] == 0)
      printf("FAIL domains: no rank ran away from its PE\n");
    else if (!expect_moves && sums[1] != 0)
      printf("FAIL domains: %d ranks ran away from their PE under rank-domain=pe\n", sums[1]);
    else
      printf("domains: ok %d ranks, %d ran on another PE\n", size, sums[1]);
  }
  MPI_Finalize();
  return 0;
}
