// Communicators: MPI_COMM_WORLD, MPI_COMM_SELF and those the program makes
// (dup, split, split_type, create, create_group), their contexts, ranks,
// comparison, names and freeing.
//
// Agreement without a registry of the job. A new communicator's context
// must be the same at every member and differ from every other live
// communicator's, across processes too. Each rank proposes contexts from a
// counter of its own, tagged with its world rank -- ((rank + 1) << 33) |
// (n << 1) -- so no two proposals in the job are equal; a creation
// exchanges proposals over the parent communicator and every member takes
// the one of the same member (the new communicator's rank 0, or the
// parent's), so all agree without asking anyone else. The low bit is the
// collectives' hidden context (comm_core).
//
// The ranks of one process that are members share one comm_core (the
// members' list is the same for all): the first to make it registers it by
// context and the others take it, so a communicator of n ranks costs one
// list of n per process, not one per rank.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include "mpi/coll.hpp"
#include "mpi/mpi_internal.hpp"
#include "weft/core/pe.hpp"

#define WEFT_MPI_API extern "C" __attribute__((visibility("default")))

namespace weft::mpi {

namespace {

constexpr std::int64_t world_context = 0, self_context = 2;

std::mutex g_cores_mutex;
std::unordered_map<std::int64_t, std::weak_ptr<const comm_core>> g_cores;
std::shared_ptr<const comm_core> g_world;

// The process's comm_core of `context`, made from `members` by the first
// member of the process that asks.
std::shared_ptr<const comm_core> share_core(std::int64_t context, std::vector<int> members,
                                            std::vector<int> dims = {},
                                            std::vector<char> periods = {}) {
  std::lock_guard lock(g_cores_mutex);
  auto it = g_cores.find(context);
  if (it != g_cores.end())
    if (auto core = it->second.lock()) return core;
  auto* made = new comm_core{context, std::move(members), std::move(dims), std::move(periods), {}};
  std::shared_ptr<const comm_core> core(made, [](const comm_core* c) {
    {
      std::lock_guard relock(g_cores_mutex);
      auto at = g_cores.find(c->context);
      if (at != g_cores.end() && at->second.expired()) g_cores.erase(at);
    }
    delete c;
  });
  g_cores[context] = core;
  return core;
}

}  // namespace

// The tag of a creation's exchange, numbered like the collectives (it
// draws the same next_collective) and laid out as theirs are (coll.hpp's
// ctx::tag: the number above 8 bits of round) with a round of its own, 192,
// that no collective uses: a non-blocking collective still in flight can
// never take its messages, however many collectives apart they are.
// (intercomm.cpp's exchanges take rounds 193 and up).
int creation_tag(std::uint32_t seq, int round) {
  return int(((seq & 0x7fffffu) << 8) | std::uint32_t(round));
}

std::int64_t propose_context(const char* call, rank_state& me) {
  if (me.contexts_proposed >= 0x7fffffffu)
    fail(call, MPI_ERR_INTERN, "rank %d made 2^31 communicators; no context is left", me.rank);
  ++me.contexts_proposed;
  return (std::int64_t(me.rank) + 1) << 33 | std::int64_t(me.contexts_proposed) << 1;
}

namespace {

// A handle for a new view of `core` (the rank's freed handles are reused).
MPI_Comm add_comm(rank_state& me, std::shared_ptr<const comm_core> core, int rank,
                  MPI_Errhandler errhandler) {
  comm_view v;
  v.core = std::move(core);
  v.rank = rank;
  v.errhandler = errhandler;
  return store_comm(me, std::move(v));
}

// ---- The exchanges a creation needs: a binomial gather to rank 0 and a
// binomial broadcast from it, O(log n) rounds, in the parent's hidden
// context (the collectives of coll.cpp may replace them).

void wait_request(const char* call, int handle) {
  finish(call, &handle, MPI_STATUS_IGNORE, true);
}

// Every rank's `bytes` at rank 0 of `comm`, in rank order (elsewhere: its
// own and those of its subtree, unspecified).
void gather_to_zero(const char* call, MPI_Comm comm, int rank, int size, int tag, void* all,
                    std::size_t bytes) {
  auto* base = static_cast<unsigned char*>(all);
  for (int mask = 1; mask < size; mask <<= 1) {
    if (rank & mask) {
      const int count = std::min(mask, size - rank);
      wait_request(call, isend(call, base + std::size_t(rank) * bytes, int(count * bytes), MPI_BYTE,
                               rank - mask, tag, comm, true));
      return;
    }
    if (rank + mask < size) {
      const int count = std::min(mask, size - rank - mask);
      wait_request(call, irecv(call, base + std::size_t(rank + mask) * bytes, int(count * bytes),
                               MPI_BYTE, rank + mask, tag, comm, true));
    }
  }
}

// Every rank's `bytes` at every rank of `comm`, in rank order.
void allgather(const char* call, rank_state& me, MPI_Comm comm, const void* mine, void* all,
               std::size_t bytes) {
  const comm_view& c = view(call, me, comm);
  const int rank = c.rank, size = int(c.core->members.size());
  const int tag = creation_tag(next_collective(me, comm));
  std::memcpy(static_cast<unsigned char*>(all) + std::size_t(rank) * bytes, mine, bytes);
  gather_to_zero(call, comm, rank, size, tag, all, bytes);
  broadcast_from(call, comm, 0, tag, all, bytes * std::size_t(size));
}

// The members of `group` (world ranks) must all be in `c`.
void check_subset(const char* call, const comm_view& c, const std::vector<int>& group) {
  for (int w : group)
    if (std::find(c.core->members.begin(), c.core->members.end(), w) == c.core->members.end())
      fail(call, MPI_ERR_GROUP, "the group has world rank %d, which is not in the communicator", w);
}

}  // namespace

// The new communicator of the members `members` (world ranks, in new rank
// order) with context `context`, for the calling rank, which is one of
// them; attributes are not copied (dup does that).
MPI_Comm make_comm(rank_state& me, MPI_Errhandler errhandler, std::int64_t context,
                   std::vector<int> members, std::vector<int> dims, std::vector<char> periods) {
  const auto at = std::find(members.begin(), members.end(), me.rank);
  const int rank = int(at - members.begin());
  return add_comm(me, share_core(context, std::move(members), std::move(dims), std::move(periods)),
                  rank, errhandler);
}

// A binomial tree over the ranks renumbered from `root`: O(log n) rounds.
void broadcast_from(const char* call, MPI_Comm comm, int root, int tag, void* data,
                    std::size_t bytes) {
  const comm_view& c = intra_view(call, self(call), comm);
  const int size = int(c.core->members.size());
  const int rank = c.rank;
  const int rel = (rank - root + size) % size;
  int mask = 1;
  while (mask < size) {
    if (rel & mask) {
      wait_request(call, irecv(call, data, int(bytes), MPI_BYTE, (rel - mask + root) % size, tag,
                               comm, true));
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (rel + mask < size)
      wait_request(call, isend(call, data, int(bytes), MPI_BYTE, (rel + mask + root) % size, tag,
                               comm, true));
}

MPI_Comm store_comm(rank_state& me, comm_view v) {
  for (std::size_t i = 2; i < me.comms.size(); ++i)
    if (me.comms[i].core == nullptr) {
      me.comms[i] = std::move(v);
      return MPI_Comm(i + 1);
    }
  me.comms.push_back(std::move(v));
  return MPI_Comm(me.comms.size());
}

void make_predefined_comms(rank_state& r, int world_size) {
  {
    std::lock_guard lock(g_cores_mutex);
    if (g_world == nullptr || int(g_world->members.size()) != world_size) {
      auto core = std::make_shared<comm_core>();
      core->context = world_context;
      core->members.resize(std::size_t(world_size));
      for (int i = 0; i < world_size; ++i) core->members[std::size_t(i)] = i;
      g_world = std::move(core);
    }
  }
  r.comms.clear();
  comm_view world;
  world.core = g_world;
  world.rank = r.rank;
  world.name = "MPI_COMM_WORLD";
  comm_view self;
  self.core = std::make_shared<const comm_core>(comm_core{self_context, {r.rank}, {}, {}, {}});
  self.rank = 0;
  self.name = "MPI_COMM_SELF";
  r.comms.push_back(std::move(world));
  r.comms.push_back(std::move(self));
}

void bad_comm(const char* call, MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) fail(call, MPI_ERR_COMM, "the communicator is MPI_COMM_NULL");
  fail(call, MPI_ERR_COMM, "%d is not a communicator of this rank (freed, or never made)", comm);
}

comm_view& intra_view(const char* call, rank_state& me, MPI_Comm comm) {
  comm_view& v = view(call, me, comm);
  if (v.remote != nullptr)
    fail(call, MPI_ERR_COMM,
         "not implemented: %s on an intercommunicator (communicator %d); merge it into an "
         "intracommunicator with MPI_Intercomm_merge first",
         call, comm);
  return v;
}

int comm_size(const char* call, MPI_Comm comm) {
  return int(view(call, self(call), comm).core->members.size());
}

int comm_rank(const char* call, MPI_Comm comm) {
  return view(call, self(call), comm).rank;
}

std::uint32_t next_collective(rank_state& me, MPI_Comm comm) {
  return me.collectives[comm]++;
}

// Called by MPI_Comm_free and by attr.cpp's MPI_Comm_free path: drops the
// view (the core goes with its last view in the process).
void drop_comm(rank_state& me, MPI_Comm comm) {
  comm_view& v = me.comms[std::size_t(comm - 1)];
  v = comm_view{};
  me.collectives.erase(comm);
}

MPI_Comm split_comm(const char* call, MPI_Comm comm, int color, int key, std::vector<int> dims,
                    std::vector<char> periods) {
  rank_state& me = self(call);
  if (color < 0 && color != MPI_UNDEFINED)
    fail(call, MPI_ERR_ARG, "color %d is negative (a color is >= 0, or MPI_UNDEFINED)", color);
  struct entry {
    int color, key;
    std::int64_t context;
  };
  intra_view(call, me, comm);
  const entry mine{color, key, color == MPI_UNDEFINED ? 0 : propose_context(call, me)};
  const comm_view& c = view(call, me, comm);
  const std::size_t size = c.core->members.size();
  std::vector<entry> all(size);
  allgather(call, me, comm, &mine, all.data(), sizeof(entry));
  if (color == MPI_UNDEFINED) return MPI_COMM_NULL;
  // Members of my color by (key, parent rank); the first one's proposal.
  std::vector<int> order;
  for (std::size_t i = 0; i < size; ++i)
    if (all[i].color == color) order.push_back(int(i));
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return all[std::size_t(a)].key < all[std::size_t(b)].key; });
  const comm_view& parent = view(call, me, comm);
  std::vector<int> members;
  for (int i : order) members.push_back(parent.core->members[std::size_t(i)]);
  return make_comm(me, parent.errhandler, all[std::size_t(order.front())].context,
                   std::move(members), std::move(dims), std::move(periods));
}

}  // namespace weft::mpi

