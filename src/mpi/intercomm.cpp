// Intercommunicators: MPI_Intercomm_create, MPI_Intercomm_merge and
// MPI_Comm_remote_size (MPI_Comm_remote_group is group.cpp's).
//
// An intercommunicator is a comm_view whose core holds the local group and
// whose `remote` holds the other group (world ranks). Both sides use one
// context, so point-to-point is the intracommunicator's path with the peer
// taken from the remote group (p2p.cpp's world_rank); a message's source is
// the sender's rank in its own group, which is what the receiver's remote
// group numbers it. Collectives, topologies and the calls that make
// communicators from one (dup, split, create) fail with "not implemented"
// (intra_view): programs merge first, which is what most do.
//
// Agreement: the two leaders exchange their group and a context proposal
// (Intercomm_create over the peer communicator with the program's tag, as
// the standard has it; Intercomm_merge over the intercommunicator's hidden
// context); each side takes the proposal of the leader with the lower world
// rank and its leader broadcasts what it learnt to its group. The exchanges
// use creation rounds no collective uses (comm.cpp's creation_tag).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>
#include "mpi/mpi_internal.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

namespace weft::mpi {

namespace {

constexpr int round_create_head = 193, round_create_list = 194;
constexpr int round_merge_leaders = 195, round_merge_group = 196;

void wait_both(const char* call, int receive, int send) {
  finish(call, &send, MPI_STATUS_IGNORE, true);
  finish(call, &receive, MPI_STATUS_IGNORE, true);
}

// What one leader tells the other.
struct leader_offer {
  std::int64_t context;   // its proposal
  std::int64_t world;     // its world rank: the lower one's proposal is taken
  std::int64_t size;      // its group's size (Intercomm_create)
  std::int64_t high = 0;  // Intercomm_merge's `high`
};

// The calling rank's local group, as a temporary intracommunicator handle
// on the intercommunicator's context: Intercomm_merge's broadcast inside
// one group runs over it, in the hidden context, with tags of its own.
MPI_Comm local_group_handle(rank_state& me, const comm_view& inter) {
  comm_view v;
  v.core = std::make_shared<const comm_core>(
      comm_core{inter.core->context, inter.core->members, {}, {}, {}});
  v.rank = inter.rank;
  return store_comm(me, std::move(v));
}

}  // namespace

}  // namespace weft::mpi

using namespace weft::mpi;

WEFT_MPI_API int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm,
                                      int remote_leader, int tag, MPI_Comm* newintercomm) {
  return guard(__func__, local_comm, [&] {
    const char* call = "MPI_Intercomm_create";
    rank_state& me = self(call);
    const comm_view& local = intra_view(call, me, local_comm);
    const int local_size = int(local.core->members.size());
    if (local_leader < 0 || local_leader >= local_size)
      fail(call, MPI_ERR_RANK, "local leader %d is not in the local communicator (size %d)",
           local_leader, local_size);
    if (newintercomm == nullptr) fail(call, MPI_ERR_ARG, "newintercomm is null");
    const std::vector<int> members = local.core->members;
    const int local_rank = local.rank;
    const MPI_Errhandler errhandler = local.errhandler;
    const std::uint32_t seq = next_collective(me, local_comm);
    // [context, size, remote members...], the leader's to broadcast.
    std::vector<std::int64_t> head(2, 0);
    std::vector<int> remote;
    if (local_rank == local_leader) {
      // Only the leaders use the peer communicator and the tag.
      const comm_view& peer = intra_view(call, me, peer_comm);
      if (remote_leader < 0 || remote_leader >= int(peer.core->members.size()))
        fail(call, MPI_ERR_RANK, "remote leader %d is not in the peer communicator (size %zu)",
             remote_leader, peer.core->members.size());
      if (remote_leader == peer.rank)
        fail(call, MPI_ERR_RANK, "remote leader %d is the calling rank itself", remote_leader);
      if (tag < 0 || tag > MPI_TAG_UB_VALUE)
        fail(call, MPI_ERR_TAG, "tag %d is not in 0..%d", tag, MPI_TAG_UB_VALUE);
      const leader_offer mine{propose_context(call, me), me.rank, local_size, 0};
      leader_offer theirs{};
      wait_both(call,
                irecv(call, &theirs, int(sizeof theirs), MPI_BYTE, remote_leader, tag, peer_comm),
                isend(call, &mine, int(sizeof mine), MPI_BYTE, remote_leader, tag, peer_comm));
      if (theirs.size < 1 || theirs.size > world().size)
        fail(call, MPI_ERR_INTERN, "the remote leader sent a group of %lld ranks",
             static_cast<long long>(theirs.size));
      remote.resize(std::size_t(theirs.size));
      wait_both(call,
                irecv(call, remote.data(), int(remote.size() * sizeof(int)), MPI_BYTE,
                      remote_leader, tag, peer_comm),
                isend(call, members.data(), int(members.size() * sizeof(int)), MPI_BYTE,
                      remote_leader, tag, peer_comm));
      head[0] = mine.world < theirs.world ? mine.context : theirs.context;
      head[1] = theirs.size;
    }
    broadcast_from(call, local_comm, local_leader, creation_tag(seq, round_create_head),
                   head.data(), head.size() * sizeof head[0]);
    remote.resize(std::size_t(head[1]));
    broadcast_from(call, local_comm, local_leader, creation_tag(seq, round_create_list),
                   remote.data(), remote.size() * sizeof(int));
    // Every rank checks, so that all of them fail alike.
    for (int w : remote)
      if (std::find(members.begin(), members.end(), w) != members.end())
        fail(call, MPI_ERR_ARG,
             "the local and remote groups overlap (world rank %d is in both); an "
             "intercommunicator joins two disjoint groups",
             w);
    comm_view v;
    v.core = std::make_shared<const comm_core>(comm_core{head[0], members, {}, {}, {}});
    v.rank = local_rank;
    v.errhandler = errhandler;
    v.remote = std::make_shared<const std::vector<int>>(std::move(remote));
    *newintercomm = store_comm(me, std::move(v));
  });
}

