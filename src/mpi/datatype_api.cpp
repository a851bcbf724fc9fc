// The datatype entry points of libweft-mpi: constructors, commit and
// free, sizes and extents, MPI_Get_count and MPI_Get_elements, pack and
// unpack, addresses (the maps themselves: datatype.cpp). They need no
// rank: a type is the process's, whoever made it.
#include <climits>
#include <cstring>
#include "mpi/datatype.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

using namespace weft::mpi;

namespace {

void check_arg(const char* call, const void* p, const char* what) {
  if (p == nullptr) fail(call, MPI_ERR_ARG, "%s is a null pointer", what);
}

// What every constructor checks first; the old type (or the first of a
// struct's) is checked by lookup.
void check_new(const char* call, int count, const MPI_Datatype* newtype) {
  if (count < 0) fail(call, MPI_ERR_COUNT, "count %d is negative", count);
  check_arg(call, newtype, "newtype");
}

// A block length; `block` names it in the message (-1: the one length of
// all blocks).
std::size_t length(const char* call, int n, int block) {
  if (n >= 0) return std::size_t(n);
  if (block < 0) fail(call, MPI_ERR_ARG, "blocklength %d is negative", n);
  fail(call, MPI_ERR_ARG, "array_of_blocklengths[%d] is %d, negative", block, n);
}

// The arrays of `count` blocks (null is accepted for none).
void check_arrays(const char* call, int count, const void* lengths, const void* displacements) {
  if (count == 0) return;
  check_arg(call, lengths, "array_of_blocklengths");
  check_arg(call, displacements, "array_of_displacements");
}

void make(const char* call, builder& b, MPI_Datatype* newtype, bool padded = false) {
  *newtype = publish(call, b.finish(padded));
}

template <class T>
void keep(std::vector<T>& to, const T* from, int count) {
  if (count > 0) to.insert(to.end(), from, from + count);
}

// Counts: a C int where it fits, MPI_UNDEFINED where it does not.
int as_int(long long n) {
  return n < 0 || n > INT_MAX ? MPI_UNDEFINED : int(n);
}

void check_status(const char* call, const MPI_Status* status) {
  if (status == MPI_STATUS_IGNORE)
    fail(call, MPI_ERR_ARG, "the status is MPI_STATUS_IGNORE (a null pointer)");
}

}  // namespace

WEFT_MPI_API int MPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Type_contiguous";
    check_new(call, count, newtype);
    const datatype& old = lookup(call, oldtype, false);
    builder b(MPI_COMBINER_CONTIGUOUS);
    b.get().ints = {count};
    b.hold(old);
    b.add(old, 0, std::size_t(count));
    make(call, b, newtype);
  });
}

namespace {

// MPI_Type_vector and MPI_Type_create_hvector: `stride` in bytes, or in
// extents of the old type (`bytes` false).
int vector(const char* call, int count, int blocklength, MPI_Aint stride, bool bytes,
           MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    check_new(call, count, newtype);
    const std::size_t n = length(call, blocklength, -1);
    const datatype& old = lookup(call, oldtype, false);
    builder b(bytes ? MPI_COMBINER_HVECTOR : MPI_COMBINER_VECTOR);
    if (bytes) {
      b.get().ints = {count, blocklength};
      b.get().addrs = {stride};
    } else {
      b.get().ints = {count, blocklength, int(stride)};
    }
    b.hold(old);
    const std::ptrdiff_t step = bytes ? stride : stride * old.extent();
    for (int i = 0; i < count; ++i) b.add(old, std::ptrdiff_t(i) * step, n);
    make(call, b, newtype);
  });
}

// The indexed family: block i is lengths[i] (or `blocklength`) elements
// at idisp[i] extents of the old type, or at adisp[i] bytes.
int indexed(const char* call, int combiner, int count, const int* lengths, int blocklength,
            const int* idisp, const MPI_Aint* adisp, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    check_new(call, count, newtype);
    if (lengths == nullptr) length(call, blocklength, -1);
    check_arrays(call, count, lengths == nullptr ? &blocklength : static_cast<const void*>(lengths),
                 idisp != nullptr ? static_cast<const void*>(idisp) : adisp);
    const datatype& old = lookup(call, oldtype, false);
    builder b(combiner);
    datatype& d = b.get();
    d.ints = {count};
    if (lengths != nullptr)
      keep(d.ints, lengths, count);
    else
      d.ints.push_back(blocklength);
    if (idisp != nullptr)
      keep(d.ints, idisp, count);
    else
      keep(d.addrs, adisp, count);
    b.hold(old);
    for (int i = 0; i < count; ++i) {
      const std::size_t n =
          lengths != nullptr ? length(call, lengths[i], i) : std::size_t(blocklength);
      const std::ptrdiff_t at =
          idisp != nullptr ? std::ptrdiff_t(idisp[i]) * old.extent() : adisp[i];
      b.add(old, at, n);
    }
    make(call, b, newtype);
  });
}

}  // namespace