using namespace weft::mpi;

WEFT_MPI_API int MPI_Comm_rank(MPI_Comm comm, int* rank) {
  return guard(__func__, comm, [&] { *rank = comm_rank("MPI_Comm_rank", comm); });
}

WEFT_MPI_API int MPI_Comm_size(MPI_Comm comm, int* size) {
  return guard(__func__, comm, [&] { *size = comm_size("MPI_Comm_size", comm); });
}

WEFT_MPI_API int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Comm_dup";
    rank_state& me = self(call);
    const comm_view& c = intra_view(call, me, comm);
    std::int64_t context = c.rank == 0 ? propose_context(call, me) : 0;
    broadcast_from(call, comm, 0, creation_tag(next_collective(me, comm)), &context,
                   sizeof context);
    const comm_view& parent = view(call, me, comm);
    std::shared_ptr<const graph_topology> graph = parent.graph;
    const MPI_Comm made = make_comm(me, parent.errhandler, context, parent.core->members,
                                    parent.core->dims, parent.core->periods);
    copy_attributes(call, me, comm, made);
    me.comms[std::size_t(made - 1)].name.clear();
    me.comms[std::size_t(made - 1)].graph = std::move(graph);
    // The hints go with the copy (MPI_Comm_dup_with_info replaces them:
    // info.cpp).
    me.comms[std::size_t(made - 1)].hints = view(call, me, comm).hints;
    *newcomm = made;
  });
}

