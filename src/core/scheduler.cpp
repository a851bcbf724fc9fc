// The PE scheduler loop (DESIGN.md, "The PE scheduler loop").
//
// Each turn: a bounded batch from the PE's own queue, then one message from
// the node queue, then due timers and the conditions; if nothing was found,
// the idle back-off: spin (a message arriving now costs one cache-line
// transfer), then sched_yield (let other runnable threads of an
// oversubscribed node have the core), then sleep on a futex until a producer
// wakes the PE. Spin and yield budgets come from --weft:idle-spin-us and
// --weft:idle-yield-us; their defaults were chosen from bench/micro/wakeup
// (see config.cpp and docs/benchmarks.md).
//
// Wake-up protocol (Dekker-style; every access below is seq_cst):
//   consumer: sleepers++; sleeping = 1; [fence]; if any queue has work or
//             stop is set: sleeping = 0, go on; else futex_wait(sleeping, 1)
//   producer: push message (seq_cst exchange, or ring store + fence);
//             if sleeping == 1 and exchange(sleeping, 0) == 1: futex_wake
// Either the producer sees sleeping == 1 and wakes the consumer, or the
// consumer's check after setting it sees the message; a wake-up is never lost
// and a producer makes the system call only when the consumer really sleeps.
// Tasks exposed by the tasks layer follow the same protocol: the "queue" is
// scheduler_hooks::tasks_visible, the producer's publication is its deque
// push followed by detail::wake_idle_pes (fence, then the sleep words).
#include <sched.h>
#include <algorithm>
#include <bit>
#include <exception>
#include "base/op_count.hpp"
#include "core/handler_table.hpp"
#include "core/node.hpp"
#include "core/node_ref.hpp"
#include "weft/base/error.hpp"
#include "weft/base/fence.hpp"
#include "weft/base/timer.hpp"
#include "weft/trace/hooks.hpp"

