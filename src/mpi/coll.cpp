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
#include "mpi/datatype.hpp"

namespace weft::mpi::coll {

namespace {

bool predefined(MPI_Datatype t) {
  return is_predefined(t);
}

// Bytes of data in one element of `t`.
std::size_t size_of(const ctx& c, MPI_Datatype t) {
  return predefined(t) ? type_bytes(c.call, t) : type_size(c.call, t);
}

// The stride of consecutive elements of `t` in a buffer (its extent):
// what displacements counted in elements are multiplied by.
std::size_t ext(const ctx& c, MPI_Datatype t) {
  return predefined(t) ? type_bytes(c.call, t) : std::size_t(type_extent(c.call, t));
}

// Where the data of `count` elements of `t` at address 0 lies: [lo, hi).
void span(const ctx& c, int count, MPI_Datatype t, std::ptrdiff_t& lo, std::ptrdiff_t& hi) {
  lo = hi = 0;
  if (count <= 0) return;
  if (predefined(t)) {
    hi = std::ptrdiff_t(std::size_t(count) * type_bytes(c.call, t));
    return;
  }
  const datatype& d = lookup(c.call, t, true);
  lo = d.true_lb;
  hi = d.true_ub + std::ptrdiff_t(count - 1) * d.extent();
}

// Scratch room for `count` elements of `t`, laid out as `t` lays them out
// (a user op combines them where they lie); `base` is element 0's address.
struct elems {
  std::unique_ptr<char[]> mem;
  char* base = nullptr;
  elems(const ctx& c, int count, MPI_Datatype t) {
    std::ptrdiff_t lo, hi;
    span(c, count, t, lo, hi);
    mem.reset(new char[std::size_t(hi - lo) + 1]);
    base = mem.get() - lo;
  }
};

char* at(void* b, std::size_t off) {
  return static_cast<char*>(b) + off;
}
const char* at(const void* b, std::size_t off) {
  return static_cast<const char*>(b) + off;
}

// `count` elements of `t` from `from` to `to` (a derived type through its
// packed form, so that only its data is written).
void copy_elems(const ctx& c, void* to, const void* from, int count, MPI_Datatype t) {
  if (count <= 0 || to == from) return;
  if (predefined(t)) {
    std::memmove(to, from, std::size_t(count) * type_bytes(c.call, t));
    return;
  }
  std::vector<char> packed(std::size_t(count) * type_size(c.call, t));
  pack(c.call, t, count, from, packed.data());
  unpack(c.call, t, count, packed.data(), to);
}

// Rank `r` of the algorithm as a rank of c.comm.
int peer(const ctx& c, int r) {
  return c.map != nullptr ? c.map[r] : r;
}

int post_recv(const ctx& c, void* buf, int count, MPI_Datatype t, int from, int round) {
  return irecv(c.call, buf, count, t, peer(c, from), c.tag(round), c.comm, true);
}

void wait(const ctx& c, int handle) {
  finish(c.call, &handle, MPI_STATUS_IGNORE, true);
}

void send(const ctx& c, const void* buf, int count, MPI_Datatype t, int to, int round) {
  const int h =
      isend(c.call, buf, count, t, peer(c, to), c.tag(round), c.comm, true, false, true, true);
  if (h != MPI_REQUEST_NULL) wait(c, h);
}

void recv(const ctx& c, void* buf, int count, MPI_Datatype t, int from, int round) {
  wait(c, post_recv(c, buf, count, t, from, round));
}

void wait_all(const ctx& c, const std::vector<int>& handles) {
  for (int h : handles) wait(c, h);
}

// A local block of a gather or a scatter: the root's own (the types may
// differ, as a message's may; their signatures match).
void copy_own(const ctx& c, const void* from, int n_from, MPI_Datatype t_from, void* to, int n_to,
              MPI_Datatype t_to) {
  const std::size_t bytes = std::size_t(n_from) * size_of(c, t_from);
  const std::size_t room = std::size_t(n_to) * size_of(c, t_to);
  if (bytes > room)
    fail(c.call, MPI_ERR_TRUNCATE, "rank %d's own block of %zu bytes is longer than its %zu",
         c.rank, bytes, room);
  if (bytes == 0 || to == from) return;
  if (predefined(t_from) && predefined(t_to)) {
    std::memmove(to, from, bytes);
    return;
  }
  std::vector<char> packed(bytes);
  pack(c.call, t_from, n_from, from, packed.data());
  unpack(c.call, t_to, int(bytes / size_of(c, t_to)), packed.data(), to);
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
  const int p = c.size;
  // A commutative op may combine in any order: the tree hangs from the
  // root. Otherwise from rank 0, so that each node combines the block of
  // ranks below its own with the block above, in rank order.
  const int top = op.commutative ? root : 0;
  const int v = (c.rank - top + p) % p;
  // What this rank holds: its own data until it first combines (a leaf
  // sends sendbuf as it is), then one of two scratch buffers in turn.
  const char* acc = static_cast<const char*>(sendbuf);
  std::unique_ptr<elems> scratch[2];
  int next = 0;
  for (int mask = 1, k = 0; mask < p; mask <<= 1, ++k) {
    if (v & mask) {
      send(c, acc, count, type, (v - mask + top) % p, k);
      break;
    }
    if (v + mask < p) {
      if (!scratch[next]) scratch[next] = std::make_unique<elems>(c, count, type);
      char* in = scratch[next]->base;
      next ^= 1;
      recv(c, in, count, type, (v + mask + top) % p, k);
      apply(op, acc, in, count, type);  // in = mine op theirs (theirs: higher ranks)
      acc = in;
    }
  }
  if (v == 0) {
    if (c.rank == root)
      copy_elems(c, recvbuf, acc, count, type);
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
  elems packed(c, total, recvtype);
  gatherv(c, sendbuf, sendcount, sendtype, packed.base, recvcounts, packed_displs.data(), recvtype,
          0, false);
  bcast(c.then(64), packed.base, total, recvtype, 0);
  for (int i = 0; i < c.size; ++i)
    copy_elems(c, at(recvbuf, std::size_t(displs[i]) * e),
               packed.base + std::size_t(packed_displs[std::size_t(i)]) * e, recvcounts[i],
               recvtype);
}

void alltoallw(const ctx& c, const void* sendbuf, const int* sendcounts, const int* sdispls,
               const MPI_Datatype* sendtypes, void* recvbuf, const int* recvcounts,
               const int* rdispls, const MPI_Datatype* recvtypes) {
  std::vector<char> saved;
  if (sendbuf == recvbuf) {
    // MPI_IN_PLACE: what is sent is what recvbuf holds before any block
    // arrives -- a snapshot of the bytes its blocks cover.
    std::ptrdiff_t lo = 0, hi = 0;
    bool any = false;
    for (int i = 0; i < c.size; ++i) {
      std::ptrdiff_t l, h;
      span(c, recvcounts[i], recvtypes[i], l, h);
      if (l == h) continue;
      l += rdispls[i];
      h += rdispls[i];
      lo = any ? std::min(lo, l) : l;
      hi = any ? std::max(hi, h) : h;
      any = true;
    }
    saved.assign(static_cast<const char*>(recvbuf) + lo, static_cast<const char*>(recvbuf) + hi);
    sendbuf = saved.data() - lo;
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
  elems full(c, c.rank == 0 ? total : 0, type);
  reduce(c, sendbuf, full.base, total, type, op, 0);
  scatterv(c.then(64), full.base, recvcounts, displs.data(), type, recvbuf, recvcounts[c.rank],
           type, 0, false);
}

void scan(const ctx& c, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
          const op_ref& op, bool exclusive) {
  // part: the combination of ranks max(0, r - 2^k + 1) .. r after round k;
  // below: of the ranks before r seen so far (exscan's result).
  elems part(c, count, type), tmp(c, count, type), below(c, exclusive ? count : 0, type);
  bool have_below = false;
  copy_elems(c, part.base, sendbuf, count, type);
  for (int d = 1, k = 0; d < c.size; d <<= 1, ++k) {
    int h = MPI_REQUEST_NULL;
    if (c.rank - d >= 0) h = post_recv(c, tmp.base, count, type, c.rank - d, k);
    if (c.rank + d < c.size) send(c, part.base, count, type, c.rank + d, k);
    if (h == MPI_REQUEST_NULL) continue;
    wait(c, h);
    // tmp: ranks r - 2d + 1 .. r - d, all before the ones combined so far.
    if (exclusive) {
      if (have_below)
        apply(op, tmp.base, below.base, count, type);
      else
        copy_elems(c, below.base, tmp.base, count, type);
      have_below = true;
    }
    apply(op, tmp.base, part.base, count, type);
  }
  if (!exclusive)
    copy_elems(c, recvbuf, part.base, count, type);
  else if (have_below)
    copy_elems(c, recvbuf, below.base, count, type);
}

}  // namespace weft::mpi::coll
