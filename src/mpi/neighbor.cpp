// Neighbourhood collectives (MPI 3.0 7.6): MPI_Neighbor_allgather(v),
// MPI_Neighbor_alltoall(v,w) and their non-blocking forms, on a Cartesian
// communicator (topo.cpp) or a graph one (topo_graph.cpp). Each rank sends
// to its out-neighbours and receives from its in-neighbours, block i of
// the receive buffer from in-neighbour i; MPI_PROC_NULL neighbours (the
// edges of a non-periodic grid) leave their blocks untouched.
//
// Matching. The messages go in the communicator's hidden context, tagged
// with the collective's number and a round (coll.hpp's ctx). On a grid the
// round names the direction the receiver sees: what a rank sends to its
// neighbour below in dimension d arrives from above there, so it travels
// in round 2d + 1, which the receiver posts for its neighbour above --
// even where both neighbours are the same rank (a periodic dimension of 2).
// On a graph, several edges between two ranks are matched in their order,
// as the standard says.
#include <vector>
#include "mpi/coll.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

namespace weft::mpi::coll {

namespace {

struct neighbourhood {
  std::vector<int> in, out;
  std::vector<int> in_round, out_round;
};

neighbourhood neighbours_of(const ctx& c) {
  const comm_view& v = view(c.call, self(c.call), c.comm);
  neighbourhood n;
  if (v.graph != nullptr) {
    n.in = v.graph->sources;
    n.out = v.graph->destinations;
    n.in_round.assign(n.in.size(), 0);
    n.out_round.assign(n.out.size(), 0);
    return n;
  }
  const comm_core& core = *v.core;
  if (core.periods.empty())
    fail(c.call, MPI_ERR_TOPOLOGY,
         "communicator %d has no topology (MPI_Cart_create, MPI_Graph_create or "
         "MPI_Dist_graph_create make one)",
         c.comm);
  const int ndims = int(core.dims.size());
  if (2 * ndims > 62)
    fail(c.call, MPI_ERR_TOPOLOGY, "a grid of %d dimensions: at most 31 here", ndims);
  // Row-major: dimension d's stride is the product of the later ones.
  std::vector<int> coords(static_cast<std::size_t>(ndims)), stride(coords.size());
  int rest = c.rank, s = 1;
  for (int d = ndims - 1; d >= 0; --d) {
    const int extent = core.dims[std::size_t(d)];
    coords[std::size_t(d)] = rest % extent;
    rest /= extent;
    stride[std::size_t(d)] = s;
    s *= extent;
  }
  for (int d = 0; d < ndims; ++d) {
    const int extent = core.dims[std::size_t(d)], at = coords[std::size_t(d)];
    for (int dir : {-1, +1}) {
      int to = at + dir;
      if (to < 0 || to >= extent) {
        if (core.periods[std::size_t(d)] == 0) {
          n.in.push_back(MPI_PROC_NULL);
          continue;
        }
        to = (to + extent) % extent;
      }
      n.in.push_back(c.rank + (to - at) * stride[std::size_t(d)]);
    }
  }
  n.out = n.in;
  for (int i = 0; i < int(n.in.size()); ++i) {
    n.in_round.push_back(i);
    n.out_round.push_back(i ^ 1);
  }
  return n;
}

// Bytes between consecutive elements of `t` in a buffer.
std::size_t stride_of(const char* call, MPI_Datatype t) {
  return is_predefined(t) ? type_bytes(call, t) : std::size_t(type_extent(call, t));
}

// The blocks of one side: counts, displacements in bytes, types.
struct blocks {
  std::vector<int> counts;
  std::vector<MPI_Aint> displs;
  std::vector<MPI_Datatype> types;
};

void check_blocks(const char* call, const void* buf, const blocks& b, const char* what) {
  for (std::size_t i = 0; i < b.counts.size(); ++i) {
    if (b.counts[i] < 0)
      fail(call, MPI_ERR_COUNT, "the count of block %zu of %s is %d, negative", i, what,
           b.counts[i]);
    if (b.counts[i] > 0 && buf == nullptr)
      fail(call, MPI_ERR_BUFFER, "%s is null for %d elements of block %zu", what, b.counts[i], i);
    stride_of(call, b.types[i]);  // a datatype that is none: MPI_ERR_TYPE here
  }
}

void exchange(const ctx& c, const neighbourhood& n, const void* sendbuf, const blocks& s,
              void* recvbuf, const blocks& r) {
  std::vector<int> handles;
  handles.reserve(n.in.size() + n.out.size());
  for (std::size_t i = 0; i < n.in.size(); ++i)
    handles.push_back(irecv(c.call, static_cast<char*>(recvbuf) + r.displs[i], r.counts[i],
                            r.types[i], n.in[i], c.tag(n.in_round[i]), c.comm, true));
  for (std::size_t j = 0; j < n.out.size(); ++j)
    handles.push_back(isend(c.call, static_cast<const char*>(sendbuf) + s.displs[j], s.counts[j],
                            s.types[j], n.out[j], c.tag(n.out_round[j]), c.comm, true));
  for (int& h : handles) finish(c.call, &h, MPI_STATUS_IGNORE, true);
}

// Every form, as alltoallw's: `s` and `r` made from the neighbourhood's
// degrees by the caller.
template <class MakeBlocks>
void neighbour_collective(const char* call, MPI_Request* request, MPI_Comm comm,
                          const void* sendbuf, void* recvbuf, MakeBlocks make) {
  const ctx c = begin(call, comm);
  const neighbourhood n = neighbours_of(c);
  blocks s, r;
  make(n, s, r);
  check_blocks(call, sendbuf, s, "sendbuf");
  check_blocks(call, recvbuf, r, "recvbuf");
  held h(request != nullptr);
  for (MPI_Datatype& t : s.types) t = h.type(call, t);
  for (MPI_Datatype& t : r.types) t = h.type(call, t);
  launch(c, request, h, [=](const ctx& cc) { exchange(cc, n, sendbuf, s, recvbuf, r); });
}

// The same count and type for every neighbour, block k at k * count.
blocks equal(const char* call, std::size_t degree, int count, MPI_Datatype type, bool same_place) {
  blocks b;
  b.counts.assign(degree, count);
  b.types.assign(degree, type);
  const std::size_t bytes = count > 0 ? std::size_t(count) * stride_of(call, type) : 0;
  for (std::size_t k = 0; k < degree; ++k) b.displs.push_back(same_place ? 0 : MPI_Aint(k * bytes));
  return b;
}

blocks varying(const char* call, std::size_t degree, const int* counts, const int* displs,
               MPI_Datatype type, const char* what) {
  if (degree > 0 && (counts == nullptr || displs == nullptr))
    fail(call, MPI_ERR_ARG, "the counts or displacements of %s are null", what);
  blocks b;
  const std::size_t e = stride_of(call, type);
  for (std::size_t k = 0; k < degree; ++k) {
    b.counts.push_back(counts[k]);
    b.displs.push_back(MPI_Aint(displs[k]) * MPI_Aint(e));
    b.types.push_back(type);
  }
  return b;
}

void allgather_(const char* call, MPI_Request* req, const void* sendbuf, int sendcount,
                MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                MPI_Comm comm) {
  neighbour_collective(call, req, comm, sendbuf, recvbuf,
                       [&](const neighbourhood& n, blocks& s, blocks& r) {
                         s = equal(call, n.out.size(), sendcount, sendtype, true);
                         r = equal(call, n.in.size(), recvcount, recvtype, false);
                       });
}

void allgatherv_(const char* call, MPI_Request* req, const void* sendbuf, int sendcount,
                 MPI_Datatype sendtype, void* recvbuf, const int* recvcounts, const int* displs,
                 MPI_Datatype recvtype, MPI_Comm comm) {
  neighbour_collective(call, req, comm, sendbuf, recvbuf,
                       [&](const neighbourhood& n, blocks& s, blocks& r) {
                         s = equal(call, n.out.size(), sendcount, sendtype, true);
                         r = varying(call, n.in.size(), recvcounts, displs, recvtype, "recvbuf");
                       });
}

void alltoall_(const char* call, MPI_Request* req, const void* sendbuf, int sendcount,
               MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
               MPI_Comm comm) {
  neighbour_collective(call, req, comm, sendbuf, recvbuf,
                       [&](const neighbourhood& n, blocks& s, blocks& r) {
                         s = equal(call, n.out.size(), sendcount, sendtype, false);
                         r = equal(call, n.in.size(), recvcount, recvtype, false);
                       });
}

void alltoallv_(const char* call, MPI_Request* req, const void* sendbuf, const int* sendcounts,
                const int* sdispls, MPI_Datatype sendtype, void* recvbuf, const int* recvcounts,
                const int* rdispls, MPI_Datatype recvtype, MPI_Comm comm) {
  neighbour_collective(call, req, comm, sendbuf, recvbuf,
                       [&](const neighbourhood& n, blocks& s, blocks& r) {
                         s = varying(call, n.out.size(), sendcounts, sdispls, sendtype, "sendbuf");
                         r = varying(call, n.in.size(), recvcounts, rdispls, recvtype, "recvbuf");
                       });
}

void alltoallw_(const char* call, MPI_Request* req, const void* sendbuf, const int* sendcounts,
                const MPI_Aint* sdispls, const MPI_Datatype* sendtypes, void* recvbuf,
                const int* recvcounts, const MPI_Aint* rdispls, const MPI_Datatype* recvtypes,
                MPI_Comm comm) {
  neighbour_collective(
      call, req, comm, sendbuf, recvbuf, [&](const neighbourhood& n, blocks& s, blocks& r) {
        if ((!n.out.empty() &&
             (sendcounts == nullptr || sdispls == nullptr || sendtypes == nullptr)) ||
            (!n.in.empty() &&
             (recvcounts == nullptr || rdispls == nullptr || recvtypes == nullptr)))
          fail(call, MPI_ERR_ARG, "the counts, displacements or types are null");
        s = blocks{{sendcounts, sendcounts + n.out.size()},
                   {sdispls, sdispls + n.out.size()},
                   {sendtypes, sendtypes + n.out.size()}};
        r = blocks{{recvcounts, recvcounts + n.in.size()},
                   {rdispls, rdispls + n.in.size()},
                   {recvtypes, recvtypes + n.in.size()}};
      });
}

MPI_Request* need(const char* call, MPI_Request* request) {
  if (request == nullptr) fail(call, MPI_ERR_ARG, "the request pointer is null");
  return request;
}

}  // namespace

}  // namespace weft::mpi::coll

