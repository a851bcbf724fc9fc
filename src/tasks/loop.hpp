// A loop as the tasks layer runs it: its descriptor and the task that names
// a sub-range of it, the per-PE and per-node state, and running and
// accounting a piece of a loop (private to src/tasks). The files:
//   parallel_for.cpp  the calls (run_sync, run_async), the caller's wait,
//                     the layer's lifetime
//   deques.cpp        tasks on the deques: exposing, stealing, the schemes
//                     split, adaptive_idle and adaptive_history, the
//                     scheduler hooks
//   messages.cpp      the schemes by message: broadcast and static_blocks,
//                     and the end of an asynchronous loop
//   pool.hpp          the descriptors' pools
//
// Completion is counted in iterations: `remaining` starts at n and whoever
// ran (or, once the loop failed, skipped) some iterations subtracts them, in
// one step per piece of work rather than per chunk. The subtraction is a
// PE's last access to a loop it holds no reference to: a synchronous caller
// that sees 0 may free the descriptor at once. References are held only by
// the caller and by messages naming the loop (they may arrive after the
// loop ended); tasks never outlive the iterations they name, so they hold
// none.
//
// What runs each chunk (run_body, run_chunks, account) is inline here: every
// scheme calls it per chunk or per piece, from all three files.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>
#include "base/op_count.hpp"
#include "pool.hpp"
#include "weft/base/cache.hpp"
#include "weft/base/chase_lev.hpp"
#include "weft/core/handler.hpp"
#include "weft/tasks/parallel_for.hpp"

namespace weft::tasks::internal {

struct loop {
  // Fixed from creation until the descriptor is freed; published to other
  // PEs by the deque push or the message that names the loop.
  detail::loop_body body{};
  std::unique_ptr<detail::async_loop> async;  // set: an asynchronous loop
  std::uint64_t n = 0, grain = 1, chunks = 0;
  tasks_scheme scheme = tasks_scheme::split;
  int caller_pe = -1;  // in the job: where `finish` runs (async)
  int pes = 1;         // PEs of the node when it started

  // Iterations not yet run or skipped; the loop is over at 0.
  alignas(base::cache_line) std::atomic<std::uint64_t> remaining{0};
  // broadcast: the next chunk to grab.
  alignas(base::cache_line) std::atomic<std::uint64_t> next_chunk{0};
  // static_blocks: block b is claimed by whoever sets claimed[b] first (the
  // message to PE b, or the caller while it waits, so that two PEs waiting
  // for each other's blocks cannot deadlock). Sized when the loop starts;
  // pooled descriptors keep the storage.
  std::unique_ptr<std::atomic<bool>[]> claimed;
  int claimed_size = 0;
  // Caller plus messages in flight that name this loop.
  alignas(base::cache_line) std::atomic<int> refs{0};
  std::atomic<bool> failed{false};
  // Written once, by the PE that set `failed`, before it subtracts from
  // `remaining`; read by whoever sees remaining reach 0.
  std::exception_ptr error;