// The non-blocking dup: the new handle is made now, on the parent's core,
// with the parent's attributes copied (their copy functions run in this
// call); a helper of the rank (coll_nb.cpp) agrees on the context as
// MPI_Comm_dup does -- the same exchange, numbered as the rank's next
// collective on the parent -- and puts the new core under the handle. The
// handle is the program's to use once the request completes.
WEFT_MPI_API int MPI_Comm_idup(MPI_Comm comm, MPI_Comm* newcomm, MPI_Request* request) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Comm_idup";
    rank_state& me = self(call);
    if (newcomm == nullptr || request == nullptr)
      fail(call, MPI_ERR_ARG, "newcomm or request is null");
    const coll::ctx c = coll::begin(call, comm);  // an intracommunicator
    comm_view v = view(call, me, comm);
    v.name.clear();
    v.attributes.clear();
    v.shm_collectives = 0;
    const comm_core* parent_core = v.core.get();
    const MPI_Comm made = store_comm(me, std::move(v));
    copy_attributes(call, me, comm, made);
    *newcomm = made;
    coll::held h(true);
    coll::launch(c, request, h, [made, parent_core](const coll::ctx& c) {
      rank_state& me = self(c.call);
      std::int64_t context = view(c.call, me, c.comm).rank == 0 ? propose_context(c.call, me) : 0;
      broadcast_from(c.call, c.comm, 0, creation_tag(c.seq), &context, sizeof context);
      comm_view& target = me.comms[std::size_t(made - 1)];
      // Freed before the request completed (an erroneous program): the
      // handle may be another communicator's by now.
      if (target.core.get() != parent_core)
        fail(c.call, MPI_ERR_COMM,
             "communicator %d, which MPI_Comm_idup was making, was freed before its request "
             "completed",
             made);
      const comm_core& parent = *target.core;
      target.core = share_core(context, parent.members, parent.dims, parent.periods);
    });
  });
}