namespace weft::core {

// Wakes up to n sleeping PEs other than `self` (null: any); returns how
// many it woke. Reads the sleeper mask, a word per 64 PEs, and the sleep
// words of the PEs it marks only.
int wake_sleepers(node_state& node, const pe_state* self, int n) {
  int woken = 0;
  for (int w = 0; w < node.sleeper_words && woken < n; ++w) {
    base::count(base::op::wake_probe);
    std::uint64_t bits = node.sleeper_mask[std::size_t(w)].bits.load(std::memory_order_seq_cst);
    while (bits != 0 && woken < n) {
      const int r = w * 64 + std::countr_zero(bits);
      bits &= bits - 1;
      pe_state& pe = *node.pes[std::size_t(r)];
      base::count(base::op::wake_probe);
      // A PE between waking and clearing its bit, or woken by another
      // producer meanwhile, has sleep word 0: not counted.
      if (&pe == self || pe.sleeping.load(std::memory_order_seq_cst) == 0) continue;
      wake_pe(node, pe);
      ++woken;
    }
  }
  return woken;
}

void wake_one_sleeper(node_state& node) {
  wake_sleepers(node, nullptr, 1);
}

void wake_all(node_state& node) {
  for (auto& pe : node.pes) wake_pe(node, *pe);
}

void release_message(message* m) {
  message_deleter{}(m);
}

namespace {

constexpr int batch = 64;  // messages from the own queue per turn
// comm=workers: how long a sleeping node goes without polling the network.
constexpr std::uint64_t workers_poll_ns = 200'000;

// Runs a callback of the program (timer, condition, quiescence callback):
// an exception escaping it is a fatal error naming where it came from, as
// for handlers, never std::terminate.
template <class F>
decltype(auto) guarded(const char* what, int pe, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    base::fatal("%s on PE %d threw %s", what, pe, e.what());
  } catch (...) {
    base::fatal("%s on PE %d threw an exception not derived from std::exception", what, pe);
  }
}

inline void count_one(std::atomic<std::uint64_t>& c) {
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

// With spsc-pairs, the MPSC queue carries only what threads that are not PEs
// send; it gets the first pop of every turn, so steady PE-to-PE traffic in
// the rings cannot starve it.
inline message* pop_shared(pe_state& pe, bool first_of_turn) {
  if (pe.pairs) {
    message* m = nullptr;
    if (first_of_turn) {
      if (base::queue_link* l = pe.queue.pop()) return reinterpret_cast<message*>(l);
    }
    if (pe.pairs->try_pop(m)) return m;
  }
  return reinterpret_cast<message*>(pe.queue.pop());
}

inline message* pop_local(pe_state& pe) {
  message* m = pe.local_head;
  if (m == nullptr) return nullptr;
  pe.local_head = reinterpret_cast<message*>(m->link.next.load(std::memory_order_relaxed));
  if (pe.local_head == nullptr) pe.local_tail = nullptr;
  pe.local_count.store(pe.local_count.load(std::memory_order_relaxed) - 1,
                       std::memory_order_relaxed);
  return m;
}

// What this PE delivered to itself from the network comes first: a later
// message of the same source node may be in the MPSC queue (deliver_local).
inline message* pop_net(pe_state& pe) {
  message* m = pe.net_head;
  pe.net_head = reinterpret_cast<message*>(m->link.next.load(std::memory_order_relaxed));
  if (pe.net_head == nullptr) pe.net_tail = nullptr;
  pe.local_count.store(pe.local_count.load(std::memory_order_relaxed) - 1,
                       std::memory_order_relaxed);
  return m;
}

// The PE's next message: from its own FIFO of self-sends and from what
// others sent, taking turns (each queue keeps its order; between them no
// order is promised, as between any two senders).
inline message* pop_own(pe_state& pe, bool first_of_turn) {
  if (pe.net_head != nullptr) return pop_net(pe);
  if (pe.local_head == nullptr) return pop_shared(pe, first_of_turn);
  pe.local_first = !pe.local_first;
  if (pe.local_first) return pop_local(pe);
  if (message* m = pop_shared(pe, first_of_turn)) return m;
  return pop_local(pe);
}

// Moves a popped message into the PE's priority order.
inline void hold(pe_state& pe, message* m) {
  pe.prioritized.push({m->priority, pe.held_seq++, m});
}

inline bool own_queue_has_work(const pe_state& pe) {
  return pe.local_head != nullptr || pe.net_head != nullptr || !pe.queue.empty() ||
         (pe.pairs && !pe.pairs->empty());
}

message* pop_node_queue(node_state& node) {
  if (node.node_queue_size.load(std::memory_order_relaxed) == 0) return nullptr;
  std::lock_guard<std::mutex> lock(node.node_mutex);
  if (node.node_queue.empty()) return nullptr;
  message* m = node.node_queue.front();
  node.node_queue.pop_front();
  node.node_queue_size.fetch_sub(1, std::memory_order_relaxed);
  return m;
}

// Forwards a broadcast to this PE's children, before the local handler may
// consume the message. The tree is rooted at global PE m->bcast_root: its
// node forwards to up to broadcast_fanout child nodes, and inside every node
// the tree is rooted at the root's rank in its node (where the message
// enters from the network), which first forwards to the child nodes.
void forward_broadcast(node_state& node, pe_state& pe, const message& m) {
  const int n = int(node.pes.size());
  const int local_root = m.bcast_root % n;
  if (node.num_nodes > 1 && pe.rank == local_root) {
    const int nodes = node.num_nodes;
    const int root_node = m.bcast_root / n;
    const int rel = (node.node_id - root_node + nodes) % nodes;
    for (int c = 1; c <= broadcast_fanout; ++c) {
      const long child_rel = long(rel) * broadcast_fanout + c;
      if (child_rel >= nodes) break;
      message_ptr copy = copy_message(m);
      copy->src_pe = node.first_pe + pe.rank;
      const int child_node = int((child_rel + root_node) % nodes);
      if (trace::on()) [[unlikely]]
        trace_send(*copy, child_node * n + local_root,
                   trace::send_flags::bcast_copy | trace::send_flags::to_remote);
      count_one(pe.sent);
      send_remote(node, child_node, copy.release());
    }
  }
  const int rel = (pe.rank - local_root + n) % n;
  for (int c = 1; c <= broadcast_fanout; ++c) {
    const long child_rel = long(rel) * broadcast_fanout + c;
    if (child_rel >= n) break;
    const int child = int((child_rel + local_root) % n);
    message_ptr copy = copy_message(m);
    copy->src_pe = node.first_pe + pe.rank;
    if (trace::on()) [[unlikely]]
      trace_send(*copy, node.first_pe + child, trace::send_flags::bcast_copy);
    count_one(pe.sent);
    deliver_local(node, child, copy.release());
  }
}

void handle(node_state& node, pe_state& pe, message* m, bool follows = false) {
  if (m->handler >= node.num_handlers)
    base::fatal(
        "PE %d received a message for handler id %u, which was never registered (%zu "
        "handlers registered)",
        pe.rank, m->handler, node.num_handlers);
  if (m->flags & message_flags::broadcast) {
    forward_broadcast(node, pe, *m);
    // The handler gets an ordinary message: if it sends it on, it must not
    // be forwarded down the tree a second time.
    m->flags &= std::uint16_t(~message_flags::broadcast);
  }
  const handler_entry& h = node.handler_entries[m->handler];
  const handler_id hid = m->handler;
  const bool traced = trace::on() && !(m->flags & message_flags::untraced);  // m is consumed
  if (traced) [[unlikely]]
    trace_handler_begin(node, *m, follows);
  // A handler may run nested in another (detail::serve_messages): the
  // watchdog must see the outer one again when it returns.
  const std::int64_t outer = pe.current_handler.load(std::memory_order_relaxed);
  pe.current_handler.store(m->handler, std::memory_order_relaxed);
  const bool timed = node.cfg.stats;
  const std::uint64_t t0 = timed ? base::cycles() : 0;
  try {
    h.fn(message_ptr(m));
  } catch (const std::exception& e) {
    base::fatal("handler '%s' on PE %d threw %s", h.name, pe.rank, e.what());
  } catch (...) {
    base::fatal("handler '%s' on PE %d threw an exception not derived from std::exception", h.name,
                pe.rank);
  }
  if (timed) pe.busy_cycles += base::cycles() - t0;
  if (traced) [[unlikely]]
    trace::detail::emit_adjacent(trace::kind::entry_end, trace::kind::handler_end, hid, 0, 0, 0);
  pe.current_handler.store(outer, std::memory_order_relaxed);
  pe.last_run.store(hid, std::memory_order_relaxed);
  count_one(pe.processed);
}

// An idle period ends (the PE found work): it no longer counts as idle.
inline void end_idle(node_state& node, pe_state& pe) {
  if (trace::on()) [[unlikely]]
    trace::detail::idle_leave();
  if (pe.idle_since_ns == 0) return;
  pe.idle_since_ns = 0;
  node.idle_pes.fetch_sub(1, std::memory_order_relaxed);
}

// Runs up to `limit` messages of the PE's own queue; returns how many ran.
int run_own_queue(node_state& node, pe_state& pe, int limit) {
  int did = 0;
  while (did < limit) {
    message* m = pop_own(pe, did == 0);
    // The common case: no priorities anywhere, the message runs as popped.
    if (m != nullptr && m->priority == 0 && pe.prioritized.empty()) {
      handle(node, pe, m, did > 0);  // after the first: the previous one's end stamp
      ++did;
      continue;
    }
    // A prioritised message is queued: gather what has arrived and run the
    // highest priority first (FIFO among equals).
    if (m != nullptr) {
      hold(pe, m);
      for (int k = 0; k < batch; ++k) {
        message* x = pop_own(pe, false);
        if (x == nullptr) break;
        hold(pe, x);
      }
    }
    if (pe.prioritized.empty()) break;
    message* best = pe.prioritized.top().m;
    pe.prioritized.pop();
    handle(node, pe, best, did > 0);
    ++did;
  }
  return did;
}

// Runs due timers; returns how many ran.
int run_timers(pe_state& pe) {
  if (pe.timers.empty()) return 0;
  int ran = 0;
  const std::uint64_t now = base::wall_ns();
  while (!pe.timers.empty() && pe.timers.top().deadline_ns <= now) {
    // Move the callback out before popping: it may add timers.
    std::function<void()> fn = std::move(const_cast<timer_entry&>(pe.timers.top()).fn);
    pe.timers.pop();
    pe.current_handler.store(run_timer, std::memory_order_relaxed);
    if (trace::on()) [[unlikely]]
      trace::detail::emit(trace::kind::handler_begin, trace::callback_handler, std::uint32_t(-1), 0,
                          0);
    guarded("a timer callback", pe.rank, fn);
    if (trace::on()) [[unlikely]]
      trace::detail::emit(trace::kind::handler_end, trace::callback_handler, 0, 0, 0);
    pe.current_handler.store(run_none, std::memory_order_relaxed);
    pe.last_run.store(run_timer, std::memory_order_relaxed);
    count_one(pe.processed);
    ++ran;
  }
  return ran;
}

int run_conditions(node_state& node, pe_state& pe) {
  if (pe.conditions.empty()) return 0;
  // Callbacks may add conditions: iterate by index over a stable snapshot size.
  std::size_t n = pe.conditions.size(), kept = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::function<bool()> fn = std::move(pe.conditions[i]);
    if (guarded("a poll_while condition", pe.rank, fn)) pe.conditions[kept++] = std::move(fn);
  }
  pe.conditions.erase(pe.conditions.begin() + long(kept), pe.conditions.begin() + long(n));
  if (kept != n) node.conditions.fetch_sub(int(n - kept), std::memory_order_relaxed);
  return 0;  // conditions do not count as work: they would keep a PE from idling
}

// Moves this PE's spsc-pairs overflow into the rings as they drain, and
// wakes only the destinations that got something.
void flush_backlog(node_state& node, pe_state& pe) {
  if (!pe.pairs_backlog) return;
  bool clear = true;
  for (auto& dst : node.pes) {
    if (!dst->pairs || !dst->pairs->has_overflow(pe.rank)) continue;
    const std::size_t before = dst->pairs->overflow_size(pe.rank);
    if (!dst->pairs->flush(pe.rank)) clear = false;
    if (dst->pairs->overflow_size(pe.rank) == before) continue;
    base::light_fence();  // the ring stores before the read of the sleep word
    wake_pe(node, *dst);
  }
  pe.pairs_backlog = !clear;
}

inline bool has_work(node_state& node, pe_state& pe) {
  return own_queue_has_work(pe) || !pe.prioritized.empty() ||
         node.node_queue_size.load(std::memory_order_relaxed) != 0 ||
         (node.policy.pes_drive && node.outbox_count.load(std::memory_order_relaxed) != 0) ||
         (!pe.timers.empty() && pe.timers.top().deadline_ns <= base::wall_ns()) ||
         node.stop.load(std::memory_order_relaxed) ||
         (node.tasks.tasks_visible != nullptr && node.tasks.tasks_visible());
}

// Quiescence detection on PE 0 (see quiescence_check). Runs the callbacks
// when quiescence is found. Not on the loop's first idle turn after work
// (idle_since_ns still 0): the PE comes back after its first idle step, and
// a clock read here would stand between every message and the next poll.
void maybe_detect_quiescence(node_state& node, pe_state& pe) {
  if (pe.rank != 0 || pe.idle_since_ns == 0 || !node.qd_requested.load(std::memory_order_acquire))
    return;
  const std::uint64_t now = base::wall_ns();
  if (now - node.qd_last_check < 20'000) return;  // at most one wave per 20 us
  node.qd_last_check = now;
  if (!(node.num_nodes > 1 ? global_quiescence_check(node) : quiescence_check(node))) return;
  std::vector<std::function<void()>> callbacks;
  {
    std::lock_guard<std::mutex> lock(node.qd_mutex);
    callbacks.swap(node.qd_callbacks);
    node.qd_requested.store(false, std::memory_order_release);
  }
  // The callbacks are work: PE 0 no longer counts as idle while they run.
  if (!callbacks.empty()) end_idle(node, pe);
  for (auto& fn : callbacks) {
    if (trace::on()) [[unlikely]]
      trace::detail::emit(trace::kind::handler_begin, trace::callback_handler, std::uint32_t(-1), 0,
                          0);
    guarded("a quiescence callback", pe.rank, fn);
    if (trace::on()) [[unlikely]]
      trace::detail::emit(trace::kind::handler_end, trace::callback_handler, 0, 0, 0);
  }
  // Callbacks are not counted as handled messages: mark them by hand.
  if (!callbacks.empty()) {
    pe.last_run.store(run_qd_callback, std::memory_order_relaxed);
    pe.last_run_ns.store(base::wall_ns(), std::memory_order_relaxed);
  }
}

// How long a PE may sleep: until its next timer, 1 ms with conditions to
// poll or quiescence to detect, else until woken (0).
std::uint64_t sleep_limit_ns(node_state& node, pe_state& pe) {
  std::uint64_t limit = 0;
  if (!pe.conditions.empty() || pe.pairs_backlog ||
      (pe.rank == 0 && node.qd_requested.load(std::memory_order_relaxed)))
    limit = 1'000'000;
  // With comm=workers, a PE asleep on its futex does not hear the network:
  // the node's first PE sleeps at most this long, so the node is polled even
  // when no PE sleeps inside the transport (it cannot wait, or another
  // thread held it when this PE went to sleep). comm=thread keeps a poller
  // awake instead.
  if (pe.rank == 0 && node.policy.pes_drive && (limit == 0 || limit > workers_poll_ns))
    limit = workers_poll_ns;
  if (node.qe_watch && pe.rank == 0) {
    const std::uint64_t q = quiescent_check_limit_ns(node, pe);
    if (q != 0 && (limit == 0 || q < limit)) limit = q;
  }
  if (!pe.timers.empty()) {
    std::uint64_t now = base::wall_ns(), due = pe.timers.top().deadline_ns;
    std::uint64_t d = due > now ? due - now : 1;
    if (limit == 0 || d < limit) limit = d;
  }
  return limit;
}

// comm=workers: sleeps in the transport's wait_for_incoming if no other
// thread is in the transport. Sleep word 2 tells producers to wake this PE
// through the transport (wake_pe); transport_sleeping tells senders to other
// nodes the same (send_remote). Returns false if the transport was busy.
bool sleep_in_transport(node_state& node, pe_state& pe) {
  if (node.comm_busy.load(std::memory_order_relaxed) ||
      node.comm_busy.exchange(true, std::memory_order_acquire))
    return false;
  node.sleepers.fetch_add(1, std::memory_order_seq_cst);
  mark_sleeper(node, pe, true);
  pe.sleeping.store(2, std::memory_order_seq_cst);
  node.transport_sleeping.store(1, std::memory_order_seq_cst);
  base::heavy_fence();  // pairs with the producers' light_fence
  if (!has_work(node, pe)) {
    pe.phase.store(int(pe_phase::sleeping), std::memory_order_relaxed);
    // The transport wakes this PE for messages from the network: only
    // timers, conditions and quiescence bound the sleep (50 ms at most).
    std::uint64_t limit = 0;
    if (!pe.conditions.empty() ||
        (pe.rank == 0 && node.qd_requested.load(std::memory_order_relaxed)))
      limit = 1'000'000;
    if (node.qe_watch && pe.rank == 0) {
      const std::uint64_t q = quiescent_check_limit_ns(node, pe);
      if (q != 0 && (limit == 0 || q < limit)) limit = q;
    }
    if (!pe.timers.empty()) {
      const std::uint64_t now = base::wall_ns(), due = pe.timers.top().deadline_ns;
      const std::uint64_t d = due > now ? due - now : 1;
      if (limit == 0 || d < limit) limit = d;
    }
    node.transport->wait_for_incoming(limit != 0 ? limit : 50'000'000);
  }
  node.transport_sleeping.store(0, std::memory_order_seq_cst);
  pe.sleeping.store(0, std::memory_order_seq_cst);
  mark_sleeper(node, pe, false);
  node.sleepers.fetch_sub(1, std::memory_order_seq_cst);
  node.comm_busy.store(false, std::memory_order_release);
  try_progress(node);
  return true;
}

// The idle back-off, in its phases: a step of the idle period begins
// (begin_idle_step), then rounds of spin (spin_round, or
// spin_in_transport for a PE that can hold the transport), yield
// (yield_round) and at last sleep (sleep_until_woken), each round first
// looking for work (work_found). The phases are functions of this file,
// inlined into idle(): the spin's rounds cost what they did as one function.
//
// One step of it. Returns when there may be work, when stop is set, or —
// for a PE with conditions or overflow to flush — after one round, so the
// loop can poll them (with quiescence to detect, after quiescence_step_ns).
// pe.idle_since_ns marks where the current idle period began (reset by the
// loop when it finds work), so the spin and yield budgets span the whole
// idle period, not one step.

// What one step of the idle period knows: its budgets, fixed as it begins,
// and the loop's last clock reading.
struct idle_step {
  std::uint64_t now;        // the last clock reading
  int clock_in;             // rounds until the next one (below 0: read it)
  std::uint64_t spin_end;   // the spin phase ends here (wall_ns) ...
  std::uint64_t yield_end;  // ... and the yield phase here
  std::uint64_t step_end;   // back to the loop by then (quiescence to detect)
  bool polling;             // one round, then back to the loop to poll
};

// How long a step of PE 0 may last while quiescence is to be detected (a
// wave is due every 20 us at most): one round a step, with a clock read,
// made PE 0 late to every message of an MPI run, which asks for it all run.
constexpr std::uint64_t quiescence_step_ns = 2000;

// Starts a step: a new idle period counts the PE idle and notes when it
// last ran something; the budgets follow from where the period began.
inline idle_step begin_idle_step(node_state& node, pe_state& pe) {
  // A new idle period's start is also the loop's first clock reading: a PE
  // that polls the network is back at it one clock read (~20 ns) sooner
  // after the send that ended its last turn.
  idle_step s{};
  if (pe.idle_since_ns == 0) {
    pe.idle_since_ns = s.now = base::wall_ns();
    node.idle_pes.fetch_add(1, std::memory_order_relaxed);
    s.clock_in = 1;
    // The PE ran something since its last idle period (not only transport
    // progress): this is about when it finished.
    const std::uint64_t done = pe.processed.load(std::memory_order_relaxed);
    if (done != pe.idle_mark) {
      pe.idle_mark = done;
      pe.last_run_ns.store(s.now, std::memory_order_relaxed);
    }
  }
  // A carrier runnable on this PE's CPUs (layer threads) needs the CPU this
  // PE would spin on: the back-off starts at its yield phase.
  const std::uint64_t spin_us =
      pe.guests.load(std::memory_order_relaxed) != 0 ? 0 : std::uint64_t(node.cfg.idle_spin_us);
  s.spin_end = pe.idle_since_ns + spin_us * 1000;
  s.yield_end = s.spin_end + std::uint64_t(node.cfg.idle_yield_us) * 1000;
  s.polling = !pe.conditions.empty() || pe.pairs_backlog;
  s.step_end = ~std::uint64_t(0);
  if (pe.rank == 0 && (node.qd_requested.load(std::memory_order_relaxed) || node.qe_active))
    s.step_end = (s.now != 0 ? s.now : base::wall_ns()) + quiescence_step_ns;
  return s;
}

// Each round's first look. Work seen on entry (first round) means the pop
// just failed: a producer is between its exchange and its link store. Pause
// (or yield, past the spin budget) instead of bouncing through the loop at
// full speed.
inline bool work_found(node_state& node, pe_state& pe, const idle_step& s, bool first) {
  if (!has_work(node, pe)) return false;
  if (first) {
    if (base::wall_ns() < s.spin_end)
      base::cpu_relax();
    else
      sched_yield();
  }
  return true;
}

// The spin phase for a PE that drives the network, while it can take the
// transport: it spins inside it. Taking and giving it back every round,
// with a pause between, made a round ~60 ns against ~20 for a bare
// ucp_worker_progress, and a message from another node waits half a round
// on average. Held, a round is one progress() and a look at the PE's own
// queue, and a pause if the transport asks for one (pause_between_polls);
// the rest of has_work and the clock come every 16th round. Other PEs'
// sends queue meanwhile and every round drains them (progress_held).
// Caller took the transport; this gives it back. Returns whether the
// transport delivered or sent something (the idle step ends).
inline bool spin_in_transport(node_state& node, pe_state& pe, idle_step& s) {
  const std::uint64_t end = std::min(s.spin_end, s.step_end);
  int did = 0;
  for (unsigned round = 1;; ++round) {
    did = progress_held(node);
    if (did != 0 || own_queue_has_work(pe)) break;
    if (node.transport_pauses) base::cpu_relax();
    if (round % 16 == 0) {
      if (has_work(node, pe)) break;
      s.now = base::wall_ns();
      if (s.now >= end) break;
    }
  }
  give_transport(node);
  return did != 0;
}

// One round of the spin phase. Returns whether the idle step ends.
inline bool spin_round(node_state& node, pe_state& pe, idle_step& s) {
  pe.phase.store(int(pe_phase::spinning), std::memory_order_relaxed);
  if (node.policy.idle_pes_poll && !s.polling && take_transport(node))
    return spin_in_transport(node, pe, s);
  // Poll the queue after every pause (a pause is ~10-140 cycles depending
  // on the core): the message that ends the spin must be seen at once,
  // since this phase exists to make its latency one cache-line transfer.
  // The clock is read only every 64 polls. A PE that also polls the
  // network does so after every pause: a message from another node must
  // be seen as soon (bench/pingpong across processes: 4 pauses between
  // polls cost ~50 ns of one-way latency).
  const int polls = node.policy.idle_pes_poll ? 1 : 64;
  for (int i = 0; i < polls; ++i) {
    if (own_queue_has_work(pe)) break;
    base::cpu_relax();
  }
  // An idle PE drives the network (comm=workers|hybrid).
  if (node.policy.idle_pes_poll && try_progress(node) != 0) return true;
  return s.polling;
}

// One round of the yield phase: other runnable threads of an
// oversubscribed node get the core. Returns whether the idle step ends.
inline bool yield_round(node_state& node, pe_state& pe, idle_step& s) {
  pe.phase.store(int(pe_phase::yielding), std::memory_order_relaxed);
  s.clock_in = 0;  // a yield takes long enough: read the clock every round
  sched_yield();
  if (node.policy.idle_pes_poll && try_progress(node) != 0) return true;
  return s.polling;
}

// The sleep phase, the end of the step: on the futex until a producer
// wakes the PE (protocol at the top of this file) or sleep_limit_ns passes,
// or inside the transport.
inline void sleep_until_woken(node_state& node, pe_state& pe) {
  // A PE with spsc-pairs overflow never sleeps: its consumers drain the
  // rings without knowing about it, so it must keep flushing.
  if (pe.pairs_backlog) {
    sched_yield();
    return;
  }
  // comm=workers over a transport that can wait: one PE sleeps inside it
  // (it holds the transport meanwhile), so a message from another node
  // wakes it at once; the others sleep on their futex as usual.
  if (node.policy.idle_pe_waits_in_it && sleep_in_transport(node, pe)) return;
  node.sleepers.fetch_add(1, std::memory_order_seq_cst);
  mark_sleeper(node, pe, true);
  pe.sleeping.store(1, std::memory_order_seq_cst);
  base::heavy_fence();  // pairs with the producers' light_fence (base/fence.hpp)
  if (!has_work(node, pe)) {
    pe.phase.store(int(pe_phase::sleeping), std::memory_order_relaxed);
    futex_wait(&pe.sleeping, 1, sleep_limit_ns(node, pe));
  }
  pe.sleeping.store(0, std::memory_order_seq_cst);
  mark_sleeper(node, pe, false);
  node.sleepers.fetch_sub(1, std::memory_order_seq_cst);
  if (node.policy.pes_drive) try_progress(node);
}

// The first stretch of a new idle period, before it counts as one: up to
// quick_spin_polls looks at the PE's own queue back to back (about a
// microsecond), with no pause (25-40 ns here, more than the line transfer
// that brings a message), no clock read and no shared line written (the
// idle count). A message exchange (ping-pong, kNeighbor) finds its next
// message here; a message seen in the rings has its first line prefetched
// for writing as the PE goes back to pop it. Skipped where a back-off step
// must return after a round (conditions, overflow), for a PE that polls the
// network, and where the spin budget is 0; not for quiescence detection on
// PE 0 (a wave is due every 20 us, the spin lasts one; MPI asks for it all
// run). docs/design/scheduler.md, "The quick spin".
constexpr int quick_spin_polls = 256;

inline bool quick_spin(node_state& node, pe_state& pe) {
  if (node.cfg.idle_spin_us <= 0 || node.policy.idle_pes_poll ||
      pe.guests.load(std::memory_order_relaxed) != 0 || !pe.conditions.empty() || pe.pairs_backlog)
    return false;
  // MPSC work the loop could not pop: a producer is between its exchange
  // and its link store, which work_found waits for with a pause.
  if (!pe.queue.empty()) return false;
  for (int i = 0; i < quick_spin_polls; ++i) {
    if (pe.pairs) {
      if (message* m = pe.pairs->peek()) {
        base::prefetch_for_write(m);
        return true;
      }
    }
    if (pe.local_head != nullptr || pe.net_head != nullptr || !pe.queue.empty()) return true;
    // The rest of has_work (node queue, timers, tasks, stop) less often.
    if (i % 16 == 15 && has_work(node, pe)) return true;
  }
  return false;
}

void idle(node_state& node, pe_state& pe) {
  const std::uint64_t c0 = node.cfg.measure_busy ? base::cycles() : 0;
  if (trace::on()) [[unlikely]]
    trace::detail::idle_enter();
  if (pe.idle_since_ns == 0 && quick_spin(node, pe)) {
    if (node.cfg.measure_busy) pe.idle_cycles += base::cycles() - c0;
    return;
  }
  idle_step s = begin_idle_step(node, pe);
  // A PE that polls the network spins inside the transport when it can
  // take it, else in rounds of one pause and one poll; a clock read
  // (~20 ns through the vDSO) in each would lengthen the round, and so the
  // time until an arriving message is seen, by half again: it reads the
  // clock every 16th round. Other PEs pause 64 times per round and read it
  // every round.
  for (bool first = true;; first = false) {
    if (work_found(node, pe, s, first)) break;
    if (--s.clock_in < 0) {
      s.now = base::wall_ns();
      s.clock_in = node.policy.idle_pes_poll ? 15 : 0;
      if (s.now >= s.step_end) break;
    }
    if (s.now < s.spin_end) {
      if (spin_round(node, pe, s)) break;
      continue;
    }
    if (s.now < s.yield_end) {
      if (yield_round(node, pe, s)) break;
      continue;
    }
    sleep_until_woken(node, pe);
    break;
  }
  pe.phase.store(int(pe_phase::running), std::memory_order_relaxed);
  if (node.cfg.measure_busy) pe.idle_cycles += base::cycles() - c0;
}

}  // namespace

void scheduler_loop(node_state& node, pe_state& pe) {
  const bool sample_cpu = node.cfg.stats && node.cfg.pe_cpus[std::size_t(pe.rank)] < 0;
  if (node.cfg.measure_busy) pe.start_cycles = base::cycles();
  pe.phase.store(int(pe_phase::running), std::memory_order_relaxed);

  if (pe.rank == 0 && node.node_id == 0 && node.main_fn) {
    // main_fn counts as a message in flight until it returns.
    count_one(pe.sent);
    pe.current_handler.store(run_main, std::memory_order_relaxed);
    node.main_running.store(true, std::memory_order_relaxed);
    struct main_done {
      node_state& n;
      ~main_done() { n.main_running.store(false, std::memory_order_relaxed); }
    } done{node};
    if (trace::on()) [[unlikely]]
      trace::detail::emit(trace::kind::handler_begin, trace::main_handler, std::uint32_t(-1), 0, 0);
    try {
      node.main_fn(node.main_args);
    } catch (const std::exception& e) {
      base::fatal("main function threw %s", e.what());
    } catch (...) {
      base::fatal("main function threw an exception not derived from std::exception");
    }
    if (trace::on()) [[unlikely]]
      trace::detail::emit(trace::kind::handler_end, trace::main_handler, 0, 0, 0);
    pe.current_handler.store(run_none, std::memory_order_relaxed);
    pe.last_run.store(run_main, std::memory_order_relaxed);
    count_one(pe.processed);
  }
  // Without a main function too: other nodes may wait for this.
  if (pe.rank == 0 && node.node_id == 0)
    for (const auto& l : handlers().layers)
      if (l.main_returned) l.main_returned();

  while (!node.stop.load(std::memory_order_relaxed)) {
    if (sample_cpu) {
      int cpu = sched_getcpu();
      if (pe.last_cpu >= 0 && cpu != pe.last_cpu) ++pe.cpu_changes;
      pe.last_cpu = cpu;
    }
    int did = run_own_queue(node, pe, batch);
    if (message* m = pop_node_queue(node)) {
      handle(node, pe, m);
      ++did;
    }
    did += run_timers(pe);
    run_conditions(node, pe);
    flush_backlog(node, pe);
    // comm=workers: the PEs are the progress engine, a turn each.
    if (node.policy.pes_drive) did += try_progress(node);
    // The tasks layer: a task of the PE's own each turn, so tasks and
    // messages share the PE; a stolen one only when the turn found nothing
    // (DESIGN.md: steal before backing off).
    if (node.tasks.run_tasks != nullptr) did += node.tasks.run_tasks(did == 0);
    if (did != 0) {
      end_idle(node, pe);
      continue;
    }
    maybe_detect_quiescence(node, pe);
    // PE 0 of node 0: has the job ended without weft::exit?
    if (node.qe_watch && pe.rank == 0) maybe_end_quiescent_job(node, pe);
    if (node.stop.load(std::memory_order_relaxed)) break;
    idle(node, pe);
  }
  end_idle(node, pe);
  pe.phase.store(int(pe_phase::stopped), std::memory_order_relaxed);
  if (node.cfg.stats) pe.end_cycles = base::cycles();
}

}  // namespace weft::core

