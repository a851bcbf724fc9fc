// Two-level collectives (docs/mpi.md "Collectives"): the members of a
// communicator that live in one process combine through memory, and one
// representative per process runs coll.cpp's algorithms across processes.
//
// One collective, at each member of a process:
//  1. it leaves the address of its data in the communicator's slot and
//     counts itself in (one atomic add);
//  2. the last to arrive combines every member's data in rank order into
//     the slot's scratch buffer (a reduction; a broadcast's root packed
//     its data there before arriving), while the others suspend -- their
//     PEs run other ranks and the runtime's messages meanwhile;
//  3. if the communicator spans processes, the process's representative
//     (its first member; the root, in the root's process) takes the
//     scratch buffer across processes with the tree algorithms over
//     point-to-point, among the representatives only;
//  4. it releases the slot: one wake-up message per PE that has waiting
//     members, naming them; each member copies the result from the
//     scratch buffer into its own.
// An 8-rank allreduce in one process is 8 atomic adds, one combining pass
// and two messages (one per PE), where the tree over point-to-point sent
// 14 and copied every block twice.
//
// Two slots, used in turn: a member enters collective n + 2 only after
// collective n + 1 released, which needs every member to have arrived at
// n + 1 and so to have finished copying out of n. Nothing is reset: the
// arrival count only grows, and the slot's last release names the
// collective it ended.
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

struct shm_round {
  std::atomic<std::uint64_t> arrived{0};
  // The number of the collective whose members all arrived (a split
  // combine starts), that combined (the representative waits for it) and
  // that released (everyone else waits for it).
  std::atomic<std::uint64_t> parts_done{0};
  std::atomic<std::uint32_t> gathered{0}, combined{0}, released{0};
  std::vector<const void*> in;  // by index among the process's members
  std::unique_ptr<char[]> scratch;
  std::size_t room = 0;

  char* reserve(std::size_t bytes) {
    if (bytes > room) {
      scratch.reset(new char[bytes]);
      room = bytes;
    }
    return scratch.get();
  }
};

// The members of one PE: what a wake-up names.
struct pe_members {
  int job_pe;
  std::vector<int> world;  // world ranks
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
  std::vector<int> representatives;  // each process's first member, in rank order
  std::vector<int> slot_of;          // by rank: its process's place in representatives
  std::vector<pe_members> pes;       // this process's members, by PE
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
  int count;  // world ranks follow
};

// Wakes the named ranks of this PE that still wait in collective `gen` of
// the communicator of `context` (one that already went on -- a spurious
// wake-up let it see the release -- waits in another, or in none).
void on_wake(message_ptr m) {
  wake_header h;
  std::memcpy(&h, m->data(), sizeof h);
  const unsigned char* at = reinterpret_cast<const unsigned char*>(m->data()) + sizeof h;
  for (int i = 0; i < h.count; ++i) {
    int w;
    std::memcpy(&w, at + std::size_t(i) * sizeof w, sizeof w);
    rank_state* r = world().ranks[std::size_t(w)].get();
    if (r != nullptr && r->shm_context == h.context && r->shm_gen == h.gen) wake(*r);
  }
}

const bool registered = [] {
  h_wake = register_handler("mpi.coll_wake", &on_wake);
  return true;
}();

void send_wake(const shm_coll& s, std::uint32_t gen, int job_pe, const int* world, int count) {
  message_ptr m = make_message(h_wake, sizeof(wake_header) + std::size_t(count) * sizeof(int));
  const wake_header h{s.context, gen, count};
  std::memcpy(m->data(), &h, sizeof h);
  std::memcpy(reinterpret_cast<unsigned char*>(m->data()) + sizeof h, world,
              std::size_t(count) * sizeof(int));
  weft::send(job_pe, std::move(m));
}

// One message per PE with members other than the caller (each waits, or
// is about to: a PE runs the message only once its member suspended).
void wake_members(const shm_coll& s, std::uint32_t gen, int me_world) {
  for (const pe_members& p : s.pes) {
    if (p.world.size() == 1 && p.world[0] == me_world) continue;
    send_wake(s, gen, p.job_pe, p.world.data(), int(p.world.size()));
  }
}

