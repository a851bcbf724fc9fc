/* An imbalanced rank workload (issue 28's scheduling domains): each
 * iteration every rank computes, then all agree on a sum (MPI_Allreduce);
 * the first half of the ranks compute HEAVY times as long as the others.
 * With the block map the heavy ranks share the first half of the PEs, so
 * under --weft:rank-domain=pe those PEs set the pace while the others wait;
 * under --weft:rank-domain=node a PE whose ranks all wait runs the heavy
 * ranks' computations between their calls. Prints the time per iteration
 * (the median of --repeat batches).
 *   mpi_ranks_imbalance_weft --weft:threads=2 --weft:vp=8 [--weft:rank-domain=node]
 *       [--iters N] [--heavy H] [--unit K] [--repeat R]
 * --unit: the light ranks' work per iteration, in thousands of
 * multiply-adds (default 200, about 0.2 ms here). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double work(long n, double seed) {
  double x = seed;
  for (long i = 0; i < n; ++i) x = x * 0.999999 + 1e-7;
  return x;
}

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, iters = 20, heavy = 3, repeat = 5;
  long unit = 200;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 1; i + 1 < argc; ++i) {
    if (strcmp(argv[i], "--iters") == 0)
      iters = atoi(argv[++i]);
    else if (strcmp(argv[i], "--heavy") == 0)
      heavy = atoi(argv[++i]);
    else if (strcmp(argv[i], "--unit") == 0)
      unit = atol(argv[++i]);
    else if (strcmp(argv[i], "--repeat") == 0)
      repeat = atoi(argv[++i]);
  }
  if (iters < 1 || heavy < 1 || unit < 1 || repeat < 1 || repeat > 64) {
    if (rank == 0)
      fprintf(stderr, "imbalance: --iters, --heavy, --unit must be >= 1, --repeat 1..64\n");
    MPI_Finalize();
    return 2;
  }
  const long n = unit * 1000 * (rank < size / 2 ? heavy : 1);
  double times[64], sink = 0.0;
  for (int r = -1; r < repeat; ++r) { /* r = -1: warm-up */
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int it = 0; it < iters; ++it) {
      double mine = work(n, 1.0 + rank), sum = 0.0;
      MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      sink += sum;
    }
    const double t = (MPI_Wtime() - t0) / iters;
    if (r >= 0) times[r] = t;
  }
  qsort(times, (size_t)repeat, sizeof times[0], cmp);
  if (rank == 0)
    printf("imbalance: %d ranks, heavy x%d, %.3f ms per iteration (median of %d; %.1f)\n", size,
           heavy, times[repeat / 2] * 1e3, repeat, sink > 0 ? 1.0 : 0.0);
  MPI_Finalize();
  return 0;
}
