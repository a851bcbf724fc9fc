// MPI_Type_create_subarray and MPI_Type_create_darray (MPI 3.1, 4.1.3
// and 4.1.4): the part of an n-dimensional array, stored in C or Fortran
// order, that a block of it -- or a process's share of a distributed
// array -- covers. Both are built as the other constructors are
// (datatype_api.cpp), from runs of the old type along the array's
// fastest dimension, and resized to the whole array's extent, as the
// standard defines them, so that consecutive elements are consecutive
// arrays.
#include <vector>
#include "mpi/datatype.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

using namespace weft::mpi;

namespace {

void check_arg(const char* call, const void* p, const char* what) {
  if (p == nullptr) fail(call, MPI_ERR_ARG, "%s is a null pointer", what);
}

void check_order(const char* call, int order) {
  if (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN)
    fail(call, MPI_ERR_ARG, "order %d is not MPI_ORDER_C (%d) or MPI_ORDER_FORTRAN (%d)", order,
         MPI_ORDER_C, MPI_ORDER_FORTRAN);
}

// Elements of the old type in the whole array, checked against overflow
// of its extent in bytes.
std::ptrdiff_t elements(const char* call, int ndims, const int* sizes, std::ptrdiff_t extent) {
  std::ptrdiff_t n = 1, bytes;
  for (int d = 0; d < ndims; ++d)
    if (__builtin_mul_overflow(n, std::ptrdiff_t(sizes[d]), &n))
      fail(call, MPI_ERR_ARG, "the array's elements overflow an address");
  if (__builtin_mul_overflow(n, extent, &bytes))
    fail(call, MPI_ERR_ARG, "the array's extent (%td elements) overflows an address", n);
  return n;
}

// The type of the elements whose index along dimension d is one of
// idx[d], in an array of `sizes` of `old` stored in `order`: runs along
// the fastest dimension, in the array's order, resized to the array.
void build(builder& b, const datatype& old, const std::vector<int>& sizes,
           const std::vector<std::vector<int>>& idx, int order, std::ptrdiff_t total) {
  const int n = int(sizes.size());
  // dims[0] slowest ... dims[n-1] fastest.
  std::vector<int> dims(std::size_t(n), 0);
  for (int i = 0; i < n; ++i) dims[std::size_t(i)] = order == MPI_ORDER_C ? i : n - 1 - i;
  std::vector<std::ptrdiff_t> stride(std::size_t(n), 1);
  for (int i = n - 2; i >= 0; --i)
    stride[std::size_t(dims[std::size_t(i)])] = stride[std::size_t(dims[std::size_t(i + 1)])] *
                                                sizes[std::size_t(dims[std::size_t(i + 1)])];
  const std::ptrdiff_t ext = old.extent();
  const std::vector<int>& fast = idx[std::size_t(dims[std::size_t(n - 1)])];
  bool empty = fast.empty();
  for (const auto& v : idx) empty = empty || v.empty();
  // An odometer over the slower dimensions' chosen indices.
  std::vector<std::size_t> at(std::size_t(n), 0);
  while (!empty) {
    std::ptrdiff_t base = 0;
    for (int i = 0; i + 1 < n; ++i) {
      const int d = dims[std::size_t(i)];
      base += std::ptrdiff_t(idx[std::size_t(d)][at[std::size_t(d)]]) * stride[std::size_t(d)];
    }
    // Consecutive indices along the fastest dimension: one run.
    for (std::size_t j = 0; j < fast.size();) {
      std::size_t k = j + 1;
      while (k < fast.size() && fast[k] == fast[k - 1] + 1) ++k;
      b.add(old, (base + fast[j]) * ext, k - j);
      j = k;
    }
    int i = n - 2;
    for (; i >= 0; --i) {
      const int d = dims[std::size_t(i)];
      if (++at[std::size_t(d)] < idx[std::size_t(d)].size()) break;
      at[std::size_t(d)] = 0;
    }
    if (i < 0) break;
  }
  // The standard's lb is the array's start (0), whatever the old type's.
  b.resize(0, total * ext);
}

template <class T>
void keep(std::vector<int>& to, const T* from, int count) {
  to.insert(to.end(), from, from + count);
}

}  // namespace

WEFT_MPI_API int MPI_Type_create_subarray(int ndims, const int array_of_sizes[],
                                          const int array_of_subsizes[],
                                          const int array_of_starts[], int order,
                                          MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Type_create_subarray";
    check_arg(call, newtype, "newtype");
    if (ndims <= 0) fail(call, MPI_ERR_ARG, "ndims %d is not positive", ndims);
    check_arg(call, array_of_sizes, "array_of_sizes");
    check_arg(call, array_of_subsizes, "array_of_subsizes");
    check_arg(call, array_of_starts, "array_of_starts");
    check_order(call, order);
    for (int d = 0; d < ndims; ++d) {
      const int size = array_of_sizes[d], sub = array_of_subsizes[d], start = array_of_starts[d];
      if (size < 1)
        fail(call, MPI_ERR_ARG, "array_of_sizes[%d] is %d; sizes are 1 or more", d, size);
      if (sub < 1 || sub > size)
        fail(call, MPI_ERR_ARG, "array_of_subsizes[%d] is %d; it takes 1..%d (the size)", d, sub,
             size);
      if (start < 0 || start > size - sub)
        fail(call, MPI_ERR_ARG,
             "array_of_starts[%d] is %d; it takes 0..%d (size %d less subsize %d)", d, start,
             size - sub, size, sub);
    }
    const datatype& old = lookup(call, oldtype, false);
    const std::ptrdiff_t total = elements(call, ndims, array_of_sizes, old.extent());
    std::vector<int> sizes(array_of_sizes, array_of_sizes + ndims);
    std::vector<std::vector<int>> idx(static_cast<std::size_t>(ndims));
    for (int d = 0; d < ndims; ++d)
      for (int i = 0; i < array_of_subsizes[d]; ++i)
        idx[std::size_t(d)].push_back(array_of_starts[d] + i);
    builder b(MPI_COMBINER_SUBARRAY);
    std::vector<int>& ints = b.get().ints;
    ints = {ndims};
    keep(ints, array_of_sizes, ndims);
    keep(ints, array_of_subsizes, ndims);
    keep(ints, array_of_starts, ndims);
    ints.push_back(order);
    b.hold(old);
    build(b, old, sizes, idx, order, total);
    *newtype = publish(call, b.finish(false));
  });
}

