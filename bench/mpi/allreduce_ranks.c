/* Collectives across all ranks (issue 28's second benchmark): time per
 * call of MPI_Allreduce of 8 doubles (64 B) and of 8192 doubles (64 KiB,
 * MPI_SUM), and of MPI_Barrier, as plain MPI C built twice from this
 * source -- mpi_ranks_allreduce_weft (weft's mpi.h, linked as weft-mpicc
 * links) and mpi_ranks_allreduce_openmpi (Open MPI) -- to run side by side:
 *   mpi_ranks_allreduce_weft --weft:threads=2 --weft:vp=8   (8 ranks, 2 PEs)
 *   mpiexec -n 8 --oversubscribe mpi_ranks_allreduce_openmpi
 * Prints "what microseconds_per_call" per operation, the median of
 * --repeat N (default 5) timed batches after a warm-up batch; the result
 * of each allreduce is checked (a wrong sum exits 1). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* 0: barrier; otherwise allreduce of n doubles. */
static double batch(int n, int iters, double* in, double* out) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i) {
    if (n == 0)
      MPI_Barrier(MPI_COMM_WORLD);
    else
      MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  double t = (MPI_Wtime() - t0) / iters;
  /* Every rank's time is the slowest one's: a collective ends together. */
  double slowest = 0;
  MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, repeat = 5;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 1; i < argc; ++i)
    if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) repeat = atoi(argv[++i]);
  if (repeat < 1) repeat = 1;
  if (repeat > 64) repeat = 64;
  enum { big = 8192 };
  double* in = malloc(big * sizeof(double));
  double* out = malloc(big * sizeof(double));
  for (int i = 0; i < big; ++i) in[i] = rank + i;
  const struct {
    const char* what;
    int n, iters;
  } ops[] = {{"allreduce_8_doubles", 8, 2000}, {"allreduce_64KiB", big, 200}, {"barrier", 0, 2000}};
  double times[64];
  if (rank == 0) printf("# %d ranks; what us_per_call (median of %d)\n", size, repeat);
  int bad = 0;
  for (int k = 0; k < 3; ++k) {
    for (int r = -1; r < repeat; ++r) {
      const double t = batch(ops[k].n, ops[k].iters, in, out);
      if (r >= 0) times[r] = t;
    }
    for (int i = 0; i < ops[k].n; ++i)
      if (out[i] != (double)size * (size - 1) / 2 + (double)size * i) bad = 1;
    if (rank == 0) {
      qsort(times, (size_t)repeat, sizeof times[0], cmp);
      printf("%s %.3f\n", ops[k].what, times[repeat / 2] * 1e6);
      fflush(stdout);
    }
  }
  if (bad) fprintf(stderr, "allreduce_ranks: rank %d: a wrong sum\n", rank);
  free(in);
  free(out);
  MPI_Finalize();
  return bad;
}