WEFT_MPI_API int MPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype,
                                 MPI_Datatype* newtype) {
  return vector("MPI_Type_vector", count, blocklength, stride, false, oldtype, newtype);
}

WEFT_MPI_API int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride,
                                         MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return vector("MPI_Type_create_hvector", count, blocklength, stride, true, oldtype, newtype);
}

WEFT_MPI_API int MPI_Type_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                                  MPI_Datatype* newtype) {
  return vector("MPI_Type_hvector", count, blocklength, stride, true, oldtype, newtype);
}

WEFT_MPI_API int MPI_Type_indexed(int count, const int array_of_blocklengths[],
                                  const int array_of_displacements[], MPI_Datatype oldtype,
                                  MPI_Datatype* newtype) {
  return indexed("MPI_Type_indexed", MPI_COMBINER_INDEXED, count, array_of_blocklengths, 0,
                 array_of_displacements, nullptr, oldtype, newtype);
}

WEFT_MPI_API int MPI_Type_create_hindexed(int count, const int array_of_blocklengths[],
                                          const MPI_Aint array_of_displacements[],
                                          MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return indexed("MPI_Type_create_hindexed", MPI_COMBINER_HINDEXED, count, array_of_blocklengths, 0,
                 nullptr, array_of_displacements, oldtype, newtype);
}

WEFT_MPI_API int MPI_Type_create_indexed_block(int count, int blocklength,
                                               const int array_of_displacements[],
                                               MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return indexed("MPI_Type_create_indexed_block", MPI_COMBINER_INDEXED_BLOCK, count, nullptr,
                 blocklength, array_of_displacements, nullptr, oldtype, newtype);
}

WEFT_MPI_API int MPI_Type_create_hindexed_block(int count, int blocklength,
                                                const MPI_Aint array_of_displacements[],
                                                MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return indexed("MPI_Type_create_hindexed_block", MPI_COMBINER_HINDEXED_BLOCK, count, nullptr,
                 blocklength, nullptr, array_of_displacements, oldtype, newtype);
}

WEFT_MPI_API int MPI_Type_create_struct(int count, const int array_of_blocklengths[],
                                        const MPI_Aint array_of_displacements[],
                                        const MPI_Datatype array_of_types[],
                                        MPI_Datatype* newtype) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Type_create_struct";
    check_new(call, count, newtype);
    check_arrays(call, count, array_of_blocklengths, array_of_displacements);
    if (count > 0) check_arg(call, array_of_types, "array_of_types");
    builder b(MPI_COMBINER_STRUCT);
    datatype& d = b.get();
    d.ints = {count};
    keep(d.ints, array_of_blocklengths, count);
    keep(d.addrs, array_of_displacements, count);
    for (int i = 0; i < count; ++i) {
      const std::size_t n = length(call, array_of_blocklengths[i], i);
      const datatype& t = lookup(call, array_of_types[i], false);
      b.hold(t);
      b.add(t, array_of_displacements[i], n);
    }
    make(call, b, newtype, true);
  });
}

WEFT_MPI_API int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent,
                                         MPI_Datatype* newtype) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Type_create_resized";
    check_new(call, 0, newtype);
    const datatype& old = lookup(call, oldtype, false);
    builder b(MPI_COMBINER_RESIZED);
    b.get().addrs = {lb, extent};
    b.hold(old);
    b.add(old, 0, 1);
    b.resize(lb, extent);
    make(call, b, newtype);
  });
}

WEFT_MPI_API int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Type_dup";
    check_new(call, 0, newtype);
    const datatype& old = lookup(call, oldtype, false);
    builder b(MPI_COMBINER_DUP);
    b.hold(old);
    b.add(old, 0, 1);
    // The same bounds (add keeps resized ones; these are the plain ones,
    // a struct's padding included) and the same committed state.
    b.resize(old.lb, old.extent());
    datatype* d = b.finish(false);
    d->lb_marked = old.lb_marked;
    d->ub_marked = old.ub_marked;
    d->committed.store(old.committed.load(std::memory_order_acquire), std::memory_order_relaxed);
    *newtype = publish(call, d);
    if (rank_state* me = current_rank()) copy_type_attributes(call, *me, oldtype, *newtype);
  });
}

