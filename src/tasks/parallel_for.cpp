// The tasks layer: parallel_for's engine (docs/tasks.md). This file holds
// the calls -- run_sync and run_async, what they check, how they start a
// loop under its scheme, and the synchronous caller's wait -- and the
// layer's lifetime in the node.
//
// A loop is one `loop` descriptor over iterations [0, n) (loop.hpp, which
// also says how completion is counted). Work on it is exposed in one of two
// ways:
//  - tasks: a `task` names a sub-range of a loop and sits on a PE's
//    Chase-Lev deque (base/chase_lev.hpp). The owner pushes and pops at the
//    bottom; idle PEs of the node steal the oldest at the top (the
//    scheduler_hooks of core call run_tasks each turn, and tasks_visible
//    while backing off). Schemes split, adaptive_idle and adaptive_history
//    (deques.cpp).
//  - messages: one message per PE names the loop; broadcast has every PE
//    grab chunks by atomic increment, static_blocks gives each PE one block.
//    Messages, not tasks, because these schemes mean "when that PE's
//    scheduler gets to it" (messages.cpp).
// Descriptors come from pools (pool.hpp), so that steady state does no
// malloc.
#include "weft/tasks/parallel_for.hpp"

#include <sched.h>
#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include "loop.hpp"
#include "weft/base/cache.hpp"
#include "weft/base/error.hpp"
#include "weft/base/timer.hpp"
#include "weft/core/handler.hpp"

namespace weft {

const char* to_string(tasks_scheme s) noexcept {
  switch (s) {
    case tasks_scheme::from_option:
      return "from-option";
    case tasks_scheme::split:
      return "split";
    case tasks_scheme::broadcast:
      return "broadcast";
    case tasks_scheme::static_blocks:
      return "static";
    case tasks_scheme::adaptive_idle:
      return "adaptive-idle";
    case tasks_scheme::adaptive_history:
      return "adaptive-history";
  }
  return "?";
}

namespace tasks {
namespace internal {

node_tasks* g_node = nullptr;
constinit thread_local pe_tasks* t_me = nullptr;
constinit thread_local int t_depth = 0;

}  // namespace internal

using namespace internal;

namespace {

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

// Waits of synchronous loops that serve messages, nested on this PE's stack.
// While one serves, the handlers it runs start at depth 0 (their loops are
// shared); past max_serving_depth a waiting loop no longer serves.
constexpr int max_serving_depth = 4;

// adaptive_idle: how often a running loop looks at the node's idle count
// (deques.cpp). Short against the transient imbalance it answers (a PE
// idle for a microsecond is offered work then), long against a chunk of an
// empty loop, whose looks at a line every PE writes were what made the
// default scheme slower than the others at 16 PEs.
constexpr double idle_look_ns = 1000;
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
  // static_blocks: blocks before this one are claimed (a claim is never
  // undone), so each is looked at once per loop, not once per round.
  int open_block = 0;
  while (l.remaining.load(std::memory_order_acquire) != 0) {
    if (l.scheme == tasks_scheme::static_blocks && open_block < l.pes) {
      std::uint64_t done = 0;
      for (; open_block < l.pes; ++open_block) done += run_block(l, open_block);
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

// ---- the layer's lifetime -------------------------------------------------------------

void node_start() {
  auto* n = new node_tasks;
  const runtime_config& cfg = config();
  n->pes = cfg.threads;
  n->default_scheme = parse_scheme(cfg.tasks_scheme);
  for (int r = 0; r < n->pes; ++r) {
    n->pe.push_back(std::make_unique<pe_tasks>());
    n->pe.back()->rng = 0x9e3779b97f4a7c15ull * std::uint64_t(r + 1);
    n->pe.back()->rank = r;
  }
  int log2_pes = 0;
  while ((1 << (log2_pes + 1)) <= n->pes) ++log2_pes;
  n->steal_probes = std::max(1, std::min(n->pes - 1, 2 + log2_pes));
  n->visible_words = (n->pes + 63) / 64;
  n->visible = std::make_unique<node_tasks::visible_word[]>(std::size_t(n->visible_words));
  n->idle_look_cycles = std::uint64_t(double(idle_look_ns) / base::ns_per_cycle());
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
  register_handlers();
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
      // A loop's first chunk looks at the idle PEs whenever the last look was.
      t_me->next_idle_look = 0;
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
      publish(1);
      break;
  }
}

}  // namespace detail
}  // namespace tasks
}  // namespace weft
