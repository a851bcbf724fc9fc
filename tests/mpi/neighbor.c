/* Graph topologies and neighbourhood collectives: Cartesian grids
 * (periodic and not, a periodic dimension of 2 whose two neighbours are one
 * rank), MPI_Dist_graph_create_adjacent and MPI_Dist_graph_create of a ring
 * with two edges out of each rank (self-loops at 1 and 2 ranks),
 * MPI_Graph_create, the queries, a dup keeping the topology, the
 * non-blocking forms, and MPI_ERR_TOPOLOGY on a communicator without one.
 * Prints "neighbor: ok N ranks". */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define CHECK(cond, ...)                       \
  do {                                         \
    if (!(cond)) {                             \
      fprintf(stderr, "FAIL rank %d: ", rank); \
      fprintf(stderr, __VA_ARGS__);            \
      fprintf(stderr, "\n");                   \
      ++*failures;                             \
    }                                          \
  } while (0)

static void cartesian(int rank, int size, int periodic, int* failures) {
  int dims[2] = {0, 0}, periods[2] = {periodic, periodic};
  MPI_Dims_create(size, 2, dims);
  MPI_Comm grid;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
  int status = -1;
  MPI_Topo_test(grid, &status);
  CHECK(status == MPI_CART, "MPI_Topo_test of a grid: %d", status);
  int nb[4], me = rank, got[4] = {-7, -7, -7, -7};
  for (int d = 0; d < 2; ++d) MPI_Cart_shift(grid, d, 1, &nb[2 * d], &nb[2 * d + 1]);
  MPI_Neighbor_allgather(&me, 1, MPI_INT, got, 1, MPI_INT, grid);
  for (int i = 0; i < 4; ++i)
    CHECK(got[i] == (nb[i] == MPI_PROC_NULL ? -7 : nb[i]),
          "grid %dx%d periodic %d: allgather block %d from %d, expected %d", dims[0], dims[1],
          periodic, i, got[i], nb[i]);
  /* Block j goes to neighbour j: what arrives from neighbour i is the
   * block it sent in the opposite direction, i ^ 1. */
  int out[4], in[4] = {-7, -7, -7, -7};
  for (int j = 0; j < 4; ++j) out[j] = rank * 100 + j;
  MPI_Neighbor_alltoall(out, 1, MPI_INT, in, 1, MPI_INT, grid);
  for (int i = 0; i < 4; ++i)
    CHECK(in[i] == (nb[i] == MPI_PROC_NULL ? -7 : nb[i] * 100 + (i ^ 1)),
          "grid %dx%d periodic %d: alltoall block %d is %d", dims[0], dims[1], periodic, i, in[i]);
  /* The same, non-blocking, on a dup (which keeps the topology). */
  MPI_Comm dup;
  MPI_Comm_dup(grid, &dup);
  MPI_Request req;
  for (int i = 0; i < 4; ++i) in[i] = -7;
  MPI_Ineighbor_alltoall(out, 1, MPI_INT, in, 1, MPI_INT, dup, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  for (int i = 0; i < 4; ++i)
    CHECK(in[i] == (nb[i] == MPI_PROC_NULL ? -7 : nb[i] * 100 + (i ^ 1)),
          "ineighbor_alltoall on a dup: block %d is %d", i, in[i]);
  MPI_Comm_free(&dup);
  MPI_Comm_free(&grid);
}

/* Each rank sends to r+1 and r+2 and receives from r-1 and r-2. */
static void check_ring(MPI_Comm ring, int rank, int size, const char* what, int* failures) {
  int indeg = -1, outdeg = -1, weighted = -1;
  MPI_Dist_graph_neighbors_count(ring, &indeg, &outdeg, &weighted);
  CHECK(indeg == 2 && outdeg == 2, "%s: degrees %d %d", what, indeg, outdeg);
  int src[2] = {-1, -1}, dst[2] = {-1, -1}, sw[2], dw[2];
  MPI_Dist_graph_neighbors(ring, 2, src, sw, 2, dst, dw);
  const int a = (rank + size - 1) % size, b = (rank + size - 2) % size;
  CHECK((src[0] == a && src[1] == b) || (src[0] == b && src[1] == a), "%s: sources %d %d", what,
        src[0], src[1]);
  int me = rank, got[2] = {-1, -1};
  MPI_Neighbor_allgather(&me, 1, MPI_INT, got, 1, MPI_INT, ring);
  CHECK(got[0] == src[0] && got[1] == src[1], "%s: allgather %d %d, sources %d %d", what, got[0],
        got[1], src[0], src[1]);
  /* v form: two ints from each, at gapped places. */
  int two[2] = {rank, -rank}, all[6] = {-9, -9, -9, -9, -9, -9};
  const int counts[2] = {2, 2}, displs[2] = {0, 3};
  MPI_Neighbor_allgatherv(two, 2, MPI_INT, all, counts, displs, MPI_INT, ring);
  CHECK(all[0] == src[0] && all[1] == -src[0] && all[2] == -9 && all[3] == src[1] &&
            all[4] == -src[1] && all[5] == -9,
        "%s: allgatherv %d %d %d %d %d %d", what, all[0], all[1], all[2], all[3], all[4], all[5]);
  int status = -1;
  MPI_Topo_test(ring, &status);
  CHECK(status == MPI_DIST_GRAPH, "%s: MPI_Topo_test %d", what, status);
}

static void dist_graphs(int rank, int size, int* failures) {
  const int dst[2] = {(rank + 1) % size, (rank + 2) % size};
  const int src[2] = {(rank + size - 1) % size, (rank + size - 2) % size};
  const int w[2] = {5, 6};
  MPI_Comm ring;
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, src, w, 2, dst, w, MPI_INFO_NULL, 0, &ring);
  check_ring(ring, rank, size, "adjacent", failures);
  int sw[2], dw[2], s2[2], d2[2], weighted = 0, i1, o1;
  MPI_Dist_graph_neighbors_count(ring, &i1, &o1, &weighted);
  MPI_Dist_graph_neighbors(ring, 2, s2, sw, 2, d2, dw);
  CHECK(weighted == 1 && sw[0] == 5 && sw[1] == 6 && dw[0] == 5 && dw[1] == 6,
        "adjacent: weights %d %d %d %d (weighted %d)", sw[0], sw[1], dw[0], dw[1], weighted);
  /* Block j to destination j: from source r-1 comes its block 0, from
   * r-2 its block 1 (a self-loop at 1 and 2 ranks, in the lists' order). */
  int out[2] = {rank * 10, rank * 10 + 1}, in[2] = {-1, -1};
  MPI_Neighbor_alltoall(out, 1, MPI_INT, in, 1, MPI_INT, ring);
  CHECK(in[0] == src[0] * 10 && in[1] == src[1] * 10 + 1, "adjacent alltoall: %d %d", in[0], in[1]);
  /* w form, bytes as displacements. */
  const int ones[2] = {1, 1};
  const MPI_Aint bytes[2] = {0, sizeof(int)};
  const MPI_Datatype ints[2] = {MPI_INT, MPI_INT};
  in[0] = in[1] = -1;
  MPI_Neighbor_alltoallw(out, ones, bytes, ints, in, ones, bytes, ints, ring);
  CHECK(in[0] == src[0] * 10 && in[1] == src[1] * 10 + 1, "adjacent alltoallw: %d %d", in[0],
        in[1]);
  MPI_Comm_free(&ring);
  /* The same ring given whole by rank 0. */
  int n = 0, sources[64], degrees[64], dests[128];
  if (rank == 0 && size <= 64)
    for (n = 0; n < size; ++n) {
      sources[n] = n;
      degrees[n] = 2;
      dests[2 * n] = (n + 1) % size;
      dests[2 * n + 1] = (n + 2) % size;
    }
  MPI_Dist_graph_create(MPI_COMM_WORLD, n, sources, degrees, dests, MPI_UNWEIGHTED, MPI_INFO_NULL,
                        0, &ring);
  check_ring(ring, rank, size, "general", failures);
  MPI_Comm_free(&ring);
}

