/* jacobi2d: Jacobi iterations on an N x N grid (the top edge held at 1, the
 * others at 0), split over a px x py grid of ranks; each sweep exchanges
 * one-cell halos with the four neighbours (MPI_Sendrecv; columns packed
 * into buffers) and agrees on the largest change with MPI_Allreduce, until
 * it is below TOL or ITERS sweeps ran. Plain MPI: build it with weft-mpicc
 * (examples/mpi/README.md).
 *   ./jacobi2d [N [ITERS [TOL]]] --weft:threads=2 --weft:vp=8
 * At the end rank 0 gathers the blocks, runs the same sweeps alone and
 * prints the largest difference (0: the distributed run is exact). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rows or columns [lo, hi) of the i-th of `parts` near-equal parts of n. */
static void split(int n, int parts, int i, int* lo, int* hi) {
  *lo = (int)((long)n * i / parts);
  *hi = (int)((long)n * (i + 1) / parts);
}

/* One sweep over the interior [1, h] x [1, w] of a (h+2) x (w+2) array;
 * returns the largest change. */
static double sweep(const double* u, double* v, int h, int w) {
  double change = 0;
  for (int i = 1; i <= h; ++i)
    for (int j = 1; j <= w; ++j) {
      const int k = i * (w + 2) + j;
      v[k] = 0.25 * (u[k - 1] + u[k + 1] + u[k - (w + 2)] + u[k + (w + 2)]);
      const double d = fabs(v[k] - u[k]);
      if (d > change) change = d;
    }
  return change;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int n = argc > 1 ? atoi(argv[1]) : 128;
  const int iters = argc > 2 ? atoi(argv[2]) : 500;
  const double tol = argc > 3 ? atof(argv[3]) : 1e-6;
  int px = 1;
  for (int d = 1; d * d <= size; ++d)
    if (size % d == 0) px = d;
  const int py = size / px;
  if (n < py || n < px || iters < 1 || !(tol >= 0)) {
    if (rank == 0)
      fprintf(stderr, "usage: jacobi2d [N >= %d [ITERS >= 1 [TOL >= 0]]] (%d x %d ranks)\n",
              px > py ? px : py, px, py);
    MPI_Finalize();
    return 2;
  }
  /* This rank's block: rows [r0, r1), columns [c0, c1) of the interior. */
  const int pr = rank / py, pc = rank % py;
  int r0, r1, c0, c1;
  split(n, px, pr, &r0, &r1);
  split(n, py, pc, &c0, &c1);
  const int h = r1 - r0, w = c1 - c0, stride = w + 2;
  double* u = calloc((size_t)(h + 2) * stride, sizeof *u);
  double* v = calloc((size_t)(h + 2) * stride, sizeof *v);
  double* out = malloc((size_t)(h > w ? h : w) * sizeof *out);
  double* in = malloc((size_t)(h > w ? h : w) * sizeof *in);
  if (pr == 0)
    for (int j = 0; j < stride; ++j) u[j] = v[j] = 1.0; /* the hot top edge */
  const int up = pr > 0 ? rank - py : MPI_PROC_NULL, down = pr < px - 1 ? rank + py : MPI_PROC_NULL;
  const int left = pc > 0 ? rank - 1 : MPI_PROC_NULL,
            right = pc < py - 1 ? rank + 1 : MPI_PROC_NULL;

  const double t0 = MPI_Wtime();
  int done = 0;
  double change = 0;
  while (done < iters) {
    /* Halos: rows straight from the array, columns through buffers. */
    MPI_Sendrecv(&u[1 * stride + 1], w, MPI_DOUBLE, up, 1, &u[(h + 1) * stride + 1], w, MPI_DOUBLE,
                 down, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&u[h * stride + 1], w, MPI_DOUBLE, down, 2, &u[0 * stride + 1], w, MPI_DOUBLE, up,
                 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < h; ++i) out[i] = u[(i + 1) * stride + 1];
    MPI_Sendrecv(out, h, MPI_DOUBLE, left, 3, in, h, MPI_DOUBLE, right, 3, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (right != MPI_PROC_NULL)
      for (int i = 0; i < h; ++i) u[(i + 1) * stride + w + 1] = in[i];
    for (int i = 0; i < h; ++i) out[i] = u[(i + 1) * stride + w];
    MPI_Sendrecv(out, h, MPI_DOUBLE, right, 4, in, h, MPI_DOUBLE, left, 4, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (left != MPI_PROC_NULL)
      for (int i = 0; i < h; ++i) u[(i + 1) * stride] = in[i];
    const double mine = sweep(u, v, h, w);
    MPI_Allreduce(&mine, &change, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double* t = u;
    u = v;
    v = t;
    ++done;
    if (change < tol) break;
  }
  const double seconds = MPI_Wtime() - t0;

  /* Rank 0 gathers the blocks (rows of the interior, with their place) and
   * checks them against the same sweeps run alone. */
  int code = 0;
  if (rank == 0) {
    const int s = n + 2;
    double* whole = calloc((size_t)s * s, sizeof *whole);
    double* a = calloc((size_t)s * s, sizeof *a);
    double* b = calloc((size_t)s * s, sizeof *b);
    for (int j = 0; j < s; ++j) a[j] = b[j] = 1.0;
    for (int k = 0; k < done; ++k) {
      sweep(a, b, n, n);
      double* t = a;
      a = b;
      b = t;
    }
    for (int i = 0; i < h; ++i)
      memcpy(&whole[(r0 + i + 1) * s + c0 + 1], &u[(i + 1) * stride + 1], (size_t)w * sizeof *u);
    for (int q = 1; q < size; ++q) {
      int box[4];
      MPI_Recv(box, 4, MPI_INT, q, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      const int bh = box[1] - box[0], bw = box[3] - box[2];
      double* rows = malloc((size_t)bh * bw * sizeof *rows + 1);
      MPI_Recv(rows, bh * bw, MPI_DOUBLE, q, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int i = 0; i < bh; ++i)
        memcpy(&whole[(box[0] + i + 1) * s + box[2] + 1], &rows[i * bw], (size_t)bw * sizeof *rows);
      free(rows);
    }
    double diff = 0;
    for (int i = 1; i <= n; ++i)
      for (int j = 1; j <= n; ++j) {
        const double d = fabs(whole[i * s + j] - a[i * s + j]);
        if (d > diff) diff = d;
      }
    code = diff == 0 ? 0 : 1;
    printf(
        "jacobi2d: N=%d ranks=%d (%dx%d) iterations=%d change=%.3e max_diff_vs_serial=%g "
        "time_s=%.3f\n",
        n, size, px, py, done, change, diff, seconds);
    free(whole);
    free(a);
    free(b);
  } else {
    int box[4] = {r0, r1, c0, c1};
    double* rows = malloc((size_t)h * w * sizeof *rows + 1);
    for (int i = 0; i < h; ++i)
      memcpy(&rows[i * w], &u[(i + 1) * stride + 1], (size_t)w * sizeof *u);
    MPI_Send(box, 4, MPI_INT, 0, 5, MPI_COMM_WORLD);
    MPI_Send(rows, h * w, MPI_DOUBLE, 0, 6, MPI_COMM_WORLD);
    free(rows);
  }
  free(u);
  free(v);
  free(out);
  free(in);
  MPI_Finalize();
  return code;
}
