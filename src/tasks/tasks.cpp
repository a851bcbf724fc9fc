// The tasks layer: parallel_for's engine (docs/tasks.md).
//
// A loop is one `loop` descriptor over iterations [0, n). Work on it is
// exposed in one of two ways:
//  - tasks: a `task` names a sub-range of a loop and sits on a PE's
//    Chase-Lev deque (base/chase_lev.hpp). The owner pushes and pops at the
//    bottom; idle PEs of the node steal the oldest at the top (the
//    scheduler_hooks of core call run_tasks each turn, and tasks_visible
//    while backing off). Schemes split, adaptive_idle and adaptive_history.
//  - messages: one message per PE names the loop; broadcast has every PE
//    grab chunks by atomic increment, static_blocks gives each PE one block.
//    Messages, not tasks, because these schemes mean "when that PE's
//    scheduler gets to it".
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
// The adaptive schemes follow the seeds' "create tasks only when someone is
// idle to take them": adaptive_idle reads core's node-wide idle-PE count
// (detail::idle_pes, a line written only when a PE enters or leaves an idle
// period) before each chunk and exposes as many tasks as there are idle PEs
// not yet served by an exposed task; with nobody idle, the loop costs one
// relaxed load per chunk. adaptive_history exposes, of the tasks split would
// create for the other PEs, the fraction it saw stolen lately.
//
// Descriptors come from pools: a PE-private free list, refilled from and
// spilled to a node-wide list in batches under a mutex, so that the PE that
// creates tasks and the thieves that free them meet on the lock once per
// batch, and steady state does no malloc.
#include "weft/tasks/parallel_for.hpp"

#include <sched.h>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>
#include "weft/base/cache.hpp"
#include "weft/base/chase_lev.hpp"
#include "weft/base/error.hpp"
#include "weft/core/handler.hpp"
#include "weft/core/message.hpp"
#include "weft/trace/hooks.hpp"

