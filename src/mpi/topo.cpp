// Cartesian process topologies: MPI_Dims_create, MPI_Cart_create and the
// queries and shifts stencil codes use to find their neighbours, and
// MPI_Cart_sub. A Cartesian communicator is an ordinary one (comm.cpp's
// split_comm) whose comm_core also holds the grid's dimensions and
// periods; ranks are laid out in row-major order, and MPI_Cart_create does
// not reorder them (the standard lets an implementation keep the order:
// weft's PE placement already puts consecutive ranks together).
#include <algorithm>
#include <functional>
#include <vector>
#include "mpi/mpi_internal.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

namespace weft::mpi {

namespace {

const comm_core& cart_of(const char* call, MPI_Comm comm) {
  const comm_core& core = *view(call, self(call), comm).core;
  // `periods` holds one entry more than `dims`: a Cartesian communicator
  // of 0 dimensions is one too.
  if (core.periods.empty())
    fail(call, MPI_ERR_TOPOLOGY, "communicator %d has no Cartesian topology (MPI_Cart_create)",
         comm);
  return core;
}

int ndims_of(const comm_core& core) {
  return int(core.dims.size());
}

// Coordinates of `rank` in row-major order.
void coords_of(const comm_core& core, int rank, int* coords) {
  for (int d = ndims_of(core) - 1; d >= 0; --d) {
    const int n = core.dims[std::size_t(d)];
    coords[d] = rank % n;
    rank /= n;
  }
}

void check_dims(const char* call, int ndims, const int* dims, long* product) {
  if (ndims < 0) fail(call, MPI_ERR_DIMS, "ndims %d is negative", ndims);
  long p = 1;
  for (int d = 0; d < ndims; ++d) {
    if (dims[d] <= 0)
      fail(call, MPI_ERR_DIMS, "dims[%d] = %d: every dimension needs at least 1 rank", d, dims[d]);
    p *= dims[d];
    if (p > (1L << 30)) fail(call, MPI_ERR_DIMS, "the grid has more than 2^30 ranks");
  }
  *product = p;
}

}  // namespace

}  // namespace weft::mpi

using namespace weft::mpi;

// A balanced grid: the free dimensions (0 in `dims`) get the prime factors
// of what the fixed ones leave, the largest factor to the smallest
// dimension so far, and come out in non-increasing order.
WEFT_MPI_API int MPI_Dims_create(int nnodes, int ndims, int dims[]) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Dims_create";
    if (nnodes <= 0) fail(call, MPI_ERR_ARG, "nnodes %d is not positive", nnodes);
    if (ndims < 0) fail(call, MPI_ERR_DIMS, "ndims %d is negative", ndims);
    long fixed = 1;
    std::vector<int> free_at;
    for (int d = 0; d < ndims; ++d) {
      if (dims[d] < 0) fail(call, MPI_ERR_DIMS, "dims[%d] = %d is negative", d, dims[d]);
      if (dims[d] == 0)
        free_at.push_back(d);
      else
        fixed *= dims[d];
    }
    if (nnodes % fixed != 0)
      fail(call, MPI_ERR_DIMS, "the fixed dimensions (product %ld) do not divide nnodes %d", fixed,
           nnodes);
    long left = nnodes / fixed;
    if (free_at.empty()) {
      if (left != 1)
        fail(call, MPI_ERR_DIMS, "the dimensions' product %ld is not nnodes %d", fixed, nnodes);
      return;
    }
    std::vector<long> factors;
    for (long f = 2; f * f <= left; ++f)
      while (left % f == 0) {
        factors.push_back(f);
        left /= f;
      }
    if (left > 1) factors.push_back(left);
    std::vector<long> grid(free_at.size(), 1);
    std::sort(factors.begin(), factors.end(), std::greater<long>());
    for (long f : factors) *std::min_element(grid.begin(), grid.end()) *= f;
    std::sort(grid.begin(), grid.end(), std::greater<long>());
    for (std::size_t i = 0; i < free_at.size(); ++i) dims[free_at[i]] = int(grid[i]);
  });
}

WEFT_MPI_API int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[],
                                 const int periods[], int reorder, MPI_Comm* comm_cart) {
  return guard(__func__, comm_old, [&] {
    (void)reorder;  // kept in order: allowed, and weft's placement is already local
    const char* call = "MPI_Cart_create";
    long n = 1;
    check_dims(call, ndims, dims, &n);
    const int size = comm_size(call, comm_old), rank = comm_rank(call, comm_old);
    if (n > size)
      fail(call, MPI_ERR_ARG, "the grid has %ld ranks, the communicator only %d", n, size);
    std::vector<int> d(dims, dims + ndims);
    std::vector<char> p(std::size_t(ndims) + 1, 0);  // + the Cartesian mark
    for (int i = 0; i < ndims; ++i) p[std::size_t(i)] = periods[i] != 0;
    *comm_cart =
        split_comm(call, comm_old, rank < n ? 0 : MPI_UNDEFINED, rank, std::move(d), std::move(p));
  });
}

