// Barriers of a team, and the combining tree that both a barrier and a
// region's end count arrivals on (omp_internal.hpp, arrival_tree).
//
// A barrier's critical path, from the last thread's arrival to the last
// waiter's departure, is O(log P) in lines that change hands
// (issue 25): the last arriver climbs log_4(P) counters, each written by at
// most 4 threads, flips the round number that every waiter reads (one
// line, read by all: a store that invalidates P copies, which the waiters
// fetch in parallel), and wakes at most four of the fibers that fell
// asleep waiting; each woken one wakes four more (a 4-ary tree over the
// list of sleepers), so no thread sends P resume messages. libgomp's barrier is
// one counter for the team (a line that P cores write in turn) and a futex
// wake of every sleeper by the last one.
//
// Rejected: a dissemination or tournament barrier (every thread waits on a
// flag of its own, log P rounds): a waiter that gives its PE back must be
// found and resumed by whoever completes its round, at every round, where
// here only the last arriver's release wakes anybody; and the last arriver
// must run the team's tasks before anyone passes, which a tree with one
// root gives.
#include <sched.h>
#include <atomic>
#include "base/op_count.hpp"
#include "omp/omp_internal.hpp"

namespace weft::omp {

namespace {

// The nodes of a tree for `n` participants: ceil(n / 4) leaves, and so on
// up to one root.
std::size_t tree_nodes(int n) {
  std::size_t total = 0;
  for (int level = n; level > 1;) {
    level = (level + arrival_tree::fan_in - 1) / arrival_tree::fan_in;
    total += std::size_t(level);
    if (level == 1) return total;
  }
  return n == 1 ? 1 : total;
}

constexpr int wait_spins = 64;

}  // namespace

arrival_tree::arrival_tree(int participants) : nodes(tree_nodes(participants)) {
  // Level by level: `count` nodes from `first`, over `below` arrivals.
  std::size_t first = 0;
  int below = participants;
  while (first < nodes.size()) {
    const int count = (below + fan_in - 1) / fan_in;
    const std::size_t next = first + std::size_t(count);
    for (int k = 0; k < count; ++k) {
      node& x = nodes[first + std::size_t(k)];
      x.expected = std::min(fan_in, below - k * fan_in);
      x.parent = next < nodes.size() ? int(next) + k / fan_in : -1;
    }
    first = next;
    below = count;
  }
}

bool arrival_tree::arrive(int who) noexcept {
  int at = who / fan_in;
  for (;;) {
    node& x = nodes[std::size_t(at)];
    // Read before arriving: once the others are on, the tree may be gone
    // (the region's end: the master frees the team after the last one).
    const int expected = x.expected, parent = x.parent;
    if (expected > 1) {
      // acq_rel: what every earlier arriver did before arriving is seen by
      // whoever goes on, up to the root's last.
      base::count(base::op::shared_rmw);
      if (x.arrived.fetch_add(1, std::memory_order_acq_rel) + 1 != expected) return false;
      // Nobody else arrives here this round; the next round's arrivals
      // come after the release, which this store precedes.
      x.arrived.store(0, std::memory_order_relaxed);
    }
    if (parent < 0) return true;
    at = parent;
  }
}

void arrival_tree::reset() noexcept {
  for (node& x : nodes) x.arrived.store(0, std::memory_order_relaxed);
}

namespace {

struct barrier_ctx {
  team* t;
  unsigned round;
  bool cancellable;
};
// The round is over (every thread arrived), or -- a cancellable barrier --
// the region was cancelled.
bool barrier_released(void* p) {
  auto* c = static_cast<barrier_ctx*>(p);
  return c->t->round.load(std::memory_order_acquire) != c->round ||
         (c->cancellable && c->t->cancelled.load(std::memory_order_acquire));
}

// The barrier opens: a `cancel for` of a construct without a slot (see
// team::ws_cancelled) ends with it.
void clear_ws_cancelled(team* t) {
  if (t->ws_cancelled.load(std::memory_order_relaxed))
    t->ws_cancelled.store(false, std::memory_order_relaxed);
}

// Wakes the sleepers that `list`'s entry `pos` passes the wake-up on to
// (pos -1: the releaser, who starts it): entries 4 pos + 4 .. 4 pos + 7.
// Each learns its place before its resume, and passes it on once awake.
// Fan-out 4, as the fork's (team.cpp): a hop costs more than a few sends.
constexpr int wake_fan_out = 4;
void wake_children(std::vector<thread_state*>& list, int pos) {
  const int first = wake_fan_out * (pos + 1);
  const int end = std::min(first + wake_fan_out, int(list.size()));
  for (int c = first; c < end; ++c) {
    thread_state* thr = list[std::size_t(c)];
    thr->wake_list = &list;
    thr->wake_pos = c;
    base::count(base::op::peer_visit);
    threads::resume(thr->ult);
  }
}

// A team of up to fan_in threads arrives on one counter, on the line of
// the round it then flips (team::small_arrived): true for the last.
bool arrive_small(team* t) {
  base::count(base::op::shared_rmw);
  if (t->small_arrived.fetch_add(1, std::memory_order_acq_rel) + 1 != t->size) return false;
  t->small_arrived.store(0, std::memory_order_relaxed);
  return true;
}

// The last arriver opens the barrier: flips the round, and the fibers
// asleep at it wake. The list they were on becomes `waking` in the same
// hold of the mutex as the flip, so that it holds this round's sleepers
// only (a thread past the flip that falls asleep at the next barrier is
// on the next list: woken now, it would pass its wake-up on from a list
// that is not its own). `waking` lives until the next round opens, which
// needs every one of them to have arrived again, after passing its
// wake-up on.
void open_barrier(team* t, unsigned round) {
  {
    base::count(base::op::shared_rmw);
    std::lock_guard<std::mutex> lock(t->sleep_mutex);
    t->round.store(round + 1, std::memory_order_release);
    if (t->sleepers.empty()) return;
    t->waking.clear();
    t->sleepers.swap(t->waking);
  }
  wake_children(t->waking, -1);
}

// Both barriers. A cancellable one (only with OMP_CANCELLATION) is left at
// once, or as soon as it is seen, when the region is cancelled: true. A
// thread that left it so stays counted in `arrivals`, which nobody resets:
// after the cancel, a conforming program's threads meet only cancellable
// barriers (GCC makes every barrier of a region that may be cancelled one)
// and go to the region's end, which counts members, not arrivals; new_team
// resets it for the next region. (A plain barrier met after the cancel --
// an orphaned construct's -- waits for the thread that cancelled, forever,
// as in libgomp.)
bool barrier_wait(thread_state& me, bool cancellable) {
  team* t = me.t;
  if (t == nullptr) return false;
  if (cancellable && t->cancelled.load(std::memory_order_acquire)) return true;
  if (t->size == 1) {
    // Still a task scheduling point: the team's tasks finish here.
    while (t->tasks_pending.load(std::memory_order_acquire) != 0)
      if (!run_one_task(me)) sched_yield();
    clear_ws_cancelled(t);
    return false;
  }
  barrier_ctx c{t, t->round.load(std::memory_order_acquire), cancellable};
  if (t->size <= arrival_tree::fan_in ? arrive_small(t) : t->arrivals.arrive(me.id)) {
    // Last to arrive: the team's tasks end before anyone passes. (Every
    // thread arrived, so none cancelled the region: a cancelling thread goes
    // to the region's end.)
    int spins = 0;
    while (t->tasks_pending.load(std::memory_order_acquire) != 0)
      if (!run_one_task(me) && ++spins > wait_spins)
        wait_step(me, false, nullptr, nullptr, nullptr, nullptr);
    clear_ws_cancelled(t);
    open_barrier(t, c.round);
    return false;
  }
  int spins = 0;
  while (!barrier_released(&c)) {
    if (++spins < wait_spins) {
      base::cpu_relax();
      continue;
    }
    // Sleep only while no task is pending: a waiter helps with the tasks.
    // (cancel_region wakes the sleepers after setting the flag, which the
    // recheck reads under the same mutex: no wake-up is lost.)
    const bool may_sleep = t->tasks_pending.load(std::memory_order_acquire) == 0;
    wait_step(me, may_sleep, &t->sleep_mutex, &t->sleepers, &barrier_released, &c);
  }
  if (me.wake_list != nullptr) {
    std::vector<thread_state*>* list = me.wake_list;
    me.wake_list = nullptr;
    wake_children(*list, me.wake_pos);
  }
  return t->round.load(std::memory_order_acquire) == c.round;
}

}  // namespace

void wake_all(std::mutex& m, sleeper_list& sleepers) {
  std::vector<thread_state*> woken;
  {
    std::lock_guard<std::mutex> lock(m);
    sleepers.swap(woken);
  }
  for (thread_state* thr : woken) threads::resume(thr->ult);
}

void barrier(thread_state& me) {
  barrier_wait(me, false);
}

bool barrier_cancel(thread_state& me) {
  return barrier_wait(me, globals().cancellation);
}

void cancel_region(team& t) {
  t.cancelled.store(true, std::memory_order_release);
  // Fibers asleep at a cancellable barrier see the flag when they wake
  // (those at a plain barrier go back to sleep).
  wake_all(t.sleep_mutex, t.sleepers);
}

}  // namespace weft::omp