static void graph(int rank, int size, int* failures) {
  /* A ring as MPI_Graph_create takes it: node i's neighbours i-1 and i+1. */
  int index[64], edges[128];
  if (size > 64) return;
  for (int i = 0; i < size; ++i) {
    index[i] = 2 * (i + 1);
    edges[2 * i] = (i + size - 1) % size;
    edges[2 * i + 1] = (i + 1) % size;
  }
  MPI_Comm g;
  MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &g);
  int status = -1, nn = -1, ne = -1, count = -1, nbs[2] = {-1, -1};
  MPI_Topo_test(g, &status);
  MPI_Graphdims_get(g, &nn, &ne);
  MPI_Graph_neighbors_count(g, rank, &count);
  MPI_Graph_neighbors(g, rank, 2, nbs);
  CHECK(status == MPI_GRAPH && nn == size && ne == 2 * size && count == 2 &&
            nbs[0] == (rank + size - 1) % size && nbs[1] == (rank + 1) % size,
        "graph: status %d dims %d %d count %d neighbours %d %d", status, nn, ne, count, nbs[0],
        nbs[1]);
  int me = rank, got[2] = {-1, -1};
  MPI_Neighbor_allgather(&me, 1, MPI_INT, got, 1, MPI_INT, g);
  CHECK(got[0] == nbs[0] && got[1] == nbs[1], "graph allgather %d %d", got[0], got[1]);
  MPI_Comm_free(&g);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, failures_ = 0;
  int* failures = &failures_;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  cartesian(rank, size, 1, failures);
  cartesian(rank, size, 0, failures);
  dist_graphs(rank, size, failures);
  graph(rank, size, failures);
  /* No topology: MPI_ERR_TOPOLOGY, returned. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int x = 0, y = 0, cls = -1;
  const int rc = MPI_Neighbor_allgather(&x, 1, MPI_INT, &y, 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Error_class(rc, &cls);
  CHECK(cls == MPI_ERR_TOPOLOGY, "neighbour collective without a topology: class %d", cls);
  int all = 0;
  MPI_Allreduce(&failures_, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0 && all == 0) printf("neighbor: ok %d ranks\n", size);
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
