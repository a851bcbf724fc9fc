// The collectives' entry points, blocking and non-blocking: each checks
// its arguments on the calling rank (so that a bad call fails there,
// naming the problem), resolves MPI_IN_PLACE and the op, then launches the
// algorithm (coll.cpp) now or on a helper (coll_nb.cpp).
#include <vector>
#include "mpi/coll.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

using namespace weft::mpi;
using namespace weft::mpi::coll;

namespace {

// Bytes of data in one element of `type`; MPI_ERR_TYPE for a handle that
// is not a datatype, or a derived one not committed.
std::size_t size_of(const char* call, MPI_Datatype type) {
  return is_predefined(type) ? type_bytes(call, type) : type_size(call, type);
}

// How a reduction combines `type`: as it is, or -- a predefined op on a
// derived type -- as the predefined values it is made of (basic_of), the
// collective then running on them packed (`per` a element), unpacked into
// recvbuf where the result lands.
struct reduction {
  op_ref op;
  MPI_Datatype type;
  int per = 1;
  bool packed = false;
};

reduction reduction_of(const char* call, MPI_Op op, MPI_Datatype type) {
  reduction r{};
  r.type = type;
  if (!is_predefined(type) && op > MPI_OP_NULL && op <= MPI_NO_OP) {
    MPI_Datatype basic;
    int per;
    if (!basic_of(call, type, &basic, &per))
      fail(call, MPI_ERR_OP,
           "%s on datatype %d, which mixes predefined types: a predefined op takes a derived "
           "type of one predefined type only (a user op takes any)",
           op_name(op), type);
    r.op = resolve_op(call, op, basic);
    r.type = basic;
    r.per = per;
    r.packed = true;
    return r;
  }
  r.op = resolve_op(call, op, type);
  return r;
}

// `type` (and `r`'s, where it is `type`) as a helper is to use them.
void hold(held& h, const char* call, MPI_Datatype& type, reduction& r) {
  const MPI_Datatype t = h.type(call, type);
  if (r.type == type) r.type = t;
  type = t;
}

// Runs `run(in, out, n, type)` for reduction `r` of `count` elements of
// `type` at `in`: on the program's buffers, or on their packed values,
// unpacked into `recvbuf` (`count_out` elements) when `lands`.
template <class Run>
void reduce_on(const ctx& c, const reduction& r, const void* in, void* recvbuf, int count,
               MPI_Datatype type, int count_out, bool lands, Run run) {
  if (!r.packed) {
    run(in, recvbuf, count, r.type);
    return;
  }
  const std::size_t size = type_size(c.call, type);
  std::vector<char> pin(std::size_t(count) * size + 1), pout(std::size_t(count) * size + 1);
  pack(c.call, type, count, in, pin.data());
  run(pin.data(), pout.data(), count * r.per, r.type);
  if (lands) unpack(c.call, type, count_out, pout.data(), recvbuf);
}

void check_root(const ctx& c, int root) {
  if (root < 0 || root >= c.size)
    fail(c.call, MPI_ERR_ROOT, "root %d is not a rank of the communicator (0..%d)", root,
         c.size - 1);
}

void check_count(const char* call, int count, const char* what) {
  if (count < 0) fail(call, MPI_ERR_COUNT, "the count of %s is %d, negative", what, count);
}

// A buffer of `count` elements of `type`, where MPI_IN_PLACE is not
// accepted (those that accept it are resolved before).
void check_buf(const char* call, const void* buf, int count, MPI_Datatype type, const char* what) {
  const std::size_t e = size_of(call, type);
  check_count(call, count, what);
  if (buf == MPI_IN_PLACE)
    fail(call, MPI_ERR_BUFFER, "MPI_IN_PLACE is not accepted as %s here", what);
  if (buf == nullptr && count != 0 && e != 0)
    fail(call, MPI_ERR_BUFFER, "%s is null for %d elements", what, count);
}

// Counts (and displacements, if named) of every rank: non-null, counts
// not negative, each block in a non-null buffer.
void check_blocks(const ctx& c, const void* buf, const int* counts, const int* displs,
                  MPI_Datatype type, const char* what) {
  size_of(c.call, type);
  if (counts == nullptr || displs == nullptr)
    fail(c.call, MPI_ERR_ARG, "the counts or displacements of %s are null", what);
  for (int i = 0; i < c.size; ++i) {
    if (counts[i] < 0)
      fail(c.call, MPI_ERR_COUNT, "the count of rank %d in %s is %d, negative", i, what, counts[i]);
    if (counts[i] > 0 && (buf == nullptr || buf == MPI_IN_PLACE))
      fail(c.call, MPI_ERR_BUFFER, "%s is %s for %d elements of rank %d", what,
           buf == nullptr ? "null" : "MPI_IN_PLACE", counts[i], i);
  }
}

MPI_Request* need(const char* call, MPI_Request* request) {
  if (request == nullptr) fail(call, MPI_ERR_ARG, "the request pointer is null");
  return request;
}

void barrier_(const char* call, MPI_Request* req, MPI_Comm comm) {
  held h(req != nullptr);
  launch(begin(call, comm), req, h, [](const ctx& c) {
    if (!shm_barrier(c)) barrier(c);
  });
}

void bcast_(const char* call, MPI_Request* req, void* buf, int count, MPI_Datatype type, int root,
            MPI_Comm comm) {
  const ctx c = begin(call, comm);
  check_root(c, root);
  check_buf(call, buf, count, type, "the buffer");
  held h(req != nullptr);
  type = h.type(call, type);
  launch(c, req, h, [=](const ctx& c) {
    if (!shm_bcast(c, buf, count, type, root)) bcast(c, buf, count, type, root);
  });
}

void reduce_(const char* call, MPI_Request* req, const void* sendbuf, void* recvbuf, int count,
             MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
  const ctx c = begin(call, comm);
  check_root(c, root);
  reduction r = reduction_of(call, op, type);
  if (sendbuf == MPI_IN_PLACE && c.rank != root)
    fail(call, MPI_ERR_BUFFER, "MPI_IN_PLACE is accepted as the root's sendbuf only");
  const void* in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  check_buf(call, in, count, type, "sendbuf");
  if (c.rank == root) check_buf(call, recvbuf, count, type, "recvbuf");
  held h(req != nullptr);
  hold(h, call, type, r);
  launch(c, req, h, [=](const ctx& c) {
    reduce_on(c, r, in, recvbuf, count, type, count, c.rank == root,
              [&](const void* i, void* o, int n, MPI_Datatype t) {
                if (!shm_reduce(c, i, o, n, t, r.op, root)) reduce(c, i, o, n, t, r.op, root);
              });
  });
}

void allreduce_(const char* call, MPI_Request* req, const void* sendbuf, void* recvbuf, int count,
                MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  const ctx c = begin(call, comm);
  reduction r = reduction_of(call, op, type);
  const void* in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  check_buf(call, in, count, type, "sendbuf");
  check_buf(call, recvbuf, count, type, "recvbuf");
  held h(req != nullptr);
  hold(h, call, type, r);
  launch(c, req, h, [=](const ctx& c) {
    reduce_on(c, r, in, recvbuf, count, type, count, true,
              [&](const void* i, void* o, int n, MPI_Datatype t) {
                if (!shm_allreduce(c, i, o, n, t, r.op)) allreduce(c, i, o, n, t, r.op);
              });
  });
}

// Equal blocks: counts n and displacements i*n for each rank.
void equal_blocks(const ctx& c, int n, std::vector<int>& counts, std::vector<int>& displs) {
  counts.assign(std::size_t(c.size), n);
  displs.resize(std::size_t(c.size));
  for (int i = 0; i < c.size; ++i) displs[std::size_t(i)] = i * n;
}

void gatherv_(const char* call, MPI_Request* req, const void* sendbuf, int sendcount,
              MPI_Datatype sendtype, void* recvbuf, const int* recvcounts, const int* displs,
              MPI_Datatype recvtype, int root, MPI_Comm comm, bool equal, int recvcount) {
  const ctx c = begin(call, comm);
  check_root(c, root);
  const bool in_place = sendbuf == MPI_IN_PLACE;
  if (in_place && c.rank != root)
    fail(call, MPI_ERR_BUFFER, "MPI_IN_PLACE is accepted as the root's sendbuf only");
  if (!in_place) check_buf(call, sendbuf, sendcount, sendtype, "sendbuf");
  std::vector<int> counts, places;
  if (c.rank == root) {
    if (equal) {
      check_buf(call, recvbuf, recvcount, recvtype, "recvbuf");
      equal_blocks(c, recvcount, counts, places);
      recvcounts = counts.data();
      displs = places.data();
    }
    check_blocks(c, recvbuf, recvcounts, displs, recvtype, "recvbuf");
    if (!equal) {  // the program's arrays stay valid until completion
      counts.assign(recvcounts, recvcounts + c.size);
      places.assign(displs, displs + c.size);
    }
  }
  held h(req != nullptr);
  sendtype = h.type(call, sendtype);
  recvtype = h.type(call, recvtype);
  launch(c, req, h, [=](const ctx& c) {
    gatherv(c, sendbuf, sendcount, sendtype, recvbuf, counts.data(), places.data(), recvtype, root,
            in_place);
  });
}

void scatterv_(const char* call, MPI_Request* req, const void* sendbuf, const int* sendcounts,
               const int* displs, MPI_Datatype sendtype, void* recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm, bool equal, int sendcount) {
  const ctx c = begin(call, comm);
  check_root(c, root);
  const bool in_place = recvbuf == MPI_IN_PLACE;
  if (in_place && c.rank != root)
    fail(call, MPI_ERR_BUFFER, "MPI_IN_PLACE is accepted as the root's recvbuf only");
  if (!in_place) check_buf(call, recvbuf, recvcount, recvtype, "recvbuf");
  std::vector<int> counts, places;
  if (c.rank == root) {
    if (equal) {
      check_buf(call, sendbuf, sendcount, sendtype, "sendbuf");
      equal_blocks(c, sendcount, counts, places);
      sendcounts = counts.data();
      displs = places.data();
    }
    check_blocks(c, sendbuf, sendcounts, displs, sendtype, "sendbuf");
    if (!equal) {
      counts.assign(sendcounts, sendcounts + c.size);
      places.assign(displs, displs + c.size);
    }
  }
  held h(req != nullptr);
  sendtype = h.type(call, sendtype);
  recvtype = h.type(call, recvtype);
  launch(c, req, h, [=](const ctx& c) {
    scatterv(c, sendbuf, counts.data(), places.data(), sendtype, recvbuf, recvcount, recvtype, root,
             in_place);
  });
}

void allgather_(const char* call, MPI_Request* req, const void* sendbuf, int sendcount,
                MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                MPI_Comm comm) {
  const ctx c = begin(call, comm);
  const bool in_place = sendbuf == MPI_IN_PLACE;
  if (!in_place) check_buf(call, sendbuf, sendcount, sendtype, "sendbuf");
  check_buf(call, recvbuf, recvcount, recvtype, "recvbuf");
  held h(req != nullptr);
  sendtype = h.type(call, sendtype);
  recvtype = h.type(call, recvtype);
  launch(c, req, h, [=](const ctx& c) {
    allgather(c, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, in_place);
  });
}

void allgatherv_(const char* call, MPI_Request* req, const void* sendbuf, int sendcount,
                 MPI_Datatype sendtype, void* recvbuf, const int* recvcounts, const int* displs,
                 MPI_Datatype recvtype, MPI_Comm comm) {
  const ctx c = begin(call, comm);
  const bool in_place = sendbuf == MPI_IN_PLACE;
  if (!in_place) check_buf(call, sendbuf, sendcount, sendtype, "sendbuf");
  check_blocks(c, recvbuf, recvcounts, displs, recvtype, "recvbuf");
  const std::vector<int> counts(recvcounts, recvcounts + c.size), places(displs, displs + c.size);
  held h(req != nullptr);
  sendtype = h.type(call, sendtype);
  recvtype = h.type(call, recvtype);
  launch(c, req, h, [=](const ctx& c) {
    allgatherv(c, sendbuf, sendcount, sendtype, recvbuf, counts.data(), places.data(), recvtype,
               in_place);
  });
}

// Alltoall and alltoallv in alltoallw's form: byte displacements and a
// type per peer.
struct w_blocks {
  std::vector<int> counts, displs;
  std::vector<MPI_Datatype> types;
};

w_blocks to_w(const ctx& c, const int* counts, const int* displs, MPI_Datatype type) {
  size_of(c.call, type);
  const std::size_t e =
      !is_predefined(type) ? std::size_t(type_extent(c.call, type)) : type_bytes(c.call, type);
  w_blocks w;
  w.counts.assign(counts, counts + c.size);
  w.types.assign(std::size_t(c.size), type);
  for (int i = 0; i < c.size; ++i) w.displs.push_back(int(std::size_t(displs[i]) * e));
  return w;
}

// The checks of one side of an alltoall(v,w): counts, displacements and
// types of every peer.
void check_w(const ctx& c, const void* buf, const int* counts, const int* displs,
             const MPI_Datatype* types, const char* what) {
  if (types == nullptr) fail(c.call, MPI_ERR_ARG, "the types of %s are null", what);
  for (int i = 0; i < c.size; ++i) size_of(c.call, types[i]);
  check_blocks(c, buf, counts, displs, MPI_BYTE, what);
  for (int i = 0; i < c.size; ++i)
    if (displs[i] < 0)
      fail(c.call, MPI_ERR_ARG, "the displacement of rank %d in %s is %d, negative", i, what,
           displs[i]);
}

void alltoall_v(const char* call, MPI_Request* req, const void* sendbuf, const int* sendcounts,
                const int* sdispls, MPI_Datatype sendtype, void* recvbuf, const int* recvcounts,
                const int* rdispls, MPI_Datatype recvtype, MPI_Comm comm) {
  const ctx c = begin(call, comm);
  std::vector<MPI_Datatype> st(std::size_t(c.size), sendtype), rt(std::size_t(c.size), recvtype);
  check_w(c, recvbuf, recvcounts, rdispls, rt.data(), "recvbuf");
  if (sendbuf != MPI_IN_PLACE) check_w(c, sendbuf, sendcounts, sdispls, st.data(), "sendbuf");
  held h(req != nullptr);
  const w_blocks r = to_w(c, recvcounts, rdispls, h.type(call, recvtype));
  w_blocks s;
  if (sendbuf != MPI_IN_PLACE) s = to_w(c, sendcounts, sdispls, h.type(call, sendtype));
  launch(c, req, h, [=](const ctx& c) {
    const void* in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    const w_blocks& ss = sendbuf == MPI_IN_PLACE ? r : s;
    alltoallw(c, in, ss.counts.data(), ss.displs.data(), ss.types.data(), recvbuf, r.counts.data(),
              r.displs.data(), r.types.data());
  });
}

void alltoall_(const char* call, MPI_Request* req, const void* sendbuf, int sendcount,
               MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
               MPI_Comm comm) {
  const ctx c = begin(call, comm);
  check_count(call, recvcount, "recvbuf");
  std::vector<int> rc, rd, sc, sd;
  equal_blocks(c, recvcount, rc, rd);
  if (sendbuf != MPI_IN_PLACE) {
    check_count(call, sendcount, "sendbuf");
    equal_blocks(c, sendcount, sc, sd);
  }
  alltoall_v(call, req, sendbuf, sc.data(), sd.data(), sendtype, recvbuf, rc.data(), rd.data(),
             recvtype, comm);
}

void alltoallw_w(const char* call, MPI_Request* req, const void* sendbuf, const int* sendcounts,
                 const int* sdispls, const MPI_Datatype* sendtypes, void* recvbuf,
                 const int* recvcounts, const int* rdispls, const MPI_Datatype* recvtypes,
                 MPI_Comm comm) {
  const ctx c = begin(call, comm);
  check_w(c, recvbuf, recvcounts, rdispls, recvtypes, "recvbuf");
  w_blocks r{{recvcounts, recvcounts + c.size},
             {rdispls, rdispls + c.size},
             {recvtypes, recvtypes + c.size}};
  w_blocks s = r;
  if (sendbuf != MPI_IN_PLACE) {
    check_w(c, sendbuf, sendcounts, sdispls, sendtypes, "sendbuf");
    s = w_blocks{{sendcounts, sendcounts + c.size},
                 {sdispls, sdispls + c.size},
                 {sendtypes, sendtypes + c.size}};
  }
  const void* in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  held h(req != nullptr);
  for (MPI_Datatype& t : r.types) t = h.type(call, t);
  for (MPI_Datatype& t : s.types) t = h.type(call, t);
  launch(c, req, h, [=](const ctx& c) {
    alltoallw(c, in, s.counts.data(), s.displs.data(), s.types.data(), recvbuf, r.counts.data(),
              r.displs.data(), r.types.data());
  });
}

void reduce_scatter_(const char* call, MPI_Request* req, const void* sendbuf, void* recvbuf,
                     const int* recvcounts, MPI_Datatype type, MPI_Op op, MPI_Comm comm, bool block,
                     int recvcount) {
  const ctx c = begin(call, comm);
  reduction r = reduction_of(call, op, type);
  std::vector<int> counts;
  if (block) {
    check_count(call, recvcount, "recvbuf");
    counts.assign(std::size_t(c.size), recvcount);
  } else {
    if (recvcounts == nullptr) fail(call, MPI_ERR_ARG, "recvcounts is null");
    counts.assign(recvcounts, recvcounts + c.size);
  }
  long total = 0;
  for (int i = 0; i < c.size; ++i) {
    check_count(call, counts[std::size_t(i)], "recvbuf");
    total += counts[std::size_t(i)];
  }
  if (total > 0x7fffffff)
    fail(call, MPI_ERR_COUNT, "the counts add up to %ld, more than an int holds", total);
  const void* in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  check_buf(call, in, int(total), type, sendbuf == MPI_IN_PLACE ? "recvbuf (in place)" : "sendbuf");
  if (sendbuf != MPI_IN_PLACE)
    check_buf(call, recvbuf, counts[std::size_t(c.rank)], type, "recvbuf");
  std::vector<int> scaled(counts);  // in the values the op combines
  for (int& n : scaled) n *= r.per;
  held h(req != nullptr);
  hold(h, call, type, r);
  launch(c, req, h, [=](const ctx& c) {
    reduce_on(c, r, in, recvbuf, int(total), type, counts[std::size_t(c.rank)], true,
              [&](const void* i, void* o, int, MPI_Datatype t) {
                reduce_scatter(c, i, o, scaled.data(), t, r.op);
              });
  });
}

void scan_(const char* call, MPI_Request* req, const void* sendbuf, void* recvbuf, int count,
           MPI_Datatype type, MPI_Op op, MPI_Comm comm, bool exclusive) {
  const ctx c = begin(call, comm);
  reduction r = reduction_of(call, op, type);
  const void* in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  check_buf(call, in, count, type, "sendbuf");
  check_buf(call, recvbuf, count, type, "recvbuf");
  held h(req != nullptr);
  hold(h, call, type, r);
  launch(c, req, h, [=](const ctx& c) {
    // Exscan leaves rank 0's recvbuf as it was.
    reduce_on(c, r, in, recvbuf, count, type, count, !exclusive || c.rank > 0,
              [&](const void* i, void* o, int n, MPI_Datatype t) {
                scan(c, i, o, n, t, r.op, exclusive);
              });
  });
}

}  // namespace

