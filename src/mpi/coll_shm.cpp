// Two-level collectives (docs/mpi.md "Collectives"): the members of a
// communicator that live in one process combine through memory, and one
// representative per process runs coll.cpp's algorithms across processes.
//
// One collective, at each member of a process:
//  1. it leaves the address of its data in the communicator's slot;
//  2. it arrives: the members of one PE count on their PE (one thread:
//     no atomics), the last of them combines the PE's data and arrives at
//     the PE's node of a tree over the PEs (fan-in 4); whoever completes
//     a node combines its children's results into it and goes on to its
//     parent. The others suspend: their PEs run other ranks and the
//     runtime's messages meanwhile;
//  3. if the communicator spans processes, the process's representative
//     (its first member; the root, in the root's process) takes the
//     result across processes with the tree algorithms over
//     point-to-point, among the representatives only;
//  4. it releases the slot: a wake-up message goes down the tree of PEs,
//     each PE forwarding it to its children and waking its members, which
//     copy the result out.
// So a collective costs O(log P) steps in the number of PEs on its
// longest path, no PE sends more than four messages, and no cache line
// takes more than five writers. An 8-rank allreduce on 2 PEs is a few
// atomic adds, one combining pass per PE and two messages, where the tree
// over point-to-point sent 14 and copied every block twice. Large
// reductions (split_bytes) are combined in parts instead, every member
// combining one part of every member's data once all have arrived, so
// that the work is shared by every PE; a reduction whose op does not
// commute is combined in rank order by the one that completes the tree.
// The order of combining is fixed by the placement, not by who arrives
// first: the same data give the same result, bit for bit, run after run.
//
// Two slots, used in turn: a member enters collective n + 2 only after
// collective n + 1 released, which needs every member to have arrived at
// n + 1 and so to have finished copying out of n. Nothing is reset: the
// counters only grow, and the slot's last release names the collective
// it ended.
#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>
#include "mpi/coll.hpp"
#include "weft/base/error.hpp"
#include "weft/core/handler.hpp"
#include "weft/core/pe.hpp"
#include "weft/core/send.hpp"

namespace weft::mpi {

namespace {

constexpr int fan_in = 4;

// A PE of the process with members: a node of the tree over PEs (heap
// order: node k's children are 4k + 1 .. 4k + 4).
struct pe_node {
  int job_pe = 0;
  std::vector<int> world;    // its members' world ranks
  std::vector<int> members;  // their indices among the process's members
  int parent = -1;
  std::vector<int> children;
};

// A node's part of one slot. Its own cache line: a node is written by its
// PE and its children only.
struct alignas(64) node_round {
  int here = 0;  // members of the PE arrived (the PE's thread only)
  // The PE's own arrival and its children's.
  std::atomic<std::uint64_t> arrived{0};
  // What the PE and its subtree combined; node 0's: the result.
  std::unique_ptr<char[]> acc;
  std::size_t room = 0;

