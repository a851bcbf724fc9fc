/* mpi-test topo: Cartesian topologies at any number of ranks.
 *  - MPI_Dims_create: balanced, non-increasing, fixed dimensions kept;
 *  - a periodic 2-D grid over every rank: coordinates and ranks agree, a
 *    halo exchange with MPI_Cart_shift's neighbours in both dimensions;
 *  - a non-periodic 1-D grid over all but the last rank: MPI_PROC_NULL at
 *    its ends, MPI_COMM_NULL for the rank left out;
 *  - MPI_Cart_sub into rows and columns; MPI_Topo_test, MPI_Cartdim_get,
 *    MPI_Cart_get; a dup keeps the topology; MPI_Alloc_mem/MPI_Free_mem.
 * Rank 0 prints "topo: ok N ranks". */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define MAX_RANKS 256
static int failures[MAX_RANKS];
#define CHECK(cond, ...)                       \
  do {                                         \
    if (!(cond)) {                             \
      ++failures[rank];                        \
      printf("topo: FAIL on rank %d: ", rank); \
      printf(__VA_ARGS__);                     \
      printf("\n");                            \
    }                                          \
  } while (0)

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  /* Dims_create. */
  {
    int d2[2] = {0, 0}, d3[3] = {0, 0, 0}, fixed[3] = {0, 3, 0}, prime[2] = {0, 0};
    MPI_Dims_create(12, 2, d2);
    CHECK(d2[0] == 4 && d2[1] == 3, "Dims_create(12, 2) = %d x %d", d2[0], d2[1]);
    MPI_Dims_create(24, 3, d3);
    CHECK(d3[0] == 4 && d3[1] == 3 && d3[2] == 2, "Dims_create(24, 3) = %d x %d x %d", d3[0], d3[1],
          d3[2]);
    MPI_Dims_create(30, 3, fixed);
    CHECK(fixed[1] == 3 && fixed[0] * fixed[2] == 10 && fixed[0] >= fixed[2],
          "Dims_create(30, {0,3,0}) = %d x %d x %d", fixed[0], fixed[1], fixed[2]);
    MPI_Dims_create(7, 2, prime);
    CHECK(prime[0] == 7 && prime[1] == 1, "Dims_create(7, 2) = %d x %d", prime[0], prime[1]);
  }

  /* A periodic 2-D grid over every rank. */
  int dims[2] = {0, 0}, periods[2] = {1, 1};
  MPI_Dims_create(size, 2, dims);
  MPI_Comm grid;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 1, &grid);
  int status = -1, nd = -1, grank = -1;
  MPI_Topo_test(grid, &status);
  MPI_Cartdim_get(grid, &nd);
  MPI_Comm_rank(grid, &grank);
  CHECK(status == MPI_CART && nd == 2, "Topo_test %d, Cartdim_get %d", status, nd);
  int coords[2], back = -1;
  MPI_Cart_coords(grid, grank, 2, coords);
  MPI_Cart_rank(grid, coords, &back);
  CHECK(back == grank && coords[0] == grank / dims[1] && coords[1] == grank % dims[1],
        "coords (%d, %d) of rank %d give rank %d", coords[0], coords[1], grank, back);
  {
    int got_dims[2], got_periods[2], got_coords[2];
    MPI_Cart_get(grid, 2, got_dims, got_periods, got_coords);
    CHECK(got_dims[0] == dims[0] && got_dims[1] == dims[1] && got_periods[0] == 1 &&
              got_coords[0] == coords[0] && got_coords[1] == coords[1],
          "Cart_get");
  }
  /* Halo exchange: each rank sends its grid rank up and down both
   * dimensions and checks what comes from each side. */
  for (int dim = 0; dim < 2; ++dim) {
    int down, up;
    MPI_Cart_shift(grid, dim, 1, &down, &up);
    int c[2] = {coords[0], coords[1]}, expect_down, expect_up;
    c[dim] = (coords[dim] - 1 + dims[dim]) % dims[dim];
    MPI_Cart_rank(grid, c, &expect_down);
    c[dim] = (coords[dim] + 1) % dims[dim];
    MPI_Cart_rank(grid, c, &expect_up);
    CHECK(down == expect_down && up == expect_up, "dim %d shift: %d %d, expected %d %d", dim, down,
          up, expect_down, expect_up);
    int from_down = -1;
    MPI_Sendrecv(&grank, 1, MPI_INT, up, dim, &from_down, 1, MPI_INT, down, dim, grid,
                 MPI_STATUS_IGNORE);
    CHECK(from_down == down, "dim %d halo: got %d from below, expected %d", dim, from_down, down);
  }
  /* Rows and columns. */
  {
    int keep_row[2] = {0, 1}, keep_col[2] = {1, 0};
    MPI_Comm row, col;
    MPI_Cart_sub(grid, keep_row, &row);
    MPI_Cart_sub(grid, keep_col, &col);
    int rs, rr, cs, cr, rnd = -1;
    MPI_Comm_size(row, &rs);
    MPI_Comm_rank(row, &rr);
    MPI_Comm_size(col, &cs);
    MPI_Comm_rank(col, &cr);
    MPI_Cartdim_get(row, &rnd);
    CHECK(rs == dims[1] && rr == coords[1] && cs == dims[0] && cr == coords[0] && rnd == 1,
          "sub: row %d/%d, column %d/%d, row dims %d", rr, rs, cr, cs, rnd);
    int sum = 0;
    MPI_Allreduce(&grank, &sum, 1, MPI_INT, MPI_SUM, row);
    int expect = 0;
    for (int j = 0; j < dims[1]; ++j) expect += coords[0] * dims[1] + j;
    CHECK(sum == expect, "allreduce over a row: %d, expected %d", sum, expect);
    MPI_Comm_free(&row);
    MPI_Comm_free(&col);
  }
  /* A dup keeps the topology. */
  {
    MPI_Comm copy;
    MPI_Comm_dup(grid, &copy);
    int st = -1;
    MPI_Topo_test(copy, &st);
    CHECK(st == MPI_CART, "a dup of a grid: Topo_test %d", st);
    MPI_Comm_free(&copy);
    MPI_Topo_test(MPI_COMM_WORLD, &st);
    CHECK(st == MPI_UNDEFINED, "MPI_COMM_WORLD: Topo_test %d", st);
  }
  MPI_Comm_free(&grid);

  /* A line over all but the last rank, not periodic. */
  {
    int n = size > 1 ? size - 1 : 1, no_wrap = 0;
    MPI_Comm line;
    MPI_Cart_create(MPI_COMM_WORLD, 1, &n, &no_wrap, 0, &line);
    if (rank < n) {
      int down, up;
      MPI_Cart_shift(line, 0, 1, &down, &up);
      CHECK(down == (rank == 0 ? MPI_PROC_NULL : rank - 1) &&
                up == (rank == n - 1 ? MPI_PROC_NULL : rank + 1),
            "line shift: %d %d", down, up);
      MPI_Comm_free(&line);
    } else {
      CHECK(line == MPI_COMM_NULL, "the rank left out of the line got %d", line);
    }
  }

  /* MPI_Alloc_mem. */
  {
    double* p = NULL;
    MPI_Alloc_mem(1024 * sizeof(double), MPI_INFO_NULL, &p);
    CHECK(p != NULL, "MPI_Alloc_mem gave null");
    if (p) {
      memset(p, 0, 1024 * sizeof(double));
      MPI_Free_mem(p);
    }
  }

  int all = failures[rank];
  if (rank == 0) {
    for (int r = 1; r < size; ++r) {
      int f = 0;
      MPI_Recv(&f, 1, MPI_INT, r, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      all += f;
    }
    if (all == 0) printf("topo: ok %d ranks\n", size);
  } else {
    MPI_Send(&failures[rank], 1, MPI_INT, 0, 99, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return failures[rank] != 0;
}