WEFT_MPI_API int MPI_Barrier(MPI_Comm comm) {
  return guard(__func__, comm, [&] { barrier_("MPI_Barrier", nullptr, comm); });
}

WEFT_MPI_API int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm,
               [&] { barrier_("MPI_Ibarrier", need("MPI_Ibarrier", request), comm); });
}

WEFT_MPI_API int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root,
                           MPI_Comm comm) {
  return guard(__func__, comm,
               [&] { bcast_("MPI_Bcast", nullptr, buffer, count, datatype, root, comm); });
}

WEFT_MPI_API int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                            MPI_Request* request) {
  return guard(__func__, comm, [&] {
    bcast_("MPI_Ibcast", need("MPI_Ibcast", request), buffer, count, datatype, root, comm);
  });
}

WEFT_MPI_API int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                            MPI_Op op, int root, MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    reduce_("MPI_Reduce", nullptr, sendbuf, recvbuf, count, datatype, op, root, comm);
  });
}

WEFT_MPI_API int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                             MPI_Op op, int root, MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm, [&] {
    reduce_("MPI_Ireduce", need("MPI_Ireduce", request), sendbuf, recvbuf, count, datatype, op,
            root, comm);
  });
}

WEFT_MPI_API int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                               MPI_Op op, MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    allreduce_("MPI_Allreduce", nullptr, sendbuf, recvbuf, count, datatype, op, comm);
  });
}