WEFT_MPI_API int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  return guard(__func__, comm, [&] { *newcomm = split_comm("MPI_Comm_split", comm, color, key); });
}

WEFT_MPI_API int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info,
                                     MPI_Comm* newcomm) {
  return guard(__func__, comm, [&] {
    if (split_type != MPI_COMM_TYPE_SHARED && split_type != MPI_UNDEFINED)
      fail("MPI_Comm_split_type", MPI_ERR_ARG,
           "split type %d is not MPI_COMM_TYPE_SHARED (%d) or MPI_UNDEFINED", split_type,
           MPI_COMM_TYPE_SHARED);
    // The ranks that share memory are those of one process.
    const int color = split_type == MPI_UNDEFINED ? MPI_UNDEFINED : weft::my_node();
    const int code = MPI_Comm_split(comm, color, key, newcomm);
    if (code != MPI_SUCCESS)
      fail("MPI_Comm_split_type", code, "the split failed (error class %d)", code);
  });
}

WEFT_MPI_API int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Comm_create";
    rank_state& me = self(call);
    std::vector<int> members = group_members(call, me, group);
    check_subset(call, intra_view(call, me, comm), members);
    // Groups may differ between ranks (disjoint ones make several
    // communicators at once): each new communicator takes the proposal of
    // its first member.
    const std::int64_t mine = propose_context(call, me);
    const comm_view& c = view(call, me, comm);
    std::vector<std::int64_t> all(c.core->members.size());
    allgather(call, me, comm, &mine, all.data(), sizeof mine);
    *newcomm = MPI_COMM_NULL;
    if (std::find(members.begin(), members.end(), me.rank) == members.end()) return;
    const comm_view& parent = view(call, me, comm);
    const auto first =
        std::find(parent.core->members.begin(), parent.core->members.end(), members.front()) -
        parent.core->members.begin();
    *newcomm = make_comm(me, parent.errhandler, all[std::size_t(first)], std::move(members));
  });
}