using namespace weft::mpi;
using namespace weft::mpi::coll;

WEFT_MPI_API int MPI_Neighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                        void* recvbuf, int recvcount, MPI_Datatype recvtype,
                                        MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    allgather_("MPI_Neighbor_allgather", nullptr, sendbuf, sendcount, sendtype, recvbuf, recvcount,
               recvtype, comm);
  });
}

WEFT_MPI_API int MPI_Ineighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                         void* recvbuf, int recvcount, MPI_Datatype recvtype,
                                         MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm, [&] {
    allgather_("MPI_Ineighbor_allgather", need("MPI_Ineighbor_allgather", request), sendbuf,
               sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  });
}

WEFT_MPI_API int MPI_Neighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                         void* recvbuf, const int recvcounts[], const int displs[],
                                         MPI_Datatype recvtype, MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    allgatherv_("MPI_Neighbor_allgatherv", nullptr, sendbuf, sendcount, sendtype, recvbuf,
                recvcounts, displs, recvtype, comm);
  });
}

WEFT_MPI_API int MPI_Ineighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                          void* recvbuf, const int recvcounts[], const int displs[],
                                          MPI_Datatype recvtype, MPI_Comm comm,
                                          MPI_Request* request) {
  return guard(__func__, comm, [&] {
    allgatherv_("MPI_Ineighbor_allgatherv", need("MPI_Ineighbor_allgatherv", request), sendbuf,
                sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
  });
}

WEFT_MPI_API int MPI_Neighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                       void* recvbuf, int recvcount, MPI_Datatype recvtype,
                                       MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    alltoall_("MPI_Neighbor_alltoall", nullptr, sendbuf, sendcount, sendtype, recvbuf, recvcount,
              recvtype, comm);
  });
}