WEFT_MPI_API int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count,
                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                MPI_Request* request) {
  return guard(__func__, comm, [&] {
    allreduce_("MPI_Iallreduce", need("MPI_Iallreduce", request), sendbuf, recvbuf, count, datatype,
               op, comm);
  });
}

WEFT_MPI_API int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                            void* recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                            MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    gatherv_("MPI_Gather", nullptr, sendbuf, sendcount, sendtype, recvbuf, nullptr, nullptr,
             recvtype, root, comm, true, recvcount);
  });
}

WEFT_MPI_API int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                             void* recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                             MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm, [&] {
    gatherv_("MPI_Igather", need("MPI_Igather", request), sendbuf, sendcount, sendtype, recvbuf,
             nullptr, nullptr, recvtype, root, comm, true, recvcount);
  });
}

WEFT_MPI_API int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                             void* recvbuf, const int recvcounts[], const int displs[],
                             MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    gatherv_("MPI_Gatherv", nullptr, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
             recvtype, root, comm, false, 0);
  });
}

WEFT_MPI_API int MPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                              void* recvbuf, const int recvcounts[], const int displs[],
                              MPI_Datatype recvtype, int root, MPI_Comm comm,
                              MPI_Request* request) {
  return guard(__func__, comm, [&] {
    gatherv_("MPI_Igatherv", need("MPI_Igatherv", request), sendbuf, sendcount, sendtype, recvbuf,
             recvcounts, displs, recvtype, root, comm, false, 0);
  });
}