WEFT_MPI_API int MPI_Type_commit(MPI_Datatype* datatype) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    check_arg("MPI_Type_commit", datatype, "datatype");
    lookup("MPI_Type_commit", *datatype, false).committed.store(true, std::memory_order_release);
  });
}

WEFT_MPI_API int MPI_Type_free(MPI_Datatype* datatype) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    check_arg("MPI_Type_free", datatype, "datatype");
    // The delete functions see the type before it goes.
    if (rank_state* me = current_rank()) delete_type_attributes("MPI_Type_free", *me, *datatype);
    unpublish("MPI_Type_free", *datatype);
    // Its name goes with it: a later type may get the handle.
    if (rank_state* me = current_rank()) me->type_names.erase(*datatype);
    *datatype = MPI_DATATYPE_NULL;
  });
}

WEFT_MPI_API int MPI_Type_size(MPI_Datatype datatype, int* size) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    *size = as_int(static_cast<long long>(type_size("MPI_Type_size", datatype)));
  });
}

WEFT_MPI_API int MPI_Type_size_x(MPI_Datatype datatype, MPI_Count* size) {
  return guard(__func__, MPI_COMM_WORLD,
               [&] { *size = MPI_Count(type_size("MPI_Type_size_x", datatype)); });
}

WEFT_MPI_API int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint* lb, MPI_Aint* extent) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const auto& d = lookup("MPI_Type_get_extent", datatype, false);
    *lb = d.lb;
    *extent = d.extent();
  });
}

WEFT_MPI_API int MPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count* lb, MPI_Count* extent) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const auto& d = lookup("MPI_Type_get_extent_x", datatype, false);
    *lb = d.lb;
    *extent = d.extent();
  });
}

WEFT_MPI_API int MPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint* true_lb,
                                          MPI_Aint* true_extent) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const auto& d = lookup("MPI_Type_get_true_extent", datatype, false);
    *true_lb = d.true_lb;
    *true_extent = d.true_ub - d.true_lb;
  });
}

WEFT_MPI_API int MPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count* true_lb,
                                            MPI_Count* true_extent) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const auto& d = lookup("MPI_Type_get_true_extent_x", datatype, false);
    *true_lb = d.true_lb;
    *true_extent = d.true_ub - d.true_lb;
  });
}

WEFT_MPI_API int MPI_Type_extent(MPI_Datatype datatype, MPI_Aint* extent) {
  return guard(__func__, MPI_COMM_WORLD,
               [&] { *extent = type_extent("MPI_Type_extent", datatype); });
}

WEFT_MPI_API int MPI_Type_lb(MPI_Datatype datatype, MPI_Aint* displacement) {
  return guard(__func__, MPI_COMM_WORLD,
               [&] { *displacement = lookup("MPI_Type_lb", datatype, false).lb; });
}

WEFT_MPI_API int MPI_Type_ub(MPI_Datatype datatype, MPI_Aint* displacement) {
  return guard(__func__, MPI_COMM_WORLD,
               [&] { *displacement = lookup("MPI_Type_ub", datatype, false).ub; });
}

WEFT_MPI_API int MPI_Type_get_envelope(MPI_Datatype datatype, int* num_integers, int* num_addresses,
                                       int* num_datatypes, int* combiner) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const auto& d = lookup("MPI_Type_get_envelope", datatype, false);
    *num_integers = int(d.ints.size());
    *num_addresses = int(d.addrs.size());
    *num_datatypes = int(d.children.size());
    *combiner = d.combiner;
  });
}

WEFT_MPI_API int MPI_Type_get_contents(MPI_Datatype datatype, int max_integers, int max_addresses,
                                       int max_datatypes, int array_of_integers[],
                                       MPI_Aint array_of_addresses[],
                                       MPI_Datatype array_of_datatypes[]) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    const char* call = "MPI_Type_get_contents";
    const auto& d = lookup(call, datatype, false);
    if (d.combiner == MPI_COMBINER_NAMED)
      fail(call, MPI_ERR_TYPE, "datatype %d is predefined (MPI_COMBINER_NAMED): it has no contents",
           datatype);
    if (std::size_t(std::max(max_integers, 0)) < d.ints.size() ||
        std::size_t(std::max(max_addresses, 0)) < d.addrs.size() ||
        std::size_t(std::max(max_datatypes, 0)) < d.children.size())
      fail(call, MPI_ERR_ARG,
           "the arrays hold %d integers, %d addresses and %d datatypes; datatype %d has %zu, "
           "%zu and %zu (MPI_Type_get_envelope)",
           max_integers, max_addresses, max_datatypes, datatype, d.ints.size(), d.addrs.size(),
           d.children.size());
    if (!d.ints.empty()) std::memcpy(array_of_integers, d.ints.data(), d.ints.size() * sizeof(int));
    if (!d.addrs.empty())
      std::memcpy(array_of_addresses, d.addrs.data(), d.addrs.size() * sizeof(MPI_Aint));
    // Derived types come back as new handles of the same maps, which the
    // caller frees, as the standard says.
    for (std::size_t i = 0; i < d.children.size(); ++i) {
      const weft::mpi::datatype* c = d.children[i];
      if (c->named != MPI_DATATYPE_NULL) {
        array_of_datatypes[i] = c->named;
      } else {
        retain(c);
        array_of_datatypes[i] = publish(call, const_cast<weft::mpi::datatype*>(c));
      }
    }
  });
}