WEFT_MPI_API int MPI_Ineighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                        void* recvbuf, int recvcount, MPI_Datatype recvtype,
                                        MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm, [&] {
    alltoall_("MPI_Ineighbor_alltoall", need("MPI_Ineighbor_alltoall", request), sendbuf, sendcount,
              sendtype, recvbuf, recvcount, recvtype, comm);
  });
}

WEFT_MPI_API int MPI_Neighbor_alltoallv(const void* sendbuf, const int sendcounts[],
                                        const int sdispls[], MPI_Datatype sendtype, void* recvbuf,
                                        const int recvcounts[], const int rdispls[],
                                        MPI_Datatype recvtype, MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    alltoallv_("MPI_Neighbor_alltoallv", nullptr, sendbuf, sendcounts, sdispls, sendtype, recvbuf,
               recvcounts, rdispls, recvtype, comm);
  });
}

WEFT_MPI_API int MPI_Ineighbor_alltoallv(const void* sendbuf, const int sendcounts[],
                                         const int sdispls[], MPI_Datatype sendtype, void* recvbuf,
                                         const int recvcounts[], const int rdispls[],
                                         MPI_Datatype recvtype, MPI_Comm comm,
                                         MPI_Request* request) {
  return guard(__func__, comm, [&] {
    alltoallv_("MPI_Ineighbor_alltoallv", need("MPI_Ineighbor_alltoallv", request), sendbuf,
               sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm);
  });
}

WEFT_MPI_API int MPI_Neighbor_alltoallw(const void* sendbuf, const int sendcounts[],
                                        const MPI_Aint sdispls[], const MPI_Datatype sendtypes[],
                                        void* recvbuf, const int recvcounts[],
                                        const MPI_Aint rdispls[], const MPI_Datatype recvtypes[],
                                        MPI_Comm comm) {
  return guard(__func__, comm, [&] {
    alltoallw_("MPI_Neighbor_alltoallw", nullptr, sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
               recvcounts, rdispls, recvtypes, comm);
  });
}

WEFT_MPI_API int MPI_Ineighbor_alltoallw(const void* sendbuf, const int sendcounts[],
                                         const MPI_Aint sdispls[], const MPI_Datatype sendtypes[],
                                         void* recvbuf, const int recvcounts[],
                                         const MPI_Aint rdispls[], const MPI_Datatype recvtypes[],
                                         MPI_Comm comm, MPI_Request* request) {
  return guard(__func__, comm, [&] {
    alltoallw_("MPI_Ineighbor_alltoallw", need("MPI_Ineighbor_alltoallw", request), sendbuf,
               sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm);
  });
}