WEFT_MPI_API int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                             void* recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                             MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    scatterv_("MPI_Scatter", nullptr, sendbuf, nullptr, nullptr, sendtype, recvbuf, recvcount,
              recvtype, root, comm, true, sendcount);
  });
}

WEFT_MPI_API int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                              void* recvbuf, int recvcount, MPI_Datatype recvtype, int root,
                              MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm, [&] {
    scatterv_("MPI_Iscatter", need("MPI_Iscatter", request), sendbuf, nullptr, nullptr, sendtype,
              recvbuf, recvcount, recvtype, root, comm, true, sendcount);
  });
}

WEFT_MPI_API int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                              MPI_Datatype sendtype, void* recvbuf, int recvcount,
                              MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    scatterv_("MPI_Scatterv", nullptr, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount,
              recvtype, root, comm, false, 0);
  });
}

WEFT_MPI_API int MPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                               MPI_Datatype sendtype, void* recvbuf, int recvcount,
                               MPI_Datatype recvtype, int root, MPI_Comm comm,
                               MPI_Request* request) {
  return guard(__func__, comm, [&] {
    scatterv_("MPI_Iscatterv", need("MPI_Iscatterv", request), sendbuf, sendcounts, displs,
              sendtype, recvbuf, recvcount, recvtype, root, comm, false, 0);
  });
}

