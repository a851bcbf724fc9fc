// Where a deferred task waits for a thread to run it: a work-stealing
// deque per member of the team, and a shared queue for the rest.
//
// Issue 25: with one team-wide queue under a mutex, every task's push, pop
// and wake-up serialised on lines that all P threads of the team write, and
// every idle thread's poll took the same mutex -- at 16 threads a task cost
// 1.8x (independent) to 4x (wavefront) libgomp's. Now:
//  - A member pushes the tasks it makes on its own Chase-Lev deque
//    (weft/base/chase_lev.hpp: no atomic read-modify-write for the owner
//    but on the last element) and pops them newest first: a task that
//    makes tasks runs them on warm caches. Successors a completion
//    releases go on the completing thread's deque, but for the last, which
//    that thread runs next (task.cpp, run_one_task): a chain needs no
//    queue at all.
//  - A thread with nothing of its own steals the oldest task of another
//    member: first the one it last took a task from (a single producer,
//    the common `single` + tasks pattern, is found again at once), then
//    members from a random one on, at most steal_probes(P) = O(log P) of
//    them per call. A thread that finds nothing returns to its wait, which
//    calls again: every deque is reached with probability 1, and no call
//    reads P lines. Rejected: a scan of all members per call (what made
//    the idle polls O(P) each), and a victim kept per thief until empty
//    (one slow producer would starve the rest).
//  - A task queued by a thread that owns none of the team's deques (a
//    successor released by omp_fulfill_event, which any thread may call)
//    goes on the shared queue, under the team's task_mutex; its length is
//    an atomic, so that polls of an empty shared queue take no lock.
//  - A fiber asleep at the barrier is woken only when one is asleep
//    (sleeper_list's count; the protocol is at wake_for_tasks).
// Tasks thus run in no fixed order: newest first on their creator, oldest
// first when stolen (OpenMP fixes none; priority stays a hint, ignored).
//
// Counts (weft/base/op_counts.hpp), as the tasks layer's stealing counts:
// each steal attempt is a wait round, each deque probed a poll (a CAS lost
// to another thief retries the same probe), each task taken by a thief's
// compare-and-swap a shared read-modify-write. The shared queue's lock is a
// shared read-modify-write.
#include <algorithm>
#include <bit>
#include <mutex>
#include <optional>
#include "base/op_count.hpp"
#include "omp/omp_internal.hpp"

namespace weft::omp {

namespace {

using base::count;
using base::op;

// The member whose deque `me` owns in team `t`, or null: `me` is member
// me.id's own OpenMP thread (the only thread_state that runs as it).
member* own_member(thread_state* me, team& t) {
  if (me == nullptr || me->t != &t) return nullptr;
  member& m = t.members[std::size_t(me->id)];
  return &m.thr == me ? &m : nullptr;
}

// Deques one steal attempt may probe in a team of `n`: 1 + log2(n), at
// most the other members.
int steal_probes(int n) {
  return std::min(n - 1, int(std::bit_width(unsigned(n))));
}

// A random member index in [0, n) from me's own xorshift state.
int random_member(thread_state& me, int n) {
  unsigned x = me.steal_seed != 0 ? me.steal_seed : (0x9e3779b9u * unsigned(me.id + 1)) | 1u;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  me.steal_seed = x;
  return int(x % unsigned(n));
}

// Takes the oldest task of member v's deque, or null. A CAS lost to
// another thief is retried once: the deque may still hold work.
task_node* steal_from(team& t, int v) {
  count(op::poll);
  base::chase_lev<task_node*>& d = t.members[std::size_t(v)].tasks;
  task_node* node = nullptr;
  for (int tries = 0; tries < 2; ++tries) {
    switch (d.steal(node)) {
      case base::steal_status::success:
        count(op::shared_rmw);
        return node;
      case base::steal_status::empty:
        return nullptr;
      case base::steal_status::abort:
        break;
    }
  }
  return nullptr;
}

task_node* steal_task(thread_state& me, team& t, int self) {
  const int n = t.size;
  if (n < 2) return nullptr;
  count(op::wait_round);
  int probes = steal_probes(n);
  // The last victim first: the producer of a stream of tasks.
  const int last = me.steal_from;
  if (last >= 0 && last < n && last != self) {
    if (task_node* node = steal_from(t, last)) return node;
    --probes;
  }
  int v = random_member(me, n);
  for (int seen = 0; seen < n && probes > 0; ++seen, v = v + 1 == n ? 0 : v + 1) {
    if (v == self || v == last) continue;
    --probes;
    if (task_node* node = steal_from(t, v)) {
      me.steal_from = v;
      return node;
    }
  }
  return nullptr;
}

task_node* take_shared(team& t) {
  if (t.tasks_shared.load(std::memory_order_acquire) == 0) return nullptr;
  count(op::shared_rmw);
  std::lock_guard<short_lock> lock(t.task_mutex);
  if (t.tasks.empty()) return nullptr;
  task_node* node = t.tasks.front();
  t.tasks.pop_front();
  t.tasks_shared.store(long(t.tasks.size()), std::memory_order_release);
  return node;
}

}  // namespace

void enqueue_task(thread_state* me, team& t, task_node* node) {
  if (member* m = own_member(me, t)) {
    m->tasks.push(node);
    return;
  }
  count(op::shared_rmw);
  std::lock_guard<short_lock> lock(t.task_mutex);
  t.tasks.push_back(node);
  t.tasks_shared.store(long(t.tasks.size()), std::memory_order_release);
}

task_node* take_task(thread_state& me) {
  team& t = *me.t;
  member* m = own_member(&me, t);
  if (m != nullptr)
    if (std::optional<task_node*> node = m->tasks.pop()) return *node;
  if (task_node* node = steal_task(me, t, m != nullptr ? me.id : -1)) return node;
  return take_shared(t);
}

// The protocol with a fiber going to sleep at the barrier (wait_step): it
// registers on the list (a seq_cst store of the list's length) and then
// reads tasks_pending (seq_cst), sleeping only if that is 0; a producer
// raises tasks_pending (seq_cst read-modify-write) before it calls this,
// which reads the length (seq_cst). In the single total order of these
// four accesses one of the two reads comes after the other's write: the
// sleeper sees the task and stays awake, or the producer sees the sleeper
// and wakes it. So no fiber sleeps while a task it could help with is
// pending, and the task path takes no lock when nobody sleeps.
void wake_for_tasks(team& t) {
  if (!t.sleepers.any()) return;
  count(op::shared_rmw);
  wake_all(t.sleep_mutex, t.sleepers);
}

}  // namespace weft::omp
