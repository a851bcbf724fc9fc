/* kNeighbor written in MPI (issue 28): ranks on a ring; in each iteration
 * every rank posts receives from its k neighbours on both sides, sends them
 * a message each and waits for all 4k requests (MPI_Waitall) before the
 * next iteration -- the pattern of bench/kneighbor at the objects level,
 * so that the two, run side by side (bench/mpi/compare.sh), show what the
 * MPI layer costs over weft's objects.
 *   kneighbor_ranks [--k K] [--bytes B] [--iters N] [--repeat R]
 * Prints "kneighbor_mpi: ranks=P k=K bytes=B us_per_iteration=T" (the
 * median of R timed batches after a warm-up). The receiver reads the
 * stamp (first 8 bytes) and checks it. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, k = 3, bytes = 16, iters = 2000, repeat = 5;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 1; i + 1 < argc; ++i) {
    if (strcmp(argv[i], "--k") == 0)
      k = atoi(argv[++i]);
    else if (strcmp(argv[i], "--bytes") == 0)
      bytes = atoi(argv[++i]);
    else if (strcmp(argv[i], "--iters") == 0)
      iters = atoi(argv[++i]);
    else if (strcmp(argv[i], "--repeat") == 0)
      repeat = atoi(argv[++i]);
  }
  if (k < 1 || bytes < 8 || iters < 1 || repeat < 1 || repeat > 64) {
    if (rank == 0)
      fprintf(stderr, "kneighbor_ranks: --k >= 1, --bytes >= 8, --iters >= 1, --repeat 1..64\n");
    MPI_Finalize();
    return 2;
  }
  const int n = 2 * k;
  char* out = malloc((size_t)bytes * n);
  char* in = malloc((size_t)bytes * n);
  memset(out, 1, (size_t)bytes * n);
  MPI_Request* q = malloc(sizeof *q * 2 * n);
  double times[64];
  long bad = 0;
  for (int r = -1; r < repeat; ++r) { /* r = -1: warm-up */
    const double t0 = MPI_Wtime();
    for (long it = 0; it < iters; ++it) {
      for (int j = 0; j < n; ++j) {
        const int d = j < k ? j + 1 : -(j - k + 1);
        const int from = ((rank - d) % size + size) % size;
        MPI_Irecv(in + (size_t)j * bytes, bytes, MPI_BYTE, from, 0, MPI_COMM_WORLD, &q[j]);
      }
      for (int j = 0; j < n; ++j) {
        const int d = j < k ? j + 1 : -(j - k + 1);
        const int to = ((rank + d) % size + size) % size;
        memcpy(out + (size_t)j * bytes, &it, sizeof it);
        MPI_Isend(out + (size_t)j * bytes, bytes, MPI_BYTE, to, 0, MPI_COMM_WORLD, &q[n + j]);
      }
      MPI_Waitall(2 * n, q, MPI_STATUSES_IGNORE);
      for (int j = 0; j < n; ++j) {
        long stamp;
        memcpy(&stamp, in + (size_t)j * bytes, sizeof stamp);
        bad += stamp != it;
      }
    }
    if (r >= 0) times[r] = (MPI_Wtime() - t0) / iters;
  }
  qsort(times, (size_t)repeat, sizeof times[0], cmp);
  if (rank == 0)
    printf("kneighbor_mpi: ranks=%d k=%d bytes=%d us_per_iteration=%.3f\n", size, k, bytes,
           times[repeat / 2] * 1e6);
  if (bad != 0) printf("kneighbor_mpi: FAIL: rank %d saw %ld wrong stamps\n", rank, bad);
  free(out);
  free(in);
  free(q);
  MPI_Finalize();
  return bad != 0;
}
