/* Ping-pong between ranks 0 and 1 (issue 28's first benchmark): one-way
 * time per message for 8 B to 1 MiB, as plain MPI C, built twice from this
 * source -- mpi_ranks_pingpong_weft (weft's mpi.h, linked as weft-mpicc
 * links) and mpi_ranks_pingpong_openmpi (Open MPI) -- to run side by side:
 *   mpi_ranks_pingpong_weft --weft:threads=2 --weft:vp=2   (2 PEs)
 *   mpi_ranks_pingpong_weft --weft:threads=1 --weft:vp=2   (one PE: the ULT switch)
 *   mpiexec -n 2 mpi_ranks_pingpong_openmpi                (2 processes)
 * Prints "size_bytes one_way_us MB/s" per size, after a warm-up; the
 * median of --repeat N (default 5) timed batches of each size. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef WEFT_BENCH_TLS_BYTES
/* The mpi_ranks_pingpong_tls*_weft variants: a program with this many
 * bytes of thread-locals, which each rank has a copy of (--weft:rank-tls=
 * private) switched in and out with it. */
__thread char tls_pad[WEFT_BENCH_TLS_BYTES];
#endif

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, repeat = 5;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
#ifdef WEFT_BENCH_TLS_BYTES
  tls_pad[rank % WEFT_BENCH_TLS_BYTES] = (char)rank;
#endif
  for (int i = 1; i < argc; ++i)
    if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) repeat = atoi(argv[++i]);
  if (size < 2) {
    if (rank == 0) fprintf(stderr, "pingpong_ranks: needs 2 ranks\n");
    MPI_Finalize();
    return 2;
  }
  char* buf = malloc(1 << 20);
  memset(buf, 1, 1 << 20);
  double times[64];
  if (repeat > 64) repeat = 64;
  if (rank == 0) printf("# size_bytes one_way_us MB/s (median of %d)\n", repeat);
  /* 8 B to 256 KiB by factors of 8, then 1 MiB (the bandwidth size). */
  for (int bytes = 8; bytes <= (1 << 20); bytes = bytes == (1 << 18) ? (1 << 20) : bytes * 8) {
    const int iters = bytes <= 4096 ? 20000 : bytes <= 65536 ? 2000 : 200;
    for (int r = -1; r < repeat; ++r) { /* r = -1: warm-up */
      double t0 = MPI_Wtime();
      for (int i = 0; i < iters; ++i) {
        if (rank == 0) {
          MPI_Send(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
          MPI_Recv(buf, bytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
          MPI_Recv(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(buf, bytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
      }
      if (r >= 0) times[r] = (MPI_Wtime() - t0) / (2.0 * iters);
    }
    if (rank == 0) {
      qsort(times, (size_t)repeat, sizeof times[0], cmp);
      const double t = times[repeat / 2];
      printf("%d %.3f %.1f\n", bytes, t * 1e6, bytes / t / 1e6);
      fflush(stdout);
    }
  }
  free(buf);
  MPI_Finalize();
  return 0;
}