  char* reserve(std::size_t bytes) {
    if (bytes > room) {
      acc.reset(new char[bytes]);
      room = bytes;
    }
    return acc.get();
  }
};

struct shm_round {
  std::unique_ptr<node_round[]> nodes;
  std::vector<const void*> in;  // by index among the process's members
  // Split combining: parts combined so far.
  alignas(64) std::atomic<std::uint64_t> parts_done{0};
  // The number of the collective whose members all arrived (a split
  // combine starts), that combined (the representative waits for it) and
  // that released (everyone else waits for it).
  alignas(64) std::atomic<std::uint32_t> gathered{0};
  std::atomic<std::uint32_t> combined{0}, released{0};
};

}  // namespace

struct shm_coll {
  std::int64_t context = 0;
  // Some process has two members or more (the same at every member: every
  // process knows where every rank runs): else the shared-memory form
  // saves nothing and is not taken.
  bool useful = false;
  bool spans = false;                // members in more than one process
  int members = 0;                   // in this process
  std::vector<int> index;            // by rank in the communicator: among this process's, or -1
  std::vector<int> world_of;         // by rank in the communicator
  std::vector<int> node_of;          // by index among this process's members
  std::vector<int> representatives;  // each process's first member, in rank order
  std::vector<int> slot_of;          // by rank: its process's place in representatives
  std::vector<pe_node> tree;
  // The release's wake-up for the whole tree (on_wake's form).
  std::vector<int> wake_all;
  shm_round rounds[2];
};

void destroy(shm_coll* s) noexcept {
  delete s;
}

namespace coll {

namespace {

handler_id h_wake = 0;

struct wake_header {
  std::int64_t context;
  std::uint32_t gen;
};

// A wake-up names the members of a subtree of PEs, its own PE's first:
//   subtree := members, world rank..., children, (length, job PE)...,
//              each child's subtree
// (ints). Each PE forwards its children's parts, then wakes its members
// that still wait in collective `gen` of the communicator of `context`
// (one that already went on -- a spurious wake-up let it see the release
// -- waits in another, or in none). The message carries all a PE needs:
// nothing of the communicator is looked up, which may be freed by then.
void send_wake(std::int64_t context, std::uint32_t gen, int job_pe, const void* subtree,
               std::size_t ints) {
  message_ptr m = make_message(h_wake, sizeof(wake_header) + ints * sizeof(int));
  const wake_header h{context, gen};
  std::memcpy(m->data(), &h, sizeof h);
  std::memcpy(m->data() + sizeof h, subtree, ints * sizeof(int));
  weft::send(job_pe, std::move(m));
}

void on_wake(message_ptr m) {
  wake_header h;
  std::memcpy(&h, m->data(), sizeof h);
  const std::byte* t = m->data() + sizeof h;
  const auto at = [t](std::size_t i) {
    int v;
    std::memcpy(&v, t + i * sizeof v, sizeof v);
    return v;
  };
  const int members = at(0);
  const int children = at(std::size_t(1 + members));
  std::size_t child = std::size_t(2 + members + 2 * children);
  for (int j = 0; j < children; ++j) {
    const int length = at(std::size_t(2 + members + 2 * j));
    send_wake(h.context, h.gen, at(std::size_t(3 + members + 2 * j)), t + child * sizeof(int),
              std::size_t(length));
    child += std::size_t(length);
  }
  for (int i = 0; i < members; ++i) {
    rank_state* r = world().ranks[std::size_t(at(std::size_t(1 + i)))].get();
    if (r != nullptr && r->shm_context == h.context && r->shm_gen == h.gen) wake(*r);
  }
}

const bool registered = [] {
  h_wake = register_handler("mpi.coll_wake", &on_wake);
  return true;
}();

// Node k's subtree in on_wake's form, appended to `out`.
void serialize(const shm_coll& s, int k, std::vector<int>& out) {
  const pe_node& n = s.tree[std::size_t(k)];
  out.push_back(int(n.world.size()));
  out.insert(out.end(), n.world.begin(), n.world.end());
  out.push_back(int(n.children.size()));
  const std::size_t pairs = out.size();
  out.resize(pairs + 2 * n.children.size());
  for (std::size_t j = 0; j < n.children.size(); ++j) {
    const std::size_t at = out.size();
    serialize(s, n.children[j], out);
    out[pairs + 2 * j] = int(out.size() - at);
    out[pairs + 2 * j + 1] = s.tree[std::size_t(n.children[j])].job_pe;
  }
}

// Every member but the caller, down the tree (each waits, or is about to:
// a PE runs the message only once its member suspended).
void wake_tree(const shm_coll& s, std::uint32_t gen) {
  send_wake(s.context, gen, s.tree[0].job_pe, s.wake_all.data(), s.wake_all.size());
}

void wake_one(const shm_coll& s, std::uint32_t gen, int world_rank) {
  const int subtree[3] = {1, world_rank, 0};
  send_wake(s.context, gen, rank_pe(world_rank), subtree, 3);
}

shm_coll* make_state(const comm_core& core) {
  auto s = std::make_unique<shm_coll>();
  s->context = core.context;
  const int n = int(core.members.size());
  s->index.assign(std::size_t(n), -1);
  s->world_of = core.members;
  s->slot_of.resize(std::size_t(n));
  const int here = weft::my_node();
  std::unordered_map<int, int> slot_by_process, count_by_process, node_by_pe;
  for (int r = 0; r < n; ++r) {
    const int w = core.members[std::size_t(r)];
    const int process = weft::node_of(rank_pe(w));
    auto [it, fresh] = slot_by_process.try_emplace(process, int(s->representatives.size()));
    if (fresh) s->representatives.push_back(r);
    s->slot_of[std::size_t(r)] = it->second;
    if (++count_by_process[process] >= 2) s->useful = true;
    if (process != here) continue;
    const int index = s->members++;
    s->index[std::size_t(r)] = index;
    auto [p, added] = node_by_pe.try_emplace(rank_pe(w), int(s->tree.size()));
    if (added) {
      pe_node node;
      node.job_pe = rank_pe(w);
      const int k = int(s->tree.size());
      if (k > 0) {
        node.parent = (k - 1) / fan_in;
        s->tree[std::size_t(node.parent)].children.push_back(k);
      }
      s->tree.push_back(std::move(node));
    }
    s->tree[std::size_t(p->second)].world.push_back(w);
    s->tree[std::size_t(p->second)].members.push_back(index);
    s->node_of.push_back(p->second);
  }
  s->spans = s->representatives.size() > 1;
  if (s->members > 0) serialize(*s, 0, s->wake_all);
  for (shm_round& round : s->rounds) {
    round.in.assign(std::size_t(s->members), nullptr);
    round.nodes = std::make_unique<node_round[]>(s->tree.size());
  }
  return s.release();
}

// The communicator's state in this process, made by the first member that
// needs it.
shm_coll& state_of(const comm_core& core) {
  shm_coll* s = core.shm.made.load(std::memory_order_acquire);
  if (s != nullptr) return *s;
  shm_coll* made = make_state(core);
  if (core.shm.made.compare_exchange_strong(s, made, std::memory_order_acq_rel)) return *made;
  delete made;
  return *s;
}

bool predefined(MPI_Datatype t) {
  return is_predefined(t);
}

// What a shared-memory collective found: its state, its slot, its number.
struct entry {
  shm_coll* s = nullptr;
  rank_state* me = nullptr;
  comm_view* view = nullptr;
};

entry enter(const ctx& c) {
  entry e;
  if (!c.blocking || c.map != nullptr) return e;
  e.me = &self(c.call);
  e.view = &view(c.call, *e.me, c.comm);
  shm_coll& s = state_of(*e.view->core);
  if (s.useful) e.s = &s;
  return e;
}

// The deadlock report names no peer for a wait here.
constexpr int no_peer = -3;

template <class Done>
void await(rank_state& me, const char* call, const shm_coll& s, std::uint32_t gen, Done done) {
  if (done()) return;
  me.shm_context = s.context;
  me.shm_gen = gen;
  wait_until(me, call, no_peer, 0, done);
  me.shm_context = -1;
}

// The representatives' algorithm's context: ranks are places in
// s.representatives, the root's process represented by the root itself.
struct across {
  ctx c;
  std::vector<int> map;
  across(const ctx& from, const shm_coll& s, int root) : c(from), map(s.representatives) {
    if (root >= 0) map[std::size_t(s.slot_of[std::size_t(root)])] = root;
    c.rank = s.slot_of[std::size_t(from.rank)];
    c.size = int(map.size());
    c.map = map.data();
    c.blocking = false;
  }
};

// How the members' data are combined (the file's comment): `none` for a
// barrier or a broadcast, `tree` up the tree of PEs, `ordered` in rank
// order by the one that completes the tree, `split` in parts by every
// member.
enum class combining { none, tree, ordered, split };

// A reduction's arguments.
struct reduction_args {
  const op_ref* op;
  int count;
  MPI_Datatype type;
  std::size_t size, bytes;
};

// acc = in[0] op (in[1] op (... op in[n-1])) for the elements [lo, hi) of
// `in`; `first`: acc holds nothing yet (else acc is the last operand).
void fold(char* acc, const void* const* in, int n, const reduction_args& r, std::size_t lo,
          std::size_t hi, bool first) {
  if (hi == lo || n == 0) return;
  acc += lo * r.size;
  int i = n - 1;
  if (first) {
    std::memcpy(acc, static_cast<const char*>(in[i]) + lo * r.size, (hi - lo) * r.size);
    --i;
  }
  for (; i >= 0; --i)
    apply(*r.op, static_cast<const char*>(in[i]) + lo * r.size, acc, int(hi - lo), r.type);
}

// The PE's members are in: node k arrives, and whoever completes a node
// combines (`tree`) its children's results into it and goes on to its
// parent. True: the caller completed the root.
bool climb(shm_coll& s, shm_round& round, int k, const reduction_args* r) {
  for (;;) {
    const pe_node& n = s.tree[std::size_t(k)];
    node_round& here = round.nodes[std::size_t(k)];
    const std::uint64_t arrived = here.arrived.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (arrived % (1 + n.children.size()) != 0) return false;
    if (r != nullptr)
      for (auto c = n.children.rbegin(); c != n.children.rend(); ++c) {
        const void* child = round.nodes[std::size_t(*c)].acc.get();
        fold(here.acc.get(), &child, 1, *r, 0, std::size_t(r->count), false);
      }
    if (n.parent < 0) return true;
    k = n.parent;
  }
}

// Steps 1-4 of the file's comment for the calling member: `in` its data,
// `go_across(round)` the representative's step 3 (only when the
// communicator spans processes). Returns the released slot: node 0's acc
// holds the result.
template <class Across>
shm_round& run(const ctx& c, const entry& e, const void* in, int root, combining how,
               const reduction_args* r, Across go_across) {
  shm_coll& s = *e.s;
  rank_state& me = *e.me;
  const std::uint32_t gen = ++e.view->shm_collectives;
  shm_round& round = s.rounds[gen & 1];
  const int index = s.index[std::size_t(c.rank)];
  round.in[std::size_t(index)] = in;
  const int representative =
      root >= 0 && s.slot_of[std::size_t(root)] == s.slot_of[std::size_t(c.rank)]
          ? root
          : s.representatives[std::size_t(s.slot_of[std::size_t(c.rank)])];
  // Step 2: on the PE, then up the tree.
  const int k = s.node_of[std::size_t(index)];
  const pe_node& node = s.tree[std::size_t(k)];
  node_round& on_pe = round.nodes[std::size_t(k)];
  bool top = false;
  if (++on_pe.here == int(node.members.size())) {
    on_pe.here = 0;
    if (how == combining::tree) {
      // The PE's members in their order (the ones of one PE are in rank
      // order among themselves).
      const void* ins[64];
      std::vector<const void*> many;
      const void** list = ins;
      if (node.members.size() > 64) {
        many.resize(node.members.size());
        list = many.data();
      }
      for (std::size_t j = 0; j < node.members.size(); ++j)
        list[j] = round.in[std::size_t(node.members[j])];
      fold(on_pe.reserve(r->bytes), list, int(node.members.size()), *r, 0, std::size_t(r->count),
           true);
    }
    top = climb(s, round, k, how == combining::tree ? r : nullptr);
  }
  bool finishes = top;
  if (how == combining::split) {
    if (top) {
      round.nodes[0].reserve(r->bytes);
      round.gathered.store(gen, std::memory_order_release);
      wake_tree(s, gen);
    } else {
      await(me, c.call, s, gen,
            [&] { return round.gathered.load(std::memory_order_acquire) == gen; });
    }
    const std::size_t lo = std::size_t(r->count) * std::size_t(index) / std::size_t(s.members);
    const std::size_t hi = std::size_t(r->count) * std::size_t(index + 1) / std::size_t(s.members);
    fold(round.nodes[0].acc.get(), round.in.data(), s.members, *r, lo, hi, true);
    const std::uint64_t done = round.parts_done.fetch_add(1, std::memory_order_acq_rel) + 1;
    finishes = done % std::uint64_t(s.members) == 0;
  } else if (top && how == combining::ordered) {
    fold(round.nodes[0].reserve(r->bytes), round.in.data(), s.members, *r, 0, std::size_t(r->count),
         true);
  }
  bool leads = false;
  if (finishes) {
    if (!s.spans || c.rank == representative) {
      leads = true;
    } else {
      round.combined.store(gen, std::memory_order_release);
      wake_one(s, gen, s.world_of[std::size_t(representative)]);
    }
  } else if (s.spans && c.rank == representative) {
    await(me, c.call, s, gen,
          [&] { return round.combined.load(std::memory_order_acquire) == gen; });
    leads = true;
  }
  if (leads) {
    if (s.spans) go_across(round);
    round.released.store(gen, std::memory_order_release);
    wake_tree(s, gen);
  } else {
    await(me, c.call, s, gen,
          [&] { return round.released.load(std::memory_order_acquire) == gen; });
  }
  return round;
}

// Reductions of at least this many bytes are combined in parts, one per
// member (run's `split`): below it a wake-up costs more than combining
// alone saves.
constexpr std::size_t split_bytes = std::size_t(16) << 10;

// A reduction's data as all members pass it (predefined type; an op
// whose order matters combines in rank order only within one process).
bool reducible(const entry& e, MPI_Datatype type, const op_ref& op) {
  return e.s != nullptr && predefined(type) && (op.commutative || !e.s->spans);
}

}  // namespace

bool shm_barrier(const ctx& c) {
  const entry e = enter(c);
  if (e.s == nullptr) return false;
  run(c, e, nullptr, -1, combining::none, nullptr,
      [&](shm_round&) { barrier(across(c, *e.s, -1).c); });
  return true;
}

bool shm_bcast(const ctx& c, void* buf, int count, MPI_Datatype type, int root) {
  const entry e = enter(c);
  if (e.s == nullptr) return false;
  // The members' types may differ (their signatures match): the data goes
  // through node 0's buffer packed, which the root fills before it arrives
  // (no member reads it before the release).
  const layout l = layout_of(c.call, type, count);
  node_round& result = e.s->rounds[(e.view->shm_collectives + 1) & 1].nodes[0];
  if (c.rank == root && l.bytes != 0) {
    char* to = result.reserve(l.bytes);
    if (l.map == nullptr)
      std::memcpy(to, buf, l.bytes);
    else
      pack_map(l.map, count, buf, reinterpret_cast<unsigned char*>(to));
  }
  run(c, e, buf, root, combining::none, nullptr, [&](shm_round& r) {
    char* data = r.nodes[0].reserve(l.bytes);
    const across a(c, *e.s, root);
    bcast(a.c, data, int(l.bytes), MPI_BYTE, e.s->slot_of[std::size_t(root)]);
  });
  if (c.rank != root && l.bytes != 0) {
    if (l.map == nullptr)
      std::memcpy(buf, result.acc.get(), l.bytes);
    else
      unpack_map(l.map, count, reinterpret_cast<const unsigned char*>(result.acc.get()), l.bytes,
                 buf);
  }
  return true;
}

namespace {

// How a reduction of `bytes` with `op` combines: a predefined op element
// by element, in parts from split_bytes; a user op gets the whole vector
// in one call (it may take its elements in groups: a matrix as 4
// MPI_UNSIGNED), as the tree over point-to-point gives it.
combining combining_of(const op_ref& op, std::size_t bytes) {
  if (!op.commutative) return combining::ordered;
  if (op.user == nullptr && bytes >= split_bytes) return combining::split;
  return combining::tree;
}

}  // namespace

bool shm_reduce(const ctx& c, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
                const op_ref& op, int root) {
  const entry e = enter(c);
  if (!reducible(e, type, op)) return false;
  const std::size_t size = type_bytes(c.call, type), bytes = std::size_t(count) * size;
  if (bytes == 0) return true;  // nothing to combine, nothing to wait for
  const reduction_args r{&op, count, type, size, bytes};
  shm_round& round = run(c, e, sendbuf, root, combining_of(op, bytes), &r, [&](shm_round& sr) {
    const across a(c, *e.s, root);
    char* acc = sr.nodes[0].acc.get();
    reduce(a.c, acc, acc, count, type, op, e.s->slot_of[std::size_t(root)]);
  });
  if (c.rank == root) std::memcpy(recvbuf, round.nodes[0].acc.get(), bytes);
  return true;
}

bool shm_allreduce(const ctx& c, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
                   const op_ref& op) {
  const entry e = enter(c);
  if (!reducible(e, type, op)) return false;
  const std::size_t size = type_bytes(c.call, type), bytes = std::size_t(count) * size;
  if (bytes == 0) return true;
  const reduction_args r{&op, count, type, size, bytes};
  shm_round& round = run(c, e, sendbuf, -1, combining_of(op, bytes), &r, [&](shm_round& sr) {
    const across a(c, *e.s, -1);
    char* acc = sr.nodes[0].acc.get();
    allreduce(a.c, acc, acc, count, type, op);
  });
  std::memcpy(recvbuf, round.nodes[0].acc.get(), bytes);
  return true;
}

}  // namespace coll
}  // namespace weft::mpi
