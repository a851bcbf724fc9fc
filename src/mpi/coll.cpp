// The collectives' algorithms, over isend/irecv in the communicator's
// hidden context (coll.hpp). Each is O(log P) deep where the data allows:
//  barrier      fan-in to rank 0 along a binomial tree, then fan-out;
//  bcast        binomial tree from the root;
//  reduce       binomial tree to the root (to rank 0 in rank order, then
//               to the root, for an op that does not commute);
//  allreduce    reduce to rank 0, then bcast;
//  gather(v), scatter(v), alltoall(v,w)  every message posted at once
//               (depth 1: the root's P-1 blocks are its work anyway);
//  allgather(v) gather to rank 0, then bcast;
//  reduce_scatter  reduce to rank 0, then scatterv;
//  scan, exscan recursive doubling (Hillis-Steele): ceil(log2 P) rounds.
// Eager sends complete when posted, so a rank posts its receives, then
// sends, then waits.
//
// Why trees to one rank rather than recursive doubling (allreduce) or
// dissemination (barrier): ranks outnumber the PEs (vp > PEs is the normal
// case), so what a collective costs is the messages each PE handles, not
// the depth; P log P messages against 2(P - 1). 8 ranks on 2 PEs,
// bench/mpi/allreduce_ranks.c: 64 KiB allreduce 64-95 us against 146-168
// with recursive doubling, barrier 5.5 us against 6.3-10.3, 8 doubles
// 5.7-7.1 against 6.4-8.5 (three alternated rounds, a loaded 2-core VM).
#include "mpi/coll.hpp"
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