WEFT_MPI_API int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                               void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    allgather_("MPI_Allgather", nullptr, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
               comm);
  });
}

WEFT_MPI_API int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                                MPI_Request* request) {
  return guard(__func__, comm, [&] {
    allgather_("MPI_Iallgather", need("MPI_Iallgather", request), sendbuf, sendcount, sendtype,
               recvbuf, recvcount, recvtype, comm);
  });
}

WEFT_MPI_API int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                void* recvbuf, const int recvcounts[], const int displs[],
                                MPI_Datatype recvtype, MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    allgatherv_("MPI_Allgatherv", nullptr, sendbuf, sendcount, sendtype, recvbuf, recvcounts,
                displs, recvtype, comm);
  });
}

WEFT_MPI_API int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                 void* recvbuf, const int recvcounts[], const int displs[],
                                 MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm, [&] {
    allgatherv_("MPI_Iallgatherv", need("MPI_Iallgatherv", request), sendbuf, sendcount, sendtype,
                recvbuf, recvcounts, displs, recvtype, comm);
  });
}

WEFT_MPI_API int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                              void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    alltoall_("MPI_Alltoall", nullptr, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
              comm);
  });
}

WEFT_MPI_API int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                               void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                               MPI_Request* request) {
  return guard(__func__, comm, [&] {
    alltoall_("MPI_Ialltoall", need("MPI_Ialltoall", request), sendbuf, sendcount, sendtype,
              recvbuf, recvcount, recvtype, comm);
  });
}