namespace weft::detail {

void end_idle_period() noexcept {
  core::node_state* node = core::g_node.load(std::memory_order_relaxed);
  if (node != nullptr && core::t_pe != nullptr) core::end_idle(*node, *core::t_pe);
}

int serve_messages(int max) {
  core::node_state* node = core::g_node.load(std::memory_order_relaxed);
  core::pe_state* pe = core::t_pe;
  if (node == nullptr || pe == nullptr) return 0;
  // A PE that waits by serving its messages takes no scheduler turns: its
  // spsc-pairs overflow must still reach the rings, or a PE that waits for
  // an answer to such a message waits forever (seen: it was the request).
  core::flush_backlog(*node, *pe);
  return core::run_own_queue(*node, *pe, max);
}

int serve_while_waiting(int max) {
  core::node_state* node = core::g_node.load(std::memory_order_relaxed);
  core::pe_state* pe = core::t_pe;
  if (node == nullptr || pe == nullptr) return -1;
  // What only the loop does: the waiter suspends, so that the loop runs.
  if (!pe->timers.empty() || !pe->conditions.empty() ||
      node->stop.load(std::memory_order_relaxed) ||
      node->node_queue_size.load(std::memory_order_relaxed) != 0)
    return -1;
  const int did = serve_messages(max);
  // The network's turn only when the queue was empty, as the idle PE this
  // waiter stands in for takes it (one shared word tried per round).
  if (did != 0 || !node->policy.idle_pes_poll || core::try_progress(*node) == 0) return did;
  return core::run_own_queue(*node, *pe, max);
}

void pending_work_begin() noexcept {
  if (core::pe_state* pe = core::t_pe) core::count_one(pe->sent);
}

void pending_work_end() noexcept {
  if (core::pe_state* pe = core::t_pe) core::count_one(pe->processed);
}

}  // namespace weft::detail