namespace {

// The indices of dimension `d` of `gsize` elements that process
// coordinate `coord` of `psize` holds under `distrib` with `darg`.
std::vector<int> owned(const char* call, int d, int gsize, int distrib, int darg, int psize,
                       int coord) {
  std::vector<int> out;
  switch (distrib) {
    case MPI_DISTRIBUTE_NONE:
      if (psize != 1)
        fail(call, MPI_ERR_ARG,
             "dimension %d is MPI_DISTRIBUTE_NONE over %d processes; it takes 1 (array_of_psizes)",
             d, psize);
      for (int i = 0; i < gsize; ++i) out.push_back(i);
      return out;
    case MPI_DISTRIBUTE_BLOCK: {
      const int block = darg == MPI_DISTRIBUTE_DFLT_DARG ? (gsize + psize - 1) / psize : darg;
      if (block < 1 || (long long)block * psize < gsize)
        fail(call, MPI_ERR_ARG,
             "dimension %d: block size %d over %d processes does not cover its %d elements (it "
             "takes MPI_DISTRIBUTE_DFLT_DARG or a block of at least %d)",
             d, block, psize, gsize, (gsize + psize - 1) / psize);
      const long long from = (long long)coord * block;
      for (long long i = from; i < from + block && i < gsize; ++i) out.push_back(int(i));
      return out;
    }
    case MPI_DISTRIBUTE_CYCLIC: {
      const int block = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
      if (block < 1)
        fail(call, MPI_ERR_ARG,
             "dimension %d: cyclic block size %d is not positive (or MPI_DISTRIBUTE_DFLT_DARG)", d,
             block);
      for (long long s = (long long)coord * block; s < gsize; s += (long long)block * psize)
        for (long long i = s; i < s + block && i < gsize; ++i) out.push_back(int(i));
      return out;
    }
    default:
      fail(call, MPI_ERR_ARG,
           "array_of_distribs[%d] is %d; it takes MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC or "
           "MPI_DISTRIBUTE_NONE",
           d, distrib);
  }
}

}  // namespace

WEFT_MPI_API int MPI_Type_create_darray(int size, int rank, int ndims, const int array_of_gsizes[],
                                        const int array_of_distribs[], const int array_of_dargs[],
                                        const int array_of_psizes[], int order,
                                        MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Type_create_darray";
    check_arg(call, newtype, "newtype");
    if (size < 1) fail(call, MPI_ERR_ARG, "size %d is not positive", size);
    if (rank < 0 || rank >= size)
      fail(call, MPI_ERR_ARG, "rank %d is not one of the %d processes (0..%d)", rank, size,
           size - 1);
    if (ndims <= 0) fail(call, MPI_ERR_ARG, "ndims %d is not positive", ndims);
    check_arg(call, array_of_gsizes, "array_of_gsizes");
    check_arg(call, array_of_distribs, "array_of_distribs");
    check_arg(call, array_of_dargs, "array_of_dargs");
    check_arg(call, array_of_psizes, "array_of_psizes");
    check_order(call, order);
    long long grid = 1;
    for (int d = 0; d < ndims; ++d) {
      if (array_of_gsizes[d] < 1)
        fail(call, MPI_ERR_ARG, "array_of_gsizes[%d] is %d; sizes are 1 or more", d,
             array_of_gsizes[d]);
      if (array_of_psizes[d] < 1)
        fail(call, MPI_ERR_ARG, "array_of_psizes[%d] is %d; it takes 1 or more", d,
             array_of_psizes[d]);
      grid *= array_of_psizes[d];
      if (grid > size) break;
    }
    if (grid != size)
      fail(call, MPI_ERR_ARG, "the process grid (array_of_psizes) is not of size %d processes",
           size);
    const datatype& old = lookup(call, oldtype, false);
    const std::ptrdiff_t total = elements(call, ndims, array_of_gsizes, old.extent());
    // The process grid is row-major whatever the array's order.
    std::vector<int> coords(static_cast<std::size_t>(ndims));
    for (int d = ndims - 1, r = rank; d >= 0; --d) {
      coords[std::size_t(d)] = r % array_of_psizes[d];
      r /= array_of_psizes[d];
    }
    std::vector<std::vector<int>> idx(static_cast<std::size_t>(ndims));
    for (int d = 0; d < ndims; ++d)
      idx[std::size_t(d)] = owned(call, d, array_of_gsizes[d], array_of_distribs[d],
                                  array_of_dargs[d], array_of_psizes[d], coords[std::size_t(d)]);
    builder b(MPI_COMBINER_DARRAY);
    std::vector<int>& ints = b.get().ints;
    ints = {size, rank, ndims};
    keep(ints, array_of_gsizes, ndims);
    keep(ints, array_of_distribs, ndims);
    keep(ints, array_of_dargs, ndims);
    keep(ints, array_of_psizes, ndims);
    ints.push_back(order);
    b.hold(old);
    build(b, old, std::vector<int>(array_of_gsizes, array_of_gsizes + ndims), idx, order, total);
    *newtype = publish(call, b.finish(false));
  });
}