WEFT_MPI_API int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm* newintracomm) {
  return guard(__func__, intercomm, [&] {
    const char* call = "MPI_Intercomm_merge";
    rank_state& me = self(call);
    const comm_view& inter = view(call, me, intercomm);
    if (inter.remote == nullptr)
      fail(call, MPI_ERR_COMM, "communicator %d is not an intercommunicator", intercomm);
    if (newintracomm == nullptr) fail(call, MPI_ERR_ARG, "newintracomm is null");
    const std::uint32_t seq = next_collective(me, intercomm);
    const MPI_Comm group = local_group_handle(me, inter);  // me.comms may have moved
    // [mine, theirs], from the local leader.
    leader_offer offers[2]{};
    if (view(call, me, intercomm).rank == 0) {
      offers[0] = leader_offer{propose_context(call, me), me.rank, 0, high != 0 ? 1 : 0};
      wait_both(call,
                irecv(call, &offers[1], int(sizeof offers[1]), MPI_BYTE, 0,
                      creation_tag(seq, round_merge_leaders), intercomm, true),
                isend(call, &offers[0], int(sizeof offers[0]), MPI_BYTE, 0,
                      creation_tag(seq, round_merge_leaders), intercomm, true));
    }
    broadcast_from(call, group, 0, creation_tag(seq, round_merge_group), offers, sizeof offers);
    drop_comm(me, group);
    const comm_view& c = view(call, me, intercomm);
    // The group that passed high = false comes first; where both passed
    // the same, the one whose leader has the lower world rank.
    const bool local_first =
        offers[0].high != offers[1].high ? offers[0].high == 0 : offers[0].world < offers[1].world;
    std::vector<int> members = local_first ? c.core->members : *c.remote;
    const std::vector<int>& second = local_first ? *c.remote : c.core->members;
    members.insert(members.end(), second.begin(), second.end());
    const std::int64_t context =
        offers[0].world < offers[1].world ? offers[0].context : offers[1].context;
    *newintracomm = make_comm(me, c.errhandler, context, std::move(members));
  });
}

WEFT_MPI_API int MPI_Comm_remote_size(MPI_Comm comm, int* size) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Comm_remote_size";
    const comm_view& c = view(call, self(call), comm);
    if (c.remote == nullptr)
      fail(call, MPI_ERR_COMM, "communicator %d is not an intercommunicator", comm);
    *size = int(c.remote->size());
  });
}
