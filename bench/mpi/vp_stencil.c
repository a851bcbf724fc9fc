/* The virtualization factor (Phoenix Fig. 3, AMPI; issue 28): a fixed
 * amount of work -- a 1-D three-point stencil over CELLS cells, SWEEPS
 * sweeps -- split over however many ranks run it, each exchanging one
 * halo cell with each neighbour per sweep. Run with 1, 2, 4, 8, 16 ranks
 * per PE (--weft:vp=PEs*f): the time shows what more, smaller ranks cost
 * (switches, messages) or gain (cache: a rank's part fits better).
 *   vp_stencil [--cells N] [--sweeps S]
 * Prints "vp_stencil: ranks=R cells=N sweeps=S seconds=T checksum=C"; the
 * checksum is the same for every rank count (the sweeps are exact). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  long cells = 1L << 22, sweeps = 200;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 1; i + 1 < argc; ++i) {
    if (strcmp(argv[i], "--cells") == 0)
      cells = atol(argv[++i]);
    else if (strcmp(argv[i], "--sweeps") == 0)
      sweeps = atol(argv[++i]);
  }
  if (cells < size || sweeps < 1) {
    if (rank == 0) fprintf(stderr, "vp_stencil: --cells >= ranks, --sweeps >= 1\n");
    MPI_Finalize();
    return 2;
  }
  const long lo = cells * rank / size, hi = cells * (rank + 1) / size, n = hi - lo;
  double* u = malloc(sizeof *u * (size_t)(n + 2));
  double* v = malloc(sizeof *v * (size_t)(n + 2));
  for (long i = 0; i < n + 2; ++i) u[i] = v[i] = 0;
  for (long i = 1; i <= n; ++i) u[i] = (double)((lo + i - 1) % 97);
  const int left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
  const int right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
  /* Start together: every rank reports to rank 0, which releases them. */
  int token = 0;
  if (rank == 0) {
    for (int r = 1; r < size; ++r)
      MPI_Recv(&token, 1, MPI_INT, r, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int r = 1; r < size; ++r) MPI_Send(&token, 1, MPI_INT, r, 8, MPI_COMM_WORLD);
  } else {
    MPI_Send(&token, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
    MPI_Recv(&token, 1, MPI_INT, 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  const double t0 = MPI_Wtime();
  for (long s = 0; s < sweeps; ++s) {
    MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 1, &u[n + 1], 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Sendrecv(&u[n], 1, MPI_DOUBLE, right, 2, &u[0], 1, MPI_DOUBLE, left, 2, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    for (long i = 1; i <= n; ++i) v[i] = (u[i - 1] + u[i] + u[i + 1]) * (1.0 / 3.0);
    double* t = u;
    u = v;
    v = t;
  }
  double sum = 0;
  for (long i = 1; i <= n; ++i) sum += u[i] * (double)((lo + i) % 7);
  /* Rank 0 sums the parts in rank order (the same order at every count). */
  if (rank == 0) {
    double total = sum;
    for (int r = 1; r < size; ++r) {
      double part;
      MPI_Recv(&part, 1, MPI_DOUBLE, r, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      total += part;
    }
    printf("vp_stencil: ranks=%d cells=%ld sweeps=%ld seconds=%.4f checksum=%.6e\n", size, cells,
           sweeps, MPI_Wtime() - t0, total);
  } else {
    MPI_Send(&sum, 1, MPI_DOUBLE, 0, 9, MPI_COMM_WORLD);
  }
  free(u);
  free(v);
  MPI_Finalize();
  return 0;
}