namespace weft::mpi::coll {

namespace {

// Datatypes are the predefined ones here: contiguous, extent = size. With
// derived ones, ext() is to be the extent (displacements, scratch sizes),
// and copy() / copy_own() the only local copies, to pack and unpack;
// messages go through isend/irecv, which take (buffer, count, type).
std::size_t ext(const ctx& c, MPI_Datatype t) {
  return type_bytes(c.call, t);
}

char* at(void* b, std::size_t off) {
  return static_cast<char*>(b) + off;
}
const char* at(const void* b, std::size_t off) {
  return static_cast<const char*>(b) + off;
}

void copy(void* to, const void* from, std::size_t bytes) {
  if (bytes != 0 && to != from) std::memmove(to, from, bytes);
}

int post_recv(const ctx& c, void* buf, int count, MPI_Datatype t, int from, int round) {
  return irecv(c.call, buf, count, t, from, c.tag(round), c.comm, true);
}

void wait(const ctx& c, int handle) {
  finish(c.call, &handle, MPI_STATUS_IGNORE, true);
}

void send(const ctx& c, const void* buf, int count, MPI_Datatype t, int to, int round) {
  wait(c, isend(c.call, buf, count, t, to, c.tag(round), c.comm, true));
}

void recv(const ctx& c, void* buf, int count, MPI_Datatype t, int from, int round) {
  wait(c, post_recv(c, buf, count, t, from, round));
}

void wait_all(const ctx& c, const std::vector<int>& handles) {
  for (int h : handles) wait(c, h);
}

// A local block of a gather or a scatter: the root's own.
void copy_own(const ctx& c, const void* from, int n_from, MPI_Datatype t_from, void* to, int n_to,
              MPI_Datatype t_to) {
  const std::size_t bytes = std::size_t(n_from) * ext(c, t_from);
  if (bytes > std::size_t(n_to) * ext(c, t_to))
    fail(c.call, MPI_ERR_TRUNCATE, "rank %d's own block of %zu bytes is longer than its %zu",
         c.rank, bytes, std::size_t(n_to) * ext(c, t_to));
  copy(to, from, bytes);
}

}  // namespace

void barrier(const ctx& c) {
  // Fan-in to rank 0 along the binomial tree, then fan-out (bcast).
  for (int mask = 1; mask < c.size; mask <<= 1) {
    if (c.rank & mask) {
      send(c, nullptr, 0, MPI_BYTE, c.rank - mask, 0);
      break;
    }
    if (c.rank + mask < c.size) recv(c, nullptr, 0, MPI_BYTE, c.rank + mask, 0);
  }
  bcast(c.then(64), nullptr, 0, MPI_BYTE, 0);
}

void bcast(const ctx& c, void* buf, int count, MPI_Datatype type, int root) {
  const int p = c.size, v = (c.rank - root + p) % p;
  int mask = 1;
  for (; mask < p; mask <<= 1)
    if (v & mask) {
      recv(c, buf, count, type, (v - mask + root) % p, 0);
      break;
    }
  // Children: v + m for the bits m below v's lowest set bit.
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (v + mask < p) send(c, buf, count, type, (v + mask + root) % p, 0);
}

void reduce(const ctx& c, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
            const op_ref& op, int root) {
  const std::size_t bytes = std::size_t(count) * ext(c, type);
  const int p = c.size;
  // A commutative op may combine in any order: the tree hangs from the
  // root. Otherwise from rank 0, so that each node combines the block of
  // ranks below its own with the block above, in rank order.
  const int top = op.commutative ? root : 0;
  const int v = (c.rank - top + p) % p;
  // What this rank holds: its own data until it first combines (a leaf
  // sends sendbuf as it is), then one of two scratch buffers in turn.
  const char* acc = static_cast<const char*>(sendbuf);
  std::unique_ptr<char[]> scratch;
  char* spare[2] = {nullptr, nullptr};
  int next = 0;
  for (int mask = 1, k = 0; mask < p; mask <<= 1, ++k) {
    if (v & mask) {
      send(c, acc, count, type, (v - mask + top) % p, k);
      break;
    }
    if (v + mask < p) {
      if (!scratch) {
        scratch.reset(new char[2 * bytes + 1]);
        spare[0] = scratch.get();
        spare[1] = scratch.get() + bytes;
      }
      char* in = spare[next];
      next ^= 1;
      recv(c, in, count, type, (v + mask + top) % p, k);
      apply(op, acc, in, count, type);  // in = mine op theirs (theirs: higher ranks)
      acc = in;
    }
  }
  if (v == 0) {
    if (c.rank == root)
      copy(recvbuf, acc, bytes);
    else
      send(c, acc, count, type, root, 63);
  } else if (c.rank == root) {
    recv(c, recvbuf, count, type, top, 63);
  }
}

void allreduce(const ctx& c, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
               const op_ref& op) {
  reduce(c, sendbuf, recvbuf, count, type, op, 0);
  bcast(c.then(64), recvbuf, count, type, 0);
}

void gatherv(const ctx& c, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
             const int* recvcounts, const int* displs, MPI_Datatype recvtype, int root,
             bool in_place) {
  if (c.rank != root) {
    send(c, sendbuf, sendcount, sendtype, root, 0);
    return;
  }
  const std::size_t e = ext(c, recvtype);
  std::vector<int> handles;
  handles.reserve(std::size_t(c.size));
  for (int i = 0; i < c.size; ++i)
    if (i != root)
      handles.push_back(
          post_recv(c, at(recvbuf, std::size_t(displs[i]) * e), recvcounts[i], recvtype, i, 0));
  if (!in_place)
    copy_own(c, sendbuf, sendcount, sendtype, at(recvbuf, std::size_t(displs[root]) * e),
             recvcounts[root], recvtype);
  wait_all(c, handles);
}

void scatterv(const ctx& c, const void* sendbuf, const int* sendcounts, const int* displs,
              MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype, int root,
              bool in_place) {
  if (c.rank != root) {
    recv(c, recvbuf, recvcount, recvtype, root, 0);
    return;
  }
  const std::size_t e = ext(c, sendtype);
  for (int k = 1; k < c.size; ++k) {
    const int i = (root + k) % c.size;
    send(c, at(sendbuf, std::size_t(displs[i]) * e), sendcounts[i], sendtype, i, 0);
  }
  if (!in_place)
    copy_own(c, at(sendbuf, std::size_t(displs[root]) * e), sendcounts[root], sendtype, recvbuf,
             recvcount, recvtype);
}

void allgather(const ctx& c, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
               void* recvbuf, int recvcount, MPI_Datatype recvtype, bool in_place) {
  const std::size_t e = ext(c, recvtype);
  if (in_place) {
    sendbuf = at(recvbuf, std::size_t(c.rank) * std::size_t(recvcount) * e);
    sendcount = recvcount;
    sendtype = recvtype;
  }
  std::vector<int> counts(std::size_t(c.size), recvcount), displs(std::size_t(c.size));
  for (int i = 0; i < c.size; ++i) displs[std::size_t(i)] = i * recvcount;
  gatherv(c, sendbuf, sendcount, sendtype, recvbuf, counts.data(), displs.data(), recvtype, 0,
          in_place && c.rank == 0);
  bcast(c.then(64), recvbuf, c.size * recvcount, recvtype, 0);
}

void allgatherv(const ctx& c, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                void* recvbuf, const int* recvcounts, const int* displs, MPI_Datatype recvtype,
                bool in_place) {
  // Gathered packed at rank 0 and broadcast so, each rank unpacking by
  // displs: the gaps between blocks of recvbuf are the program's and stay
  // untouched.
  const std::size_t e = ext(c, recvtype);
  std::vector<int> packed_displs(std::size_t(c.size));
  int total = 0;
  for (int i = 0; i < c.size; ++i) {
    packed_displs[std::size_t(i)] = total;
    total += recvcounts[i];
  }
  if (in_place) {
    sendbuf = at(recvbuf, std::size_t(displs[c.rank]) * e);
    sendcount = recvcounts[c.rank];
    sendtype = recvtype;
  }
  std::vector<char> packed(std::size_t(total) * e);
  gatherv(c, sendbuf, sendcount, sendtype, packed.data(), recvcounts, packed_displs.data(),
          recvtype, 0, false);
  bcast(c.then(64), packed.data(), total, recvtype, 0);
  for (int i = 0; i < c.size; ++i)
    copy(at(recvbuf, std::size_t(displs[i]) * e),
         packed.data() + std::size_t(packed_displs[std::size_t(i)]) * e,
         std::size_t(recvcounts[i]) * e);
}

void alltoallw(const ctx& c, const void* sendbuf, const int* sendcounts, const int* sdispls,
               const MPI_Datatype* sendtypes, void* recvbuf, const int* recvcounts,
               const int* rdispls, const MPI_Datatype* recvtypes) {
  std::vector<char> saved;
  if (sendbuf == recvbuf) {
    // MPI_IN_PLACE: what is sent is what recvbuf holds before any block
    // arrives.
    std::size_t end = 0;
    for (int i = 0; i < c.size; ++i)
      end = std::max(end,
                     std::size_t(rdispls[i]) + std::size_t(recvcounts[i]) * ext(c, recvtypes[i]));
    saved.assign(static_cast<const char*>(recvbuf), static_cast<const char*>(recvbuf) + end);
    sendbuf = saved.data();
  }
  std::vector<int> handles;
  handles.reserve(std::size_t(c.size));
  for (int k = 1; k < c.size; ++k) {
    const int i = (c.rank - k + c.size) % c.size;
    handles.push_back(
        post_recv(c, at(recvbuf, std::size_t(rdispls[i])), recvcounts[i], recvtypes[i], i, 0));
  }
  // Each rank starts with its next neighbour, so that not every rank
  // sends to rank 0 first.
  for (int k = 1; k < c.size; ++k) {
    const int i = (c.rank + k) % c.size;
    send(c, at(sendbuf, std::size_t(sdispls[i])), sendcounts[i], sendtypes[i], i, 0);
  }
  copy_own(c, at(sendbuf, std::size_t(sdispls[c.rank])), sendcounts[c.rank], sendtypes[c.rank],
           at(recvbuf, std::size_t(rdispls[c.rank])), recvcounts[c.rank], recvtypes[c.rank]);
  wait_all(c, handles);
}

void reduce_scatter(const ctx& c, const void* sendbuf, void* recvbuf, const int* recvcounts,
                    MPI_Datatype type, const op_ref& op) {
  std::vector<int> displs(std::size_t(c.size));
  int total = 0;
  for (int i = 0; i < c.size; ++i) {
    displs[std::size_t(i)] = total;
    total += recvcounts[i];
  }
  std::vector<char> full(c.rank == 0 ? std::size_t(total) * ext(c, type) : 0);
  reduce(c, sendbuf, full.data(), total, type, op, 0);
  scatterv(c.then(64), full.data(), recvcounts, displs.data(), type, recvbuf, recvcounts[c.rank],
           type, 0, false);
}

void scan(const ctx& c, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
          const op_ref& op, bool exclusive) {
  const std::size_t bytes = std::size_t(count) * ext(c, type);
  // part: the combination of ranks max(0, r - 2^k + 1) .. r after round k;
  // below: of the ranks before r seen so far (exscan's result).
  std::vector<char> part(bytes), tmp(bytes), below(exclusive ? bytes : 0);
  bool have_below = false;
  copy(part.data(), sendbuf, bytes);
  for (int d = 1, k = 0; d < c.size; d <<= 1, ++k) {
    int h = MPI_REQUEST_NULL;
    if (c.rank - d >= 0) h = post_recv(c, tmp.data(), count, type, c.rank - d, k);
    if (c.rank + d < c.size) send(c, part.data(), count, type, c.rank + d, k);
    if (h == MPI_REQUEST_NULL) continue;
    wait(c, h);
    // tmp: ranks r - 2d + 1 .. r - d, all before the ones combined so far.
    if (exclusive) {
      if (have_below)
        apply(op, tmp.data(), below.data(), count, type);
      else
        copy(below.data(), tmp.data(), bytes);
      have_below = true;
    }
    apply(op, tmp.data(), part.data(), count, type);
  }
  if (!exclusive)
    copy(recvbuf, part.data(), bytes);
  else if (have_below)
    copy(recvbuf, below.data(), bytes);
}

}  // namespace weft::mpi::coll
