// The collectives' internals (docs/mpi.md "Collectives"): reduction ops
// (ops.cpp), the algorithms (coll.cpp) and how a non-blocking collective
// runs (coll_api.cpp, coll_nb.cpp).
//
// Every algorithm is written over comm_size/comm_rank and isend/irecv in
// the communicator's hidden context only, so that it works for any
// communicator and wherever its ranks live. Tags carry the collective's
// sequence number (next_collective) and a round, so that two collectives in
// flight on one communicator never take each other's messages.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>
#include "mpi/mpi_internal.hpp"

namespace weft::mpi::coll {

struct ctx {
  const char* call;
  MPI_Comm comm;
  int rank, size;
  std::uint32_t seq = 0;
  // Added to the rounds: a collective made of two (gather then bcast)
  // runs the second with another base, so that no message of one can
  // match a receive of the other.
  int base = 0;
  // Set: the algorithm runs among the ranks map[0..size-1] of c.comm (rank
  // and size are indices in it): the processes' representatives of a
  // shared-memory collective (coll_shm.cpp).
  const int* map = nullptr;
  // A blocking call on the rank itself: the shared-memory forms may run
  // it (coll_shm.cpp); a non-blocking one's helper never does.
  bool blocking = false;
  // Rounds < 64 per algorithm; sequence numbers wrap at 2^23, far beyond
  // the collectives one rank can have in flight at once.
  int tag(int round) const {
    return int(((seq & 0x7fffffu) << 8) | std::uint32_t((base + round) & 0xff));
  }
  ctx then(int b) const {
    ctx c = *this;
    c.base = b;
    return c;
  }
};

// A reduction op as a collective runs it, resolved when the call is made
// (a user op freed meanwhile stays valid for the calls already made).
struct op_ref {
  MPI_Op op = MPI_OP_NULL;
  MPI_User_function* user = nullptr;  // null: a predefined op
  bool commutative = true;
};

// A collective's context for the calling rank of `comm` (its number is
// taken at launch); MPI_ERR_COMM naming `call` for a handle that is none.
inline ctx begin(const char* call, MPI_Comm comm) {
  intra_view(call, self(call), comm);
  ctx c{};
  c.call = call;
  c.comm = comm;
  c.size = comm_size(call, comm);
  c.rank = comm_rank(call, comm);
  return c;
}

// Resolves `op` for a reduction of `type`: MPI_ERR_OP naming the op and the
// type if the op is not one, or not defined for that type by the standard.
op_ref resolve_op(const char* call, MPI_Op op, MPI_Datatype type);
// inout[i] = in[i] op inout[i], i < count (the order of MPI_User_function).
void apply(const op_ref& op, const void* in, void* inout, int count, MPI_Datatype type);
const char* op_name(MPI_Op op);
// A predefined datatype's name ("MPI_INT"), or "a derived datatype".
const char* type_name(MPI_Datatype t);

// The algorithms: buffers already resolved (MPI_IN_PLACE replaced as each
// says), arguments checked.
void barrier(const ctx& c);
void bcast(const ctx& c, void* buf, int count, MPI_Datatype type, int root);
void reduce(const ctx& c, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
            const op_ref& op, int root);
void allreduce(const ctx& c, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
               const op_ref& op);
// Gatherv / scatterv at `root`: counts and displs significant at the root
// only; `in_place` (root only): its own block is where it belongs already.
void gatherv(const ctx& c, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
             const int* recvcounts, const int* displs, MPI_Datatype recvtype, int root,
             bool in_place);
void scatterv(const ctx& c, const void* sendbuf, const int* sendcounts, const int* displs,
              MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype, int root,
              bool in_place);
void allgather(const ctx& c, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
               void* recvbuf, int recvcount, MPI_Datatype recvtype, bool in_place);
void allgatherv(const ctx& c, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                void* recvbuf, const int* recvcounts, const int* displs, MPI_Datatype recvtype,
                bool in_place);
// Alltoallw's form (byte displacements, a type per peer); the others map
// onto it. sendbuf == recvbuf: MPI_IN_PLACE (send layout = receive layout).
void alltoallw(const ctx& c, const void* sendbuf, const int* sendcounts, const int* sdispls,
               const MPI_Datatype* sendtypes, void* recvbuf, const int* recvcounts,
               const int* rdispls, const MPI_Datatype* recvtypes);
void reduce_scatter(const ctx& c, const void* sendbuf, void* recvbuf, const int* recvcounts,
                    MPI_Datatype type, const op_ref& op);
void scan(const ctx& c, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
          const op_ref& op, bool exclusive);

// The shared-memory forms (coll_shm.cpp; docs/mpi.md "Collectives"): for
// a blocking call on a communicator with two or more members in some
// process, the members of each process combine through memory and one
// representative per process runs the algorithm above across processes.
// Every member decides alike from what the standard makes equal at all of
// them (the communicator, the op, a reduction's type); false: not taken,
// the caller runs the algorithm above.
bool shm_barrier(const ctx& c);
bool shm_bcast(const ctx& c, void* buf, int count, MPI_Datatype type, int root);
bool shm_reduce(const ctx& c, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
                const op_ref& op, int root);
bool shm_allreduce(const ctx& c, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
                   const op_ref& op);

// The datatypes a non-blocking collective's helper will use, each under a
// handle of its own (hold_type, datatype.hpp), so that the program may free
// its handles once the call returns; the helper drops them when it ends,
// and these drop what no helper took (a call that failed after holding).
// A blocking call (`on` false) uses the program's handles as they are.
class held {
 public:
  explicit held(bool on) : on_(on) {}
  ~held();
  held(const held&) = delete;
  held& operator=(const held&) = delete;
  // What the helper is to use for `type`.
  MPI_Datatype type(const char* call, MPI_Datatype type);
  std::vector<MPI_Datatype> take() { return std::move(types_); }

 private:
  bool on_;
  std::vector<MPI_Datatype> from_, types_;  // the program's, and the held ones
};

// Starts `body` as the non-blocking collective `c` (its number taken) on a
// helper logical thread of the rank's PE acting for it; *request names a
// request of the rank that completes when `body` has returned, with the
// error it raised, if any, in its status (coll_nb.cpp). The helper drops
// `types` when it ends.
void launch_helper(const ctx& c, MPI_Request* request, std::function<void(const ctx&)> body,
                   std::vector<MPI_Datatype> types);

// Runs `body` as the calling rank's next collective on c.comm: now, on the
// rank (request null: a blocking call; no std::function on that path), or
// on a helper, which takes what `h` holds.
template <class Body>
void launch(const ctx& c0, MPI_Request* request, held& h, Body body) {
  ctx c = c0;
  c.seq = next_collective(self(c.call), c.comm);
  c.blocking = request == nullptr;
  if (request == nullptr)
    body(c);
  else
    launch_helper(c, request, std::move(body), h.take());
}

}  // namespace weft::mpi::coll