namespace weft {

const char* to_string(tasks_scheme s) noexcept {
  switch (s) {
    case tasks_scheme::from_option: return "from-option";
    case tasks_scheme::split: return "split";
    case tasks_scheme::broadcast: return "broadcast";
    case tasks_scheme::static_blocks: return "static";
    case tasks_scheme::adaptive_idle: return "adaptive-idle";
    case tasks_scheme::adaptive_history: return "adaptive-history";
  }
  return "?";
}

namespace tasks {
namespace {

// ---- descriptors and their pools ----------------------------------------------

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

template <class T>
struct shared_pool {
  std::mutex mutex;
  T* head = nullptr;                      // guarded by mutex
  std::size_t count = 0;                  // guarded by mutex
  std::vector<std::unique_ptr<T[]>> slabs;  // guarded by mutex; every T ever made
};

template <class T>
struct local_pool {
  T* head = nullptr;
  std::size_t count = 0;
};

constexpr std::size_t pool_batch = 64;   // moved per lock
constexpr std::size_t pool_keep = 512;   // a PE keeps at most this many free

template <class T>
T* take(local_pool<T>& lp, shared_pool<T>& sp) {
  if (lp.head == nullptr) {
    std::lock_guard<std::mutex> lock(sp.mutex);
    for (std::size_t k = 0; k < pool_batch && sp.head != nullptr; ++k) {
      T* x = sp.head;
      sp.head = x->next_free;
      --sp.count;
      x->next_free = lp.head;
      lp.head = x;
      ++lp.count;
    }
    if (lp.head == nullptr) {
      sp.slabs.push_back(std::make_unique<T[]>(pool_batch));
      T* slab = sp.slabs.back().get();
      for (std::size_t k = 0; k < pool_batch; ++k) {
        slab[k].next_free = lp.head;
        lp.head = &slab[k];
      }
      lp.count += pool_batch;
    }
  }
  T* x = lp.head;
  lp.head = x->next_free;
  --lp.count;
  return x;
}

template <class T>
void give(local_pool<T>& lp, shared_pool<T>& sp, T* x) {
  x->next_free = lp.head;
  lp.head = x;
  if (++lp.count <= pool_keep) return;
  std::lock_guard<std::mutex> lock(sp.mutex);
  for (std::size_t k = 0; k < pool_keep / 2; ++k) {
    T* y = lp.head;
    lp.head = y->next_free;
    --lp.count;
    y->next_free = sp.head;
    sp.head = y;
    ++sp.count;
  }
}

// ---- per-PE and per-node state --------------------------------------------------

struct alignas(base::cache_line) pe_tasks {
  // Pushed and popped by this PE, stolen by the others.
  base::chase_lev<task*> deque{256};
  // --- owned by this PE only.
  local_pool<task> free_tasks;
  local_pool<loop> free_loops;
  std::uint64_t rng = 0;
  // adaptive_history: moving average of the fraction of exposed tasks that
  // were stolen. Starts at one half: neither flooding nor starving thieves.
  double stolen_avg = 0.5;
};

struct node_tasks {
  int pes = 1;
  tasks_scheme default_scheme = tasks_scheme::adaptive_idle;
  std::vector<std::unique_ptr<pe_tasks>> pe;  // fixed while the node runs
  // adaptive_idle: tasks of that scheme exposed and not yet taken, so that a
  // PE going idle is offered one task, not one per chunk of every loop.
  alignas(base::cache_line) std::atomic<int> exposed{0};
  shared_pool<task> tasks;
  shared_pool<loop> loops;
};

// Set in node_start before PEs start, cleared in node_stop after they stop.
node_tasks* g_node = nullptr;
thread_local pe_tasks* t_me = nullptr;
// > 0 while this PE runs a body or serves messages inside a parallel_for:
// a parallel_for called then runs inline.
thread_local int t_depth = 0;

handler_id h_broadcast = 0, h_block = 0, h_done = 0;

tasks_scheme parse_scheme(const std::string& s) {
  if (s == "split") return tasks_scheme::split;
  if (s == "broadcast") return tasks_scheme::broadcast;
  if (s == "static") return tasks_scheme::static_blocks;
  if (s == "adaptive-history") return tasks_scheme::adaptive_history;
  if (s == "adaptive-idle") return tasks_scheme::adaptive_idle;
  // The option was validated by core; a name missing here is our bug.
  base::fatal("--weft:tasks-scheme=%s is accepted by core but unknown to the tasks layer",
              s.c_str());
}

struct depth_guard {
  depth_guard() { ++t_depth; }
  ~depth_guard() { --t_depth; }
  depth_guard(const depth_guard&) = delete;
  depth_guard& operator=(const depth_guard&) = delete;
};

// Waits of synchronous loops that serve messages, nested on this PE's stack.
// While one serves, the handlers it runs start at depth 0 (their loops are
// shared); past max_serving_depth a waiting loop no longer serves.
constexpr int max_serving_depth = 4;
thread_local int t_serving = 0;

struct serving_guard {
  int saved_depth;
  serving_guard() : saved_depth(t_depth) {
    t_depth = 0;
    ++t_serving;
  }
  ~serving_guard() {
    --t_serving;
    t_depth = saved_depth;
  }
  serving_guard(const serving_guard&) = delete;
  serving_guard& operator=(const serving_guard&) = delete;
};

// ---- loops -------------------------------------------------------------------------

loop* new_loop(std::uint64_t n, std::uint64_t grain, tasks_scheme scheme) {
  loop* l = take(t_me->free_loops, g_node->loops);
  l->body = {};
  l->n = n;
  l->grain = grain;
  l->chunks = (n + grain - 1) / grain;
  l->scheme = scheme;
  l->caller_pe = my_pe();
  l->pes = g_node->pes;
  l->remaining.store(n, std::memory_order_relaxed);
  l->next_chunk.store(0, std::memory_order_relaxed);
  l->refs.store(1, std::memory_order_relaxed);
  l->failed.store(false, std::memory_order_relaxed);
  l->error = nullptr;
  return l;
}

void release(loop* l) {
  if (l->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  l->async.reset();
  l->error = nullptr;
  give(t_me->free_loops, g_node->loops, l);
}

void fail(loop& l, std::exception_ptr e) {
  bool expected = false;
  if (l.failed.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) l.error = e;
}

// Runs body over [lo, hi), one chunk; an exception fails the loop.
void run_body(loop& l, std::uint64_t lo, std::uint64_t hi) {
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
std::uint64_t run_chunks(loop& l, std::uint64_t lo, std::uint64_t hi) {
  for (std::uint64_t i = lo; i < hi;) {
    const std::uint64_t e = std::min(hi, i + l.grain);
    if (!l.failed.load(std::memory_order_relaxed)) run_body(l, i, e);
    i = e;
  }
  return hi - lo;
}

void send_done(int pe, loop* l);

// Subtracts iterations that ran or were skipped. The last access to `l` by
// a PE holding no reference (see the top of this file).
void account(loop& l, std::uint64_t k) {
  if (k == 0) return;
  const bool async = l.async != nullptr;
  const int caller = l.caller_pe;
  loop* self = &l;
  if (l.remaining.fetch_sub(k, std::memory_order_acq_rel) == k && async) send_done(caller, self);
}

// ---- tasks on the deques -----------------------------------------------------------

void note_taken(task* t) {
  if (t->l->scheme == tasks_scheme::adaptive_idle)
    g_node->exposed.fetch_sub(1, std::memory_order_relaxed);
}

void expose(loop& l, std::uint64_t lo, std::uint64_t hi) {
  task* t = take(t_me->free_tasks, g_node->tasks);
  t->l = &l;
  t->lo = lo;
  t->hi = hi;
  if (l.scheme == tasks_scheme::adaptive_idle)
    g_node->exposed.fetch_add(1, std::memory_order_relaxed);
  t_me->deque.push(t);
}

// The newest task of this PE's deque if it belongs to `l` (the owner's pop
// back of what was not stolen); a task of another loop goes back.
task* pop_own_of(const loop& l) {
  std::optional<task*> t = t_me->deque.pop();
  if (!t) return nullptr;
  if ((*t)->l != &l) {
    t_me->deque.push(*t);
    return nullptr;
  }
  note_taken(*t);
  return *t;
}

std::uint64_t next_random(pe_tasks& me) {
  // xorshift64*: victims need to be spread, not unpredictable.
  me.rng ^= me.rng >> 12;
  me.rng ^= me.rng << 25;
  me.rng ^= me.rng >> 27;
  return me.rng * 0x2545F4914F6CDD1Dull;
}

// One task stolen from a random victim of the node (every victim tried once
// from a random start, a few retries on a lost race), or null.
task* steal_one(pe_tasks& me) {
  const int pes = g_node->pes;
  if (pes < 2) return nullptr;
  const int start = int(next_random(me) % std::uint64_t(pes));
  for (int k = 0; k < pes; ++k) {
    pe_tasks& victim = *g_node->pe[std::size_t((start + k) % pes)];
    if (&victim == &me || victim.deque.empty()) continue;
    for (int attempt = 0; attempt < 4; ++attempt) {
      task* t = nullptr;
      const base::steal_status s = victim.deque.steal(t);
      if (s == base::steal_status::success) {
        note_taken(t);
        if (trace::on()) [[unlikely]]
          trace::detail::emit(trace::kind::steal,
                                std::uint32_t(my_pe() - my_rank() + (start + k) % pes), 1, 0, 0);
        return t;
      }
      if (s == base::steal_status::empty) break;
    }
  }
  return nullptr;
}

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
        weft::detail::wake_idle_pes(1);
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
  weft::detail::wake_idle_pes(int(exposed));
  return std::min(hi, lo + part);
}

// adaptive_idle: before each chunk, offer a task to each idle PE that has
// none yet; nothing is created while no PE is idle.
std::uint64_t run_adaptive_idle(loop& l, std::uint64_t lo, std::uint64_t hi) {
  std::uint64_t done = 0;
  for (;;) {
    while (lo < hi) {
      if (l.failed.load(std::memory_order_relaxed)) {
        done += hi - lo;
        break;
      }
      if (hi - lo > l.grain) {
        const int idle = weft::detail::idle_pes();
        if (idle > 0) {
          const int want = idle - g_node->exposed.load(std::memory_order_relaxed);
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

std::uint64_t run_range(loop& l, std::uint64_t lo, std::uint64_t hi) {
  switch (l.scheme) {
    case tasks_scheme::split: return run_split(l, lo, hi);
    case tasks_scheme::adaptive_idle: return run_adaptive_idle(l, lo, hi);
    case tasks_scheme::adaptive_history: return run_adaptive_history(l, lo, hi);
    default: break;
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

// ---- broadcast and static blocks -----------------------------------------------------

std::uint64_t grab_chunks(loop& l) {
  std::uint64_t done = 0;
  for (;;) {
    const std::uint64_t c = l.next_chunk.fetch_add(1, std::memory_order_relaxed);
    if (c >= l.chunks) return done;
    const std::uint64_t lo = c * l.grain, hi = std::min(l.n, lo + l.grain);
    if (!l.failed.load(std::memory_order_relaxed)) run_body(l, lo, hi);
    done += hi - lo;
  }
}

// Block b of pes equal blocks: b * (n / pes) plus the first (n % pes) blocks
// one longer (no overflow for any n).
std::uint64_t block_begin(const loop& l, int b) {
  const std::uint64_t p = std::uint64_t(l.pes), q = l.n / p, rem = l.n % p, ub = std::uint64_t(b);
  return ub * q + std::min(ub, rem);
}

// Claims block b and runs it; returns the iterations accounted (0 if another
// PE had claimed it).
std::uint64_t run_block(loop& l, int b) {
  std::atomic<bool>& claim = l.claimed[std::size_t(b)];
  if (claim.load(std::memory_order_relaxed) || claim.exchange(true, std::memory_order_acq_rel))
    return 0;
  return run_chunks(l, block_begin(l, b), block_begin(l, b + 1));
}

struct block_payload {
  loop* l;
  int block;
};

void on_broadcast(message_ptr m) {
  loop* l = m->as<loop*>();
  account(*l, grab_chunks(*l));
  release(l);
}

void on_block(message_ptr m) {
  const block_payload p = m->as<block_payload>();
  account(*p.l, run_block(*p.l, p.block));
  release(p.l);
}

void on_done(message_ptr m) {
  loop* l = m->as<loop*>();
  if (l->failed.load(std::memory_order_acquire)) {
    try {
      std::rethrow_exception(l->error);
    } catch (const std::exception& e) {
      base::fatal("a body of weft::parallel_for_async threw %s (an asynchronous loop has nobody "
                  "to rethrow it to)",
                  e.what());
    } catch (...) {
      base::fatal("a body of weft::parallel_for_async threw an exception not derived from "
                  "std::exception");
    }
  }
  weft::detail::pending_work_end();
  // finish() may throw: core reports it as this handler's exception.
  struct releaser {
    loop* l;
    ~releaser() { release(l); }
  } r{l};
  l->async->finish();
}

void send_done(int pe, loop* l) {
  send(pe, make_message_with(h_done, l));
}

// Sends the messages of a broadcast or static loop to the PEs of the node
// but `skip_rank`, one reference each.
void send_to_pes(loop& l, int skip_rank, bool blocks) {
  const int pes = g_node->pes;
  for (int r = 0; r < pes; ++r) {
    if (r == skip_rank) continue;
    if (blocks && block_begin(l, r) == block_begin(l, r + 1)) continue;  // empty block
    l.refs.fetch_add(1, std::memory_order_relaxed);
    if (blocks)
      send(my_node() * node_size() + r, make_message_with(h_block, block_payload{&l, r}));
    else
      send(my_node() * node_size() + r, make_message_with(h_broadcast, &l));
  }
}

void prepare_blocks(loop& l) {
  if (l.claimed_size < l.pes) {
    l.claimed = std::make_unique<std::atomic<bool>[]>(std::size_t(l.pes));
    l.claimed_size = l.pes;
  }
  for (int b = 0; b < l.pes; ++b) l.claimed[std::size_t(b)].store(false, std::memory_order_relaxed);
}

// ---- the calls ------------------------------------------------------------------------

struct resolved {
  std::uint64_t grain;
  tasks_scheme scheme;
};

resolved resolve(std::uint64_t n, const for_options& o, const char* fn) {
  // A guest of a PE (an OpenMP thread on a carrier thread: layer threads)
  // works for the node without being one of its PEs: it runs loops alone.
  if ((t_me == nullptr && !weft::detail::on_guest_thread()) || g_node == nullptr)
    throw std::logic_error(std::string("weft::") + fn +
                           " called off a PE: call it from a handler, an entry method, a "
                           "coroutine or the main function of a running node");
  if (o.grain && *o.grain == 0)
    throw std::invalid_argument(std::string("weft::") + fn +
                                ": grain 0; the grain (iterations per chunk) must be at least 1, "
                                "or unset for n / (8 * PEs of the node)");
  const int s = int(o.scheme);
  if (s > int(tasks_scheme::adaptive_history))
    throw std::invalid_argument(std::string("weft::") + fn + ": unknown scheme value " +
                                std::to_string(s) +
                                "; accepted: the weft::tasks_scheme enumerators");
  resolved r;
  r.grain = o.grain ? std::uint64_t(*o.grain)
                    : std::max<std::uint64_t>(1, n / (8 * std::uint64_t(g_node->pes)));
  r.scheme = o.scheme == tasks_scheme::from_option ? g_node->default_scheme : o.scheme;
  return r;
}

// The caller of a synchronous loop, once its own share is done: takes other
// tasks (its loop's first, wherever thieves split them to), claims unclaimed
// static blocks, serves its messages, and otherwise backs off, until the
// loop is over.
void wait_for(loop& l, bool serve) {
  pe_tasks& me = *t_me;
  int quiet = 0;
  while (l.remaining.load(std::memory_order_acquire) != 0) {
    if (l.scheme == tasks_scheme::static_blocks) {
      std::uint64_t done = 0;
      for (int b = 0; b < l.pes; ++b) done += run_block(l, b);
      if (done != 0) {
        account(l, done);
        continue;
      }
    }
    if (task* t = steal_one(me)) {
      run_task(t);
      quiet = 0;
      continue;
    }
    if (std::optional<task*> t = me.deque.pop()) {
      note_taken(*t);
      run_task(*t);
      quiet = 0;
      continue;
    }
    if (serve && t_serving < max_serving_depth) {
      // Handlers served here are not bodies of this loop: a loop they run is
      // shared like any other (run inline, it would keep this PE to itself
      // while the thieves of the outer loop go idle: measured with
      // tasks_imbalance started by one message per element, 1.29x the ideal
      // step instead of 1.02x). Bounded, so that waits nested in served
      // handlers do not serve (and nest) without end.
      serving_guard serving;
      if (weft::detail::serve_messages(16) != 0) {
        quiet = 0;
        continue;
      }
    }
    // Thieves are running the rest: spin a little, then let them have the
    // core (an oversubscribed node has more PEs than cores).
    if (++quiet < 64)
      base::cpu_relax();
    else
      sched_yield();
  }
}

// ---- scheduler hooks and the layer's lifetime -----------------------------------------

int hook_run_tasks(bool idle) {
  pe_tasks* me = t_me;
  if (me == nullptr) return 0;
  if (std::optional<task*> t = me->deque.pop()) {
    note_taken(*t);
    run_task(*t);
    return 1;
  }
  if (!idle) return 0;
  if (task* t = steal_one(*me)) {
    weft::detail::end_idle_period();
    run_task(t);
    return 1;
  }
  return 0;
}

bool hook_tasks_visible() {
  node_tasks* node = g_node;
  if (node == nullptr) return false;
  for (const auto& p : node->pe)
    if (!p->deque.empty()) return true;
  return false;
}

void node_start() {
  auto* n = new node_tasks;
  const runtime_config& cfg = config();
  n->pes = cfg.threads;
  n->default_scheme = parse_scheme(cfg.tasks_scheme);
  for (int r = 0; r < n->pes; ++r) {
    n->pe.push_back(std::make_unique<pe_tasks>());
    n->pe.back()->rng = 0x9e3779b97f4a7c15ull * std::uint64_t(r + 1);
  }
  g_node = n;
}

void pe_start() {
  t_me = g_node->pe[std::size_t(my_rank())].get();
}

void pe_stop() {
  t_me = nullptr;
}

void node_stop() {
  // A run that ended (weft::exit) with an asynchronous loop in progress
  // leaves tasks and descriptors behind: the slabs own them all.
  delete g_node;
  g_node = nullptr;
}

const bool registered = [] {
  h_broadcast = register_handler("tasks.broadcast", &on_broadcast);
  h_block = register_handler("tasks.block", &on_block);
  h_done = register_handler("tasks.done", &on_done);
  weft::detail::register_layer({"tasks", &node_start, &pe_start, &pe_stop, &node_stop});
  weft::detail::set_scheduler_hooks({&hook_run_tasks, &hook_tasks_visible});
  return true;
}();

}  // namespace

namespace detail {

void bad_range(const std::string& first, const std::string& last) {
  throw std::invalid_argument("weft::parallel_for: first (" + first + ") > last (" + last +
                              "); the iterations are [first, last), so first <= last");
}

void run_sync(std::uint64_t n, const for_options& options, loop_body body) {
  const resolved r = resolve(n, options, "parallel_for");
  if (n == 0) return;
  // Nested calls, one PE, a single chunk, or a guest thread (no deque of
  // its own to share from): inline, exceptions propagate as they are.
  if (t_depth > 0 || g_node->pes == 1 || n <= r.grain || t_me == nullptr) {
    depth_guard nested;
    for (std::uint64_t lo = 0; lo < n;) {
      const std::uint64_t hi = std::min(n, lo + r.grain);
      body.run(body.ctx, lo, hi);
      lo = hi;
    }
    return;
  }
  loop* l = new_loop(n, r.grain, r.scheme);
  l->body = body;
  std::uint64_t done = 0;
  switch (r.scheme) {
    case tasks_scheme::broadcast:
      send_to_pes(*l, my_rank(), false);
      done = grab_chunks(*l);
      break;
    case tasks_scheme::static_blocks:
      prepare_blocks(*l);
      send_to_pes(*l, my_rank(), true);
      done = run_block(*l, my_rank());
      break;
    default:
      done = run_range(*l, 0, n);
      break;
  }
  account(*l, done);
  wait_for(*l, options.serve_messages);
  // Moved out, not copied: the last reference may be dropped by a message on
  // another PE, and the exception must then be owned by this thread alone
  // (its reference count is in uninstrumented libstdc++, and the caller reads
  // the exception while that PE would release it).
  std::exception_ptr error = std::move(l->error);
  release(l);
  if (error) std::rethrow_exception(error);
}

void run_async(std::uint64_t n, const for_options& options, std::unique_ptr<async_loop> body) {
  const resolved r = resolve(n, options, "parallel_for_async");
  if (t_me == nullptr)
    throw std::logic_error(
        "weft::parallel_for_async called on a guest of a PE (an OpenMP thread that runs on a "
        "carrier thread, not on a PE: a thread beyond the node's PEs, or of a nested team): "
        "its end is delivered to a PE; call it from thread 0 of the region, or use "
        "weft::parallel_for");
  loop* l = new_loop(n, r.grain, r.scheme);
  l->async = std::move(body);
  // Quiescence must not be found while the loop is pending: it counts as a
  // message until on_done handled it.
  weft::detail::pending_work_begin();
  if (n == 0) {
    send_done(my_pe(), l);
    return;
  }
  switch (r.scheme) {
    case tasks_scheme::broadcast:
      send_to_pes(*l, -1, false);
      break;
    case tasks_scheme::static_blocks:
      prepare_blocks(*l);
      send_to_pes(*l, -1, true);
      break;
    default:
      // One task for the whole range on this PE's deque: this PE's scheduler
      // runs it at its next turn, under the loop's scheme, unless an idle PE
      // steals it first.
      expose(*l, 0, n);
      weft::detail::wake_idle_pes(1);
      break;
  }
}

}  // namespace detail
}  // namespace tasks
}  // namespace weft