WEFT_MPI_API int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                               MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                               const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    alltoall_v("MPI_Alltoallv", nullptr, sendbuf, sendcounts, sdispls, sendtype, recvbuf,
               recvcounts, rdispls, recvtype, comm);
  });
}

WEFT_MPI_API int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                                MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                                const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                                MPI_Request* request) {
  return guard(__func__, comm, [&] {
    alltoall_v("MPI_Ialltoallv", need("MPI_Ialltoallv", request), sendbuf, sendcounts, sdispls,
               sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
  });
}

WEFT_MPI_API int MPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                               const MPI_Datatype sendtypes[], void* recvbuf,
                               const int recvcounts[], const int rdispls[],
                               const MPI_Datatype recvtypes[], MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    alltoallw_w("MPI_Alltoallw", nullptr, sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                recvcounts, rdispls, recvtypes, comm);
  });
}

WEFT_MPI_API int MPI_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                                const MPI_Datatype sendtypes[], void* recvbuf,
                                const int recvcounts[], const int rdispls[],
                                const MPI_Datatype recvtypes[], MPI_Comm comm,
                                MPI_Request* request) {
  return guard(__func__, comm, [&] {
    alltoallw_w("MPI_Ialltoallw", need("MPI_Ialltoallw", request), sendbuf, sendcounts, sdispls,
                sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm);
  });
}

