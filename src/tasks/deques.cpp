// Tasks on the deques: how a loop's work is exposed as tasks that idle PEs
// of the node steal, and the three schemes that work so (split,
// adaptive_idle, adaptive_history). The loop's descriptor and the running
// of a piece are loop.hpp's; the schemes by message are messages.cpp's.
//
// A `task` names a sub-range of a loop and sits on a PE's Chase-Lev deque
// (base/chase_lev.hpp). The owner pushes and pops at the bottom; idle PEs of
// the node steal the oldest at the top (the scheduler_hooks of core call
// run_tasks each turn, and tasks_visible while backing off).
//
// The adaptive schemes follow the seeds' "create tasks only when someone is
// idle to take them": adaptive_idle reads core's node-wide idle-PE count
// (detail::idle_pes, a line written whenever a PE enters or leaves an idle
// period) at the first chunk of a loop and then at most once per
// idle_look_ns, and exposes as many tasks as there are idle PEs beyond the
// tasks still on its own deque; with nobody idle, the loop costs a clock
// read per chunk. adaptive_history exposes, of the tasks split would create
// for the other PEs, the fraction it saw stolen lately.
//
// What grows with P (DESIGN.md, lesson 13; tests/tasks/test_op_growth.cpp
// counts it): a steal attempt probes 2 + log2(P) victims, not all of them,
// the last one it stole from first; exposing k tasks touches no line
// another PE writes (the owner's deque aside). The idle count is one line
// that every PE writes once per idle period: read per chunk, a loop of
// 8 P chunks at 16 PEs met it modified tens of times; read once a
// microsecond, a handful.
//
// The schemes, the exposing and the taking stay in one file: a scheme
// exposes and pops back a task per split, and these calls inline into it.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <optional>
#include "base/op_count.hpp"
#include "loop.hpp"
#include "weft/base/error.hpp"
#include "weft/base/fence.hpp"
#include "weft/base/timer.hpp"
#include "weft/trace/hooks.hpp"