WEFT_MPI_API int MPI_Get_count(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    check_status("MPI_Get_count", status);
    const std::size_t size = type_size("MPI_Get_count", datatype);
    const long long bytes = status->weft_bytes, unit = static_cast<long long>(size);
    *count = size == 0 ? 0 : bytes % unit == 0 ? as_int(bytes / unit) : MPI_UNDEFINED;
  });
}

WEFT_MPI_API int MPI_Get_elements_x(const MPI_Status* status, MPI_Datatype datatype,
                                    MPI_Count* count) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    check_status("MPI_Get_elements_x", status);
    const long long n =
        elements_in(lookup("MPI_Get_elements_x", datatype, false), status->weft_bytes);
    *count = n < 0 ? MPI_UNDEFINED : n;
  });
}

WEFT_MPI_API int MPI_Get_elements(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    check_status("MPI_Get_elements", status);
    *count = as_int(elements_in(lookup("MPI_Get_elements", datatype, false), status->weft_bytes));
  });
}

WEFT_MPI_API int MPI_Pack(const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf,
                          int outsize, int* position, MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Pack";
    comm_size(call, comm);
    check_arg(call, position, "position");
    const layout l = layout_of(call, datatype, incount);
    if (*position < 0 || outsize < 0 || *position > outsize ||
        l.bytes > std::size_t(outsize - *position))
      fail(call, MPI_ERR_ARG,
           "%d elements of datatype %d pack into %zu bytes, and outbuf has %d at position %d "
           "(MPI_Pack_size gives the bytes needed)",
           incount, datatype, l.bytes, outsize - *position, *position);
    if (l.bytes == 0) return;
    check_arg(call, outbuf, "outbuf");
    pack(call, datatype, incount, inbuf, static_cast<char*>(outbuf) + *position);
    *position += int(l.bytes);
  });
}

WEFT_MPI_API int MPI_Unpack(const void* inbuf, int insize, int* position, void* outbuf,
                            int outcount, MPI_Datatype datatype, MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Unpack";
    comm_size(call, comm);
    check_arg(call, position, "position");
    const layout l = layout_of(call, datatype, outcount);
    if (*position < 0 || insize < 0 || *position > insize ||
        l.bytes > std::size_t(insize - *position))
      fail(call, MPI_ERR_TRUNCATE,
           "%d elements of datatype %d unpack from %zu bytes, and inbuf has %d after position "
           "%d",
           outcount, datatype, l.bytes, insize - *position, *position);
    if (l.bytes == 0) return;
    check_arg(call, inbuf, "inbuf");
    unpack(call, datatype, outcount, static_cast<const char*>(inbuf) + *position, outbuf);
    *position += int(l.bytes);
  });
}

WEFT_MPI_API int MPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int* size) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Pack_size";
    comm_size(call, comm);
    if (incount < 0) fail(call, MPI_ERR_COUNT, "count %d is negative", incount);
    const unsigned long long bytes =
        static_cast<unsigned long long>(incount) * type_size(call, datatype);
    if (bytes > INT_MAX)
      fail(call, MPI_ERR_COUNT,
           "%d elements of datatype %d pack into %llu bytes, more than an int holds", incount,
           datatype, bytes);
    *size = int(bytes);
  });
}

WEFT_MPI_API int MPI_Get_address(const void* location, MPI_Aint* address) {
  return guard(__func__, MPI_COMM_WORLD, [&] {
    check_arg("MPI_Get_address", address, "address");
    *address = reinterpret_cast<MPI_Aint>(location);
  });
}

WEFT_MPI_API int MPI_Address(void* location, MPI_Aint* address) {
  return MPI_Get_address(location, address);
}

WEFT_MPI_API MPI_Aint MPI_Aint_add(MPI_Aint base, MPI_Aint disp) {
  return base + disp;
}

WEFT_MPI_API MPI_Aint MPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2) {
  return addr1 - addr2;
}