shm_coll* make_state(const comm_core& core) {
  auto s = std::make_unique<shm_coll>();
  s->context = core.context;
  const int n = int(core.members.size());
  s->index.assign(std::size_t(n), -1);
  s->world_of = core.members;
  s->slot_of.resize(std::size_t(n));
  const int here = weft::my_node();
  std::unordered_map<int, int> slot_by_process, count_by_process;
  std::unordered_map<int, std::size_t> pe_at;
  for (int r = 0; r < n; ++r) {
    const int w = core.members[std::size_t(r)];
    const int process = weft::node_of(rank_pe(w));
    auto [it, fresh] = slot_by_process.try_emplace(process, int(s->representatives.size()));
    if (fresh) s->representatives.push_back(r);
    s->slot_of[std::size_t(r)] = it->second;
    if (++count_by_process[process] >= 2) s->useful = true;
    if (process != here) continue;
    s->index[std::size_t(r)] = s->members++;
    auto [p, added] = pe_at.try_emplace(rank_pe(w), s->pes.size());
    if (added) s->pes.push_back(pe_members{rank_pe(w), {}});
    s->pes[p->second].world.push_back(w);
  }
  s->spans = s->representatives.size() > 1;
  for (shm_round& round : s->rounds) round.in.assign(std::size_t(s->members), nullptr);
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
  return t > 0 && t <= MPI_PACKED;
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

// Steps 1-4 of the file's comment for the calling member: `in` its data,
// `combine(round, part, parts)` step 2 for part `part` of `parts` of the
// data, into the slot's scratch (`bytes` long), `go_across(round)` the
// representative's step 3 (only when the communicator spans processes).
// With `split`, every member combines a part once all have arrived (a
// wake-up more, but the combining runs on every PE at once: at 16 ranks
// and 64 KiB one rank alone would read 1 MiB); else the last arriver
// combines alone. Returns the released slot, whose scratch holds the
// result.
template <class Combine, class Across>
shm_round& run(const ctx& c, const entry& e, const void* in, int root, std::size_t bytes,
               bool split, Combine combine, Across go_across) {
  shm_coll& s = *e.s;
  rank_state& me = *e.me;
  const std::uint32_t gen = ++e.view->shm_collectives;
  shm_round& round = s.rounds[gen & 1];
  const int index = s.index[std::size_t(c.rank)];
  const int me_world = s.world_of[std::size_t(c.rank)];
  round.in[std::size_t(index)] = in;
  const int representative =
      root >= 0 && s.slot_of[std::size_t(root)] == s.slot_of[std::size_t(c.rank)]
          ? root
          : s.representatives[std::size_t(s.slot_of[std::size_t(c.rank)])];
  const std::uint64_t arrived = round.arrived.fetch_add(1, std::memory_order_acq_rel) + 1;
  const bool last = arrived % std::uint64_t(s.members) == 0;
  if (last) round.reserve(bytes);
  bool finishes = last;
  if (split) {
    if (last) {
      round.gathered.store(gen, std::memory_order_release);
      wake_members(s, gen, me_world);
    } else {
      await(me, c.call, s, gen,
            [&] { return round.gathered.load(std::memory_order_acquire) == gen; });
    }
    combine(round, index, s.members);
    const std::uint64_t done = round.parts_done.fetch_add(1, std::memory_order_acq_rel) + 1;
    finishes = done % std::uint64_t(s.members) == 0;
  } else if (last) {
    combine(round, 0, 1);
  }
  bool leads = false;
  if (finishes) {
    if (!s.spans || c.rank == representative) {
      leads = true;
    } else {
      round.combined.store(gen, std::memory_order_release);
      const int w = s.world_of[std::size_t(representative)];
      send_wake(s, gen, rank_pe(w), &w, 1);
    }
  } else if (s.spans && c.rank == representative) {
    await(me, c.call, s, gen,
          [&] { return round.combined.load(std::memory_order_acquire) == gen; });
    leads = true;
  }
  if (leads) {
    if (s.spans) go_across(round);
    round.released.store(gen, std::memory_order_release);
    wake_members(s, gen, me_world);
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

// A predefined op combines element by element; a user op may take its
// elements in groups (a matrix as 4 MPI_UNSIGNED, say) and so gets the
// whole vector in one call, as the tree over point-to-point gives it.
bool split(const op_ref& op, std::size_t bytes) {
  return op.user == nullptr && bytes >= split_bytes;
}

// Part `part` of `parts` of the members' data combined in rank order into
// the slot's scratch: in[0] op (in[1] op (... op in[n-1])), as an
// associative op allows; a part is a run of whole elements.
void combine_part(shm_round& round, int members, int count, MPI_Datatype type, std::size_t size,
                  const op_ref& op, int part, int parts) {
  const std::size_t lo = std::size_t(count) * std::size_t(part) / std::size_t(parts);
  const std::size_t hi = std::size_t(count) * std::size_t(part + 1) / std::size_t(parts);
  if (hi == lo) return;
  char* acc = round.scratch.get() + lo * size;
  std::memcpy(acc, static_cast<const char*>(round.in[std::size_t(members - 1)]) + lo * size,
              (hi - lo) * size);
  for (int i = members - 2; i >= 0; --i)
    apply(op, static_cast<const char*>(round.in[std::size_t(i)]) + lo * size, acc, int(hi - lo),
          type);
}

// A reduction's data as all members pass it (predefined type; an op
// whose order matters combines in rank order only within one process).
bool reducible(const entry& e, MPI_Datatype type, const op_ref& op) {
  return e.s != nullptr && predefined(type) && (op.commutative || !e.s->spans);
}

}  // namespace

bool shm_barrier(const ctx& c) {
  const entry e = enter(c);
  if (e.s == nullptr) return false;
  run(
      c, e, nullptr, -1, 0, false, [](shm_round&, int, int) {},
      [&](shm_round&) { barrier(across(c, *e.s, -1).c); });
  return true;
}

bool shm_bcast(const ctx& c, void* buf, int count, MPI_Datatype type, int root) {
  const entry e = enter(c);
  if (e.s == nullptr) return false;
  // The members' types may differ (their signatures match): the data goes
  // through the scratch buffer packed, which the root fills before it
  // arrives (no member reads the slot's scratch before the release).
  const layout l = layout_of(c.call, type, count);
  shm_round& mine = e.s->rounds[(e.view->shm_collectives + 1) & 1];
  if (c.rank == root && l.bytes != 0) {
    char* to = mine.reserve(l.bytes);
    if (l.map == nullptr)
      std::memcpy(to, buf, l.bytes);
    else
      pack_map(l.map, count, buf, reinterpret_cast<unsigned char*>(to));
  }
  shm_round& round = run(
      c, e, buf, root, 0, false, [](shm_round&, int, int) {},
      [&](shm_round& r) {
        char* data = r.reserve(l.bytes);
        const across a(c, *e.s, root);
        bcast(a.c, data, int(l.bytes), MPI_BYTE, e.s->slot_of[std::size_t(root)]);
      });
  if (c.rank != root && l.bytes != 0) {
    if (l.map == nullptr)
      std::memcpy(buf, round.scratch.get(), l.bytes);
    else
      unpack_map(l.map, count, reinterpret_cast<const unsigned char*>(round.scratch.get()), l.bytes,
                 buf);
  }
  return true;
}

bool shm_reduce(const ctx& c, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
                const op_ref& op, int root) {
  const entry e = enter(c);
  if (!reducible(e, type, op)) return false;
  const std::size_t size = type_bytes(c.call, type), bytes = std::size_t(count) * size;
  if (bytes == 0) return true;  // nothing to combine, nothing to wait for
  shm_round& round = run(
      c, e, sendbuf, root, bytes, split(op, bytes),
      [&](shm_round& r, int part, int parts) {
        combine_part(r, e.s->members, count, type, size, op, part, parts);
      },
      [&](shm_round& r) {
        const across a(c, *e.s, root);
        reduce(a.c, r.scratch.get(), r.scratch.get(), count, type, op,
               e.s->slot_of[std::size_t(root)]);
      });
  if (c.rank == root) std::memcpy(recvbuf, round.scratch.get(), bytes);
  return true;
}

bool shm_allreduce(const ctx& c, const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
                   const op_ref& op) {
  const entry e = enter(c);
  if (!reducible(e, type, op)) return false;
  const std::size_t size = type_bytes(c.call, type), bytes = std::size_t(count) * size;
  if (bytes == 0) return true;  // nothing to combine, nothing to wait for
  shm_round& round = run(
      c, e, sendbuf, -1, bytes, split(op, bytes),
      [&](shm_round& r, int part, int parts) {
        combine_part(r, e.s->members, count, type, size, op, part, parts);
      },
      [&](shm_round& r) {
        const across a(c, *e.s, -1);
        allreduce(a.c, r.scratch.get(), r.scratch.get(), count, type, op);
      });
  std::memcpy(recvbuf, round.scratch.get(), bytes);
  return true;
}

}  // namespace coll
}  // namespace weft::mpi