namespace weft::tasks::internal {

void expose(loop& l, std::uint64_t lo, std::uint64_t hi) {
  task* t = take(t_me->free_tasks, g_node->tasks);
  t->l = &l;
  t->lo = lo;
  t->hi = hi;
  t_me->deque.push(t);
}

namespace {

std::atomic<std::uint64_t>& visible_word_of(int rank) {
  return g_node->visible[std::size_t(rank / 64)].bits;
}
std::uint64_t visible_bit_of(int rank) {
  return std::uint64_t(1) << (rank % 64);
}

// This PE's deque holds a task: its bit must be set. The fence orders the
// push before the read of the bit; a PE that clears the bit looks at the
// deque after clearing it (deque_seen_empty), so either it sees the task
// or this read sees the bit cleared and sets it again.
void mark_visible() {
  base::full_fence();
  auto& word = visible_word_of(t_me->rank);
  const std::uint64_t bit = visible_bit_of(t_me->rank);
  if ((word.load(std::memory_order_seq_cst) & bit) == 0) {
    base::count(base::op::shared_rmw);
    word.fetch_or(bit, std::memory_order_seq_cst);
  }
}

// PE r's deque looked empty while its bit was set: clears the bit, then
// looks again (see mark_visible). Returns whether the deque holds a task
// after all (its bit then set again).
bool deque_seen_empty(int r) {
  auto& word = visible_word_of(r);
  const std::uint64_t bit = visible_bit_of(r);
  word.fetch_and(~bit, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (g_node->pe[std::size_t(r)]->deque.empty()) return false;
  word.fetch_or(bit, std::memory_order_seq_cst);
  return true;
}

// The newest task of this PE's deque if it belongs to `l` (the owner's pop
// back of what was not stolen); a task of another loop goes back.
task* pop_own_of(const loop& l) {
  std::optional<task*> t = t_me->deque.pop();
  if (!t) return nullptr;
  if ((*t)->l != &l) {
    t_me->deque.push(*t);
    // An idle PE may have found the deque empty meanwhile and cleared the
    // bit.
    mark_visible();
    return nullptr;
  }
  return *t;
}

std::uint64_t next_random(pe_tasks& me) {
  // xorshift64*: victims need to be spread, not unpredictable.
  me.rng ^= me.rng >> 12;
  me.rng ^= me.rng << 25;
  me.rng ^= me.rng >> 27;
  return me.rng * 0x2545F4914F6CDD1Dull;
}

}  // namespace

void publish(int wake) {
  // mark_visible's fence (or its read-modify-write of the mark) orders the
  // push before the sleep words too: one fence per publication.
  mark_visible();
  weft::detail::wake_idle_pes_fenced(wake);
}

// One task stolen from another PE of the node, or null: the victim this PE
// last stole from, then victims drawn among the PEs whose deques are marked
// visible, steal_probes in all (2 + log2(PEs)), each retried a few times on
// a lost race. Not every victim: an attempt would cost O(P), and every idle
// PE makes one each turn. A thief that finds nothing tries again at its
// next turn (the scheduler's back-off polls tasks_visible, which sees any
// deque marked visible).
task* steal_one(pe_tasks& me) {
  const int pes = g_node->pes;
  if (pes < 2) return nullptr;
  base::count(base::op::wait_round);
  for (int k = 0; k < g_node->steal_probes; ++k) {
    int v = k == 0 ? me.last_victim : -1;
    if (v < 0) {
      // A random marked PE: a random word (one up to 64 PEs), then a
      // random set bit of it other than this PE's.
      const std::uint64_t r = next_random(me);
      const int w = int(r % std::uint64_t(g_node->visible_words));
      std::uint64_t bits = g_node->visible[std::size_t(w)].bits.load(std::memory_order_relaxed);
      if (w == me.rank / 64) bits &= ~visible_bit_of(me.rank);
      base::count(base::op::poll);
      if (bits == 0) continue;
      int skip = int((r >> 32) % std::uint64_t(std::popcount(bits)));
      while (skip-- > 0) bits &= bits - 1;
      v = w * 64 + std::countr_zero(bits);
    }
    pe_tasks& victim = *g_node->pe[std::size_t(v)];
    base::count(base::op::poll);
    if (victim.deque.empty()) continue;
    for (int attempt = 0; attempt < 4; ++attempt) {
      task* t = nullptr;
      const base::steal_status s = victim.deque.steal(t);
      if (s == base::steal_status::success) {
        // The CAS on the victim's top that took the task: part of the
        // task's cost (a lost race or an empty deque is the wait's).
        base::count(base::op::shared_rmw);
        me.last_victim = v;
        if (trace::on()) [[unlikely]]
          trace::detail::emit(trace::kind::steal, std::uint32_t(my_pe() - my_rank() + v), 1, 0, 0);
        return t;
      }
      if (s == base::steal_status::empty) break;
    }
  }
  me.last_victim = -1;
  return nullptr;
}

namespace {

// split: push the upper half, go on with the lower, down to one chunk; run
// it; pop back the upper halves nobody stole and split them in turn.
std::uint64_t run_split(loop& l, std::uint64_t lo, std::uint64_t hi) {
  std::uint64_t done = 0;
  for (;;) {
    if (l.failed.load(std::memory_order_relaxed)) {
      done += hi - lo;
    } else {
      while (hi - lo > l.grain) {
        // Halves of whole chunks, so leaves stay grain-aligned.
        const std::uint64_t chunks = (hi - lo + l.grain - 1) / l.grain;
        const std::uint64_t mid = lo + (chunks / 2) * l.grain;
        expose(l, mid, hi);
        publish(1);
        hi = mid;
      }
      done += run_chunks(l, lo, hi);
    }
    task* t = pop_own_of(l);
    if (t == nullptr) return done;
    lo = t->lo;
    hi = t->hi;
    give(t_me->free_tasks, g_node->tasks, t);
  }
}

// Splits [lo, hi) into k + 1 parts of whole chunks, exposes the upper ones
// (the farthest first, so thieves take far and the owner pops back near)
// and returns the end of the part kept; `exposed` tells how many went out
// (fewer than k when rounding to chunks leaves trailing parts empty).
std::uint64_t expose_parts(loop& l, std::uint64_t lo, std::uint64_t hi, std::uint64_t k,
                           std::uint64_t& exposed) {
  const std::uint64_t chunks = (hi - lo + l.grain - 1) / l.grain;
  const std::uint64_t part = ((chunks + k) / (k + 1)) * l.grain;
  exposed = 0;
  for (std::uint64_t j = k; j >= 1; --j) {
    const std::uint64_t a = lo + j * part;
    if (a >= hi) continue;
    expose(l, a, std::min(hi, a + part));
    ++exposed;
  }
  if (exposed > 0) publish(int(exposed));
  return std::min(hi, lo + part);
}

// Whether this PE may look at the node's idle count now (at most once per
// idle_look_cycles; see the top of this file). next_idle_look 0: look now
// (a loop's first chunk) without reading the clock -- an empty loop's
// chunk costs less than a clock read --, 1: the clock starts at this
// check, which does not look.
inline bool idle_look_due(pe_tasks& me) {
  if (me.next_idle_look == 0) {
    me.next_idle_look = 1;
    return true;
  }
  const std::uint64_t now = base::cycles();
  const bool due = me.next_idle_look != 1 && now >= me.next_idle_look;
  if (due || me.next_idle_look == 1) me.next_idle_look = now + g_node->idle_look_cycles;
  return due;
}

// adaptive_idle: before a chunk, when a look is due, offer a task to each
// idle PE beyond the tasks this PE's deque still holds; nothing is created
// while no PE is idle.
std::uint64_t run_adaptive_idle(loop& l, std::uint64_t lo, std::uint64_t hi) {
  pe_tasks& me = *t_me;
  std::uint64_t done = 0;
  for (;;) {
    while (lo < hi) {
      if (l.failed.load(std::memory_order_relaxed)) {
        done += hi - lo;
        break;
      }
      if (hi - lo > l.grain && idle_look_due(me)) {
        base::count(base::op::peer_visit);
        const int idle = weft::detail::idle_pes();
        if (idle > 0) {
          // Tasks still on this PE's deque were offered to idle PEs that
          // have not taken them yet. (Other PEs' offers are not counted:
          // a task too many is popped back by its owner at no shared cost;
          // a node-wide count of them cost two read-modify-writes per task
          // on one line.)
          const int want = idle - int(me.deque.size_approx());
          const std::uint64_t chunks = (hi - lo + l.grain - 1) / l.grain;
          std::uint64_t exposed = 0;
          if (want > 0)
            hi = expose_parts(l, lo, hi, std::min<std::uint64_t>(std::uint64_t(want), chunks - 1),
                              exposed);
        }
      }
      const std::uint64_t e = std::min(hi, lo + l.grain);
      run_body(l, lo, e);
      done += e - lo;
      lo = e;
    }
    task* t = pop_own_of(l);
    if (t == nullptr) return done;
    lo = t->lo;
    hi = t->hi;
    give(t_me->free_tasks, g_node->tasks, t);
  }
}

// adaptive_history: of the tasks split would offer the other PEs (one each),
// expose the fraction this PE saw stolen lately (at least one, so the
// estimate can rise again); run the rest locally; learn from what came back.
std::uint64_t run_adaptive_history(loop& l, std::uint64_t lo, std::uint64_t hi) {
  pe_tasks& me = *t_me;
  std::uint64_t done = 0;
  const std::uint64_t chunks = (hi - lo + l.grain - 1) / l.grain;
  const std::uint64_t potential = std::min<std::uint64_t>(chunks - 1, std::uint64_t(l.pes - 1));
  std::uint64_t exposed = 0;
  if (potential > 0 && !l.failed.load(std::memory_order_relaxed)) {
    std::uint64_t k = std::uint64_t(me.stolen_avg * double(potential) + 0.5);
    k = std::clamp<std::uint64_t>(k, 1, potential);
    hi = expose_parts(l, lo, hi, k, exposed);
  }
  done += run_chunks(l, lo, hi);
  std::uint64_t back = 0;
  while (task* t = pop_own_of(l)) {
    ++back;
    done += run_chunks(l, t->lo, t->hi);
    give(me.free_tasks, g_node->tasks, t);
  }
  if (exposed > 0) {
    const double stolen = double(exposed - std::min(back, exposed)) / double(exposed);
    me.stolen_avg = 0.75 * me.stolen_avg + 0.25 * stolen;
  }
  return done;
}
}  // namespace

std::uint64_t run_range(loop& l, std::uint64_t lo, std::uint64_t hi) {
  switch (l.scheme) {
    case tasks_scheme::split:
      return run_split(l, lo, hi);
    case tasks_scheme::adaptive_idle:
      return run_adaptive_idle(l, lo, hi);
    case tasks_scheme::adaptive_history:
      return run_adaptive_history(l, lo, hi);
    default:
      break;
  }
  base::fatal("tasks: a task of a %s loop on a deque", to_string(l.scheme));
}

// Runs a task this PE took (popped or stolen), then accounts for it.
void run_task(task* t) {
  loop& l = *t->l;
  const std::uint64_t lo = t->lo, hi = t->hi;
  give(t_me->free_tasks, g_node->tasks, t);
  const bool traced = trace::on();
  if (traced) [[unlikely]]
    trace::detail::emit(trace::kind::task_begin, std::uint32_t(l.caller_pe), std::uint32_t(lo),
                        std::uint32_t(hi - lo), l.caller_pe != my_pe());
  // `l` may be gone once accounted (the caller returns).
  account(l, run_range(l, lo, hi));
  if (traced) [[unlikely]]
    trace::detail::emit(trace::kind::task_end, 0, 0, 0, 0);
}

// ---- scheduler hooks -------------------------------------------------------------------

int hook_run_tasks(bool idle) {
  pe_tasks* me = t_me;
  if (me == nullptr) return 0;
  if (std::optional<task*> t = me->deque.pop()) {
    run_task(*t);
    return 1;
  }
  if (!idle) return 0;
  if (task* t = steal_one(*me)) {
    weft::detail::end_idle_period();
    // The task was offered knowing the idle count of its time (one task per
    // idle PE): its first chunks need not look again (1: the clock starts
    // at the next check, see idle_look_due).
    me->next_idle_look = 1;
    run_task(t);
    return 1;
  }
  return 0;
}

// Any deque marked visible that holds a task: the marked words and the
// deques they name, not every deque of the node (idle PEs poll this each
// round of their back-off). A mark found stale is cleared.
bool hook_tasks_visible() {
  node_tasks* node = g_node;
  if (node == nullptr) return false;
  for (int w = 0; w < node->visible_words; ++w) {
    base::count(base::op::poll);
    std::uint64_t bits = node->visible[std::size_t(w)].bits.load(std::memory_order_seq_cst);
    while (bits != 0) {
      const int r = w * 64 + std::countr_zero(bits);
      bits &= bits - 1;
      base::count(base::op::poll);
      if (!node->pe[std::size_t(r)]->deque.empty() || deque_seen_empty(r)) return true;
    }
  }
  return false;
}

}  // namespace weft::tasks::internal