WEFT_MPI_API int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm) {
  return guard(__func__, comm, [&] {
    const char* call = "MPI_Comm_create_group";
    rank_state& me = self(call);
    if (tag < 0 || tag > MPI_TAG_UB_VALUE)
      fail(call, MPI_ERR_TAG, "tag %d is not in 0..%d", tag, MPI_TAG_UB_VALUE);
    std::vector<int> members = group_members(call, me, group);
    const comm_view& c = intra_view(call, me, comm);
    check_subset(call, c, members);
    const auto mine = std::find(members.begin(), members.end(), me.rank);
    if (mine == members.end())
      fail(call, MPI_ERR_GROUP, "the calling rank (world rank %d) is not in the group", me.rank);
    // Only the group's members call: the group's rank 0 proposes and a
    // binomial broadcast over the group, in the parent's hidden context
    // with a tag of the program's (negative: apart from the collectives'),
    // hands it on.
    const int rank = int(mine - members.begin()), size = int(members.size());
    std::vector<int> parent_rank(members.size());
    for (std::size_t i = 0; i < members.size(); ++i)
      parent_rank[i] = int(std::find(c.core->members.begin(), c.core->members.end(), members[i]) -
                           c.core->members.begin());
    std::int64_t context = rank == 0 ? propose_context(call, me) : 0;
    const int wire_tag = -2 - tag;
    int mask = 1;
    while (mask < size) {
      if (rank & mask) {
        wait_request(call, irecv(call, &context, int(sizeof context), MPI_BYTE,
                                 parent_rank[std::size_t(rank - mask)], wire_tag, comm, true));
        break;
      }
      mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
      if (rank + mask < size)
        wait_request(call, isend(call, &context, int(sizeof context), MPI_BYTE,
                                 parent_rank[std::size_t(rank + mask)], wire_tag, comm, true));
    *newcomm = make_comm(me, view(call, me, comm).errhandler, context, std::move(members));
  });
}

WEFT_MPI_API int MPI_Comm_free(MPI_Comm* comm) {
  return guard(__func__, *comm, [&] {
    const char* call = "MPI_Comm_free";
    rank_state& me = self(call);
    view(call, me, *comm);
    if (*comm == MPI_COMM_WORLD || *comm == MPI_COMM_SELF)
      fail(call, MPI_ERR_COMM, "%s cannot be freed",
           *comm == MPI_COMM_WORLD ? "MPI_COMM_WORLD" : "MPI_COMM_SELF");
    delete_attributes(call, me, *comm);
    drop_comm(me, *comm);
    *comm = MPI_COMM_NULL;
  });
}

WEFT_MPI_API int MPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int* result) {
  return guard(__func__, comm1, [&] {
    const char* call = "MPI_Comm_compare";
    rank_state& me = self(call);
    const comm_view& va = view(call, me, comm1);
    const comm_view& vb = view(call, me, comm2);
    const comm_core& a = *va.core;
    const comm_core& b = *vb.core;
    // Intercommunicators compare their local groups and their remote
    // groups alike; one never compares equal to an intracommunicator.
    static const std::vector<int> none;
    const std::vector<int>& ra = va.remote ? *va.remote : none;
    const std::vector<int>& rb = vb.remote ? *vb.remote : none;
    if (comm1 == comm2)
      *result = MPI_IDENT;
    else if ((va.remote == nullptr) != (vb.remote == nullptr))
      *result = MPI_UNEQUAL;
    else if (a.members == b.members && ra == rb)
      *result = MPI_CONGRUENT;
    else if (std::is_permutation(a.members.begin(), a.members.end(), b.members.begin(),
                                 b.members.end()) &&
             std::is_permutation(ra.begin(), ra.end(), rb.begin(), rb.end()))
      *result = MPI_SIMILAR;
    else
      *result = MPI_UNEQUAL;
  });
}

WEFT_MPI_API int MPI_Comm_test_inter(MPI_Comm comm, int* flag) {
  return guard(__func__, comm, [&] {
    *flag = view("MPI_Comm_test_inter", self("MPI_Comm_test_inter"), comm).remote != nullptr;
  });
}

WEFT_MPI_API int MPI_Comm_set_name(MPI_Comm comm, const char* comm_name) {
  return guard(__func__, comm, [&] {
    comm_view& v = view("MPI_Comm_set_name", self("MPI_Comm_set_name"), comm);
    v.name.assign(comm_name, strnlen(comm_name, MPI_MAX_OBJECT_NAME - 1));
  });
}

WEFT_MPI_API int MPI_Comm_get_name(MPI_Comm comm, char* comm_name, int* resultlen) {
  return guard(__func__, comm, [&] {
    const comm_view& v = view("MPI_Comm_get_name", self("MPI_Comm_get_name"), comm);
    std::memcpy(comm_name, v.name.c_str(), v.name.size() + 1);
    *resultlen = int(v.name.size());
  });
}