// Where MPI_Cart_create would put the calling rank: its own rank (weft
// never reorders), or MPI_UNDEFINED outside the grid.
WEFT_MPI_API int MPI_Cart_map(MPI_Comm comm, int ndims, const int dims[], const int periods[],
                              int* newrank) {
  return guard(__func__, comm, [&] {
    (void)periods;
    const char* call = "MPI_Cart_map";
    long n = 1;
    check_dims(call, ndims, dims, &n);
    intra_view(call, self(call), comm);
    const int size = comm_size(call, comm), rank = comm_rank(call, comm);
    if (n > size)
      fail(call, MPI_ERR_DIMS, "the grid has %ld ranks, the communicator only %d", n, size);
    *newrank = rank < n ? rank : MPI_UNDEFINED;
  });
}

WEFT_MPI_API int MPI_Topo_test(MPI_Comm comm, int* status) {
  return guard(__func__, comm, [&] {
    const comm_view& v = view("MPI_Topo_test", self("MPI_Topo_test"), comm);
    *status = v.graph != nullptr        ? v.graph->kind
              : v.core->periods.empty() ? MPI_UNDEFINED
                                        : MPI_CART;
  });
}

WEFT_MPI_API int MPI_Cartdim_get(MPI_Comm comm, int* ndims) {
  return guard(__func__, comm, [&] { *ndims = ndims_of(cart_of("MPI_Cartdim_get", comm)); });
}

WEFT_MPI_API int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Cart_get";
    const comm_core& core = cart_of(call, comm);
    const int n = ndims_of(core);
    if (maxdims < n)
      fail(call, MPI_ERR_ARG, "maxdims %d is less than the grid's %d dimensions", maxdims, n);
    for (int d = 0; d < n; ++d) {
      dims[d] = core.dims[std::size_t(d)];
      periods[d] = core.periods[std::size_t(d)];
    }
    coords_of(core, comm_rank(call, comm), coords);
  });
}

WEFT_MPI_API int MPI_Cart_rank(MPI_Comm comm, const int coords[], int* rank) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Cart_rank";
    const comm_core& core = cart_of(call, comm);
    int r = 0;
    for (int d = 0; d < ndims_of(core); ++d) {
      const int n = core.dims[std::size_t(d)];
      int c = coords[d];
      if (core.periods[std::size_t(d)])
        c = ((c % n) + n) % n;
      else if (c < 0 || c >= n)
        fail(call, MPI_ERR_ARG,
             "coords[%d] = %d is outside 0..%d of a dimension that does not wrap", d, c, n - 1);
      r = r * n + c;
    }
    *rank = r;
  });
}

WEFT_MPI_API int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Cart_coords";
    const comm_core& core = cart_of(call, comm);
    if (maxdims < ndims_of(core))
      fail(call, MPI_ERR_ARG, "maxdims %d is less than the grid's %d dimensions", maxdims,
           ndims_of(core));
    if (rank < 0 || std::size_t(rank) >= core.members.size())
      fail(call, MPI_ERR_RANK, "rank %d is not in the communicator (size %zu)", rank,
           core.members.size());
    coords_of(core, rank, coords);
  });
}

// The ranks `disp` steps down (source) and up (dest) dimension `direction`
// from the caller; MPI_PROC_NULL past the edge of a dimension that does not
// wrap.
WEFT_MPI_API int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int* rank_source,
                                int* rank_dest) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Cart_shift";
    const comm_core& core = cart_of(call, comm);
    const int n = ndims_of(core);
    if (direction < 0 || direction >= n)
      fail(call, MPI_ERR_ARG, "direction %d is not a dimension of the grid (0..%d)", direction,
           n - 1);
    std::vector<int> coords(std::size_t(n) + 1);
    coords_of(core, comm_rank(call, comm), coords.data());
    const auto at = [&](int offset) {
      std::vector<int> c = coords;
      const int extent = core.dims[std::size_t(direction)];
      int v = c[std::size_t(direction)] + offset;
      if (core.periods[std::size_t(direction)])
        v = ((v % extent) + extent) % extent;
      else if (v < 0 || v >= extent)
        return int(MPI_PROC_NULL);
      c[std::size_t(direction)] = v;
      int r = 0;
      for (int d = 0; d < n; ++d) r = r * core.dims[std::size_t(d)] + c[std::size_t(d)];
      return r;
    };
    *rank_source = at(-disp);
    *rank_dest = at(disp);
  });
}

// The sub-grids that keep the dimensions `remain_dims` marks: one
// communicator per value of the dropped coordinates, each Cartesian.
WEFT_MPI_API int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Cart_sub";
    const comm_core& core = cart_of(call, comm);
    const int n = ndims_of(core), rank = comm_rank(call, comm);
    std::vector<int> coords(std::size_t(n) + 1);
    coords_of(core, rank, coords.data());
    int color = 0, key = 0;
    std::vector<int> dims;
    std::vector<char> periods;
    for (int d = 0; d < n; ++d) {
      const int extent = core.dims[std::size_t(d)];
      if (remain_dims[d]) {
        key = key * extent + coords[std::size_t(d)];
        dims.push_back(extent);
        periods.push_back(core.periods[std::size_t(d)]);
      } else {
        color = color * extent + coords[std::size_t(d)];
      }
    }
    periods.push_back(0);  // the Cartesian mark
    *newcomm = split_comm(call, comm, color, key, std::move(dims), std::move(periods));
  });
}