WEFT_MPI_API int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                                    MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    reduce_scatter_("MPI_Reduce_scatter", nullptr, sendbuf, recvbuf, recvcounts, datatype, op, comm,
                    false, 0);
  });
}

WEFT_MPI_API int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                                     MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                     MPI_Request* request) {
  return guard(__func__, comm, [&] {
    reduce_scatter_("MPI_Ireduce_scatter", need("MPI_Ireduce_scatter", request), sendbuf, recvbuf,
                    recvcounts, datatype, op, comm, false, 0);
  });
}

WEFT_MPI_API int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                                          MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    reduce_scatter_("MPI_Reduce_scatter_block", nullptr, sendbuf, recvbuf, nullptr, datatype, op,
                    comm, true, recvcount);
  });
}

WEFT_MPI_API int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                                           MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                           MPI_Request* request) {
  return guard(__func__, comm, [&] {
    reduce_scatter_("MPI_Ireduce_scatter_block", need("MPI_Ireduce_scatter_block", request),
                    sendbuf, recvbuf, nullptr, datatype, op, comm, true, recvcount);
  });
}

WEFT_MPI_API int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                          MPI_Op op, MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    scan_("MPI_Scan", nullptr, sendbuf, recvbuf, count, datatype, op, comm, false);
  });
}

WEFT_MPI_API int MPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                           MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm, [&] {
    scan_("MPI_Iscan", need("MPI_Iscan", request), sendbuf, recvbuf, count, datatype, op, comm,
          false);
  });
}

WEFT_MPI_API int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                            MPI_Op op, MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    scan_("MPI_Exscan", nullptr, sendbuf, recvbuf, count, datatype, op, comm, true);
  });
}

WEFT_MPI_API int MPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm, [&] {
    scan_("MPI_Iexscan", need("MPI_Iexscan", request), sendbuf, recvbuf, count, datatype, op, comm,
          true);
  });
}