  loop* next_free = nullptr;  // in a pool
};

struct task {
  loop* l = nullptr;
  std::uint64_t lo = 0, hi = 0;
  task* next_free = nullptr;
};

struct alignas(base::cache_line) pe_tasks {
  // Pushed and popped by this PE, stolen by the others.
  base::chase_lev<task*> deque{256};
  // --- owned by this PE only.
  local_pool<task> free_tasks;
  local_pool<loop> free_loops;
  std::uint64_t rng = 0;
  int rank = 0;          // in the node
  int last_victim = -1;  // where this PE last stole: tried first next time
  // adaptive_idle: the cycle count before which this PE does not look at
  // the node's idle count again; 0 and 1 as idle_look_due (deques.cpp)
  // says.
  std::uint64_t next_idle_look = 0;
  // adaptive_history: moving average of the fraction of exposed tasks that
  // were stolen. Starts at one half: neither flooding nor starving thieves.
  double stolen_avg = 0.5;
};

struct node_tasks {
  int pes = 1;
  tasks_scheme default_scheme = tasks_scheme::adaptive_idle;
  std::vector<std::unique_ptr<pe_tasks>> pe;  // fixed while the node runs
  // steal_one's probes per attempt: 2 + log2(PEs), at most PEs - 1.
  int steal_probes = 1;
  // Which PEs' deques may hold a task: bit r % 64 of word r / 64, set by
  // PE r after a push (publish), cleared by whoever finds that deque empty
  // (then it looks again). Idle PEs poll these words instead of every
  // deque; a thief draws its victims among the set bits.
  struct alignas(base::cache_line) visible_word {
    std::atomic<std::uint64_t> bits{0};
  };
  std::unique_ptr<visible_word[]> visible;
  int visible_words = 0;
  // adaptive_idle: how long a PE goes between looks at the idle count.
  std::uint64_t idle_look_cycles = 0;
  shared_pool<task> tasks;
  shared_pool<loop> loops;
};

// Set in node_start before PEs start, cleared in node_stop after they stop.
// Hidden, as the definitions are, and constinit: read on every task's path,
// and so read directly, not through the GOT or the TLS initialisation
// wrapper of a thread_local defined in another file.
[[gnu::visibility("hidden")]] extern node_tasks* g_node;
[[gnu::visibility("hidden")]] extern constinit thread_local pe_tasks* t_me;
// > 0 while this PE runs a body or serves messages inside a parallel_for:
// a parallel_for called then runs inline.
[[gnu::visibility("hidden")]] extern constinit thread_local int t_depth;

struct depth_guard {
  depth_guard() { ++t_depth; }
  ~depth_guard() { --t_depth; }
  depth_guard(const depth_guard&) = delete;
  depth_guard& operator=(const depth_guard&) = delete;
};

// ---- running a piece of a loop ----------------------------------------------------

inline void fail(loop& l, std::exception_ptr e) {
  bool expected = false;
  if (l.failed.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) l.error = e;
}

// Runs body over [lo, hi), one chunk; an exception fails the loop.
inline void run_body(loop& l, std::uint64_t lo, std::uint64_t hi) {
  depth_guard nested;
  try {
    if (l.async)
      l.async->run(lo, hi);
    else
      l.body.run(l.body.ctx, lo, hi);
  } catch (...) {
    fail(l, std::current_exception());
  }
}

// Runs [lo, hi) in chunks of at most grain (skipping them once the loop
// failed); returns the iterations accounted.
inline std::uint64_t run_chunks(loop& l, std::uint64_t lo, std::uint64_t hi) {
  for (std::uint64_t i = lo; i < hi;) {
    const std::uint64_t e = std::min(hi, i + l.grain);
    if (!l.failed.load(std::memory_order_relaxed)) run_body(l, i, e);
    i = e;
  }
  return hi - lo;
}

// messages.cpp: tells the caller's PE that an asynchronous loop is over.
void send_done(int pe, loop* l);

// Subtracts iterations that ran or were skipped. The last access to `l` by
// a PE holding no reference (see the top of this file).
inline void account(loop& l, std::uint64_t k) {
  if (k == 0) return;
  const bool async = l.async != nullptr;
  const int caller = l.caller_pe;
  loop* self = &l;
  base::count(base::op::shared_rmw);
  if (l.remaining.fetch_sub(k, std::memory_order_acq_rel) == k && async) send_done(caller, self);
}

// Drops a reference; the last one puts the descriptor back in the pool.
inline void release(loop* l) {
  if (l->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  l->async.reset();
  l->error = nullptr;
  give(t_me->free_loops, g_node->loops, l);
}

// ---- deques.cpp
// Puts [lo, hi) of `l` on this PE's deque as a task; publish() makes it
// seen.
void expose(loop& l, std::uint64_t lo, std::uint64_t hi);
// After pushing on this PE's deque: marks it visible, then wakes up to
// `wake` sleeping PEs (the producer half of the wake-up protocol).
void publish(int wake);
// One task stolen from a random victim of the node, or null.
task* steal_one(pe_tasks& me);
// Runs [lo, hi) of a loop whose scheme puts tasks on deques; returns the
// iterations accounted.
std::uint64_t run_range(loop& l, std::uint64_t lo, std::uint64_t hi);
// Runs a task this PE took (popped or stolen), then accounts for it.
void run_task(task* t);
// The scheduler hooks (core's detail::scheduler_hooks).
int hook_run_tasks(bool idle);
bool hook_tasks_visible();

// ---- messages.cpp
// Registers the layer's handlers (at static initialisation).
void register_handlers();
// broadcast: grabs chunks until none is left; returns the iterations run.
std::uint64_t grab_chunks(loop& l);
// static_blocks: claims block b and runs it; returns the iterations
// accounted (0 if another PE had claimed it).
std::uint64_t run_block(loop& l, int b);
// Sizes and clears the claims of a static_blocks loop.
void prepare_blocks(loop& l);
// Sends the messages of a broadcast or static loop to the PEs of the node
// but `skip_rank`, one reference each.
void send_to_pes(loop& l, int skip_rank, bool blocks);

}  // namespace weft::tasks::internal
