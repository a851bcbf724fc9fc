// The handler table. A handler is a plain function that consumes a message on
// a PE. Handlers are registered before weft::run starts (static
// initialisation or main); ids are dense indices in registration order, so
// every process of a job built from the same program has the same table.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include "weft/base/export.hpp"
#include "weft/core/config.hpp"
#include "weft/core/message.hpp"

namespace weft {

using handler_fn = void (*)(message_ptr);

// Registers `fn` under `name` (shown in stats, dumps and traces). Any thread,
// before weft::run; registering while a node runs is a fatal error.
WEFT_API handler_id register_handler(const char* name, handler_fn fn);

// Number of registered handlers, and a handler's name ("?" if out of range).
WEFT_API std::size_t num_handlers();
WEFT_API const char* handler_name(handler_id id);

namespace detail {
// Hooks of a layer built on core (objects, tasks, ...), so that its per-PE
// and per-node state lives exactly as long as the node. Registered before
// weft::run, like handlers; each hook may be null.
//  node_start: on the thread in weft::run, before any PE starts;
//  pe_start:   on each PE thread, before its scheduler (and main_fn) runs;
//  pe_stop:    on each PE thread, after its scheduler stopped (other PEs may
//              still be finishing their last handler);
//  node_stop:  on the thread in weft::run, after every PE stopped;
//  main_returned: on PE 0 of node 0, when the main function returned (a
//              coroutine main: when it first suspended), before PE 0 takes
//              its first message; other nodes learn of it only through
//              what the layer sends;
//  fingerprint: a hash of the layer's own registration tables, compared
//              between the processes of a job at startup with core's
//              handler table (processes of different builds refuse to run);
//  stats:      with --weft:stats, after core's tables at the node's end
//              (after node_stop): the layer's own lines.
struct layer_hooks {
  const char* name;
  void (*node_start)();
  void (*pe_start)();
  void (*pe_stop)();
  void (*node_stop)();
  void (*main_returned)() = nullptr;
  std::uint64_t (*fingerprint)() = nullptr;
  void (*stats)(std::FILE* out) = nullptr;
};
WEFT_API void register_layer(const layer_hooks& hooks);

// How a work-sharing layer (tasks) joins the PE scheduler loop without core
// knowing about it. At most one such layer; set before weft::run, like
// handlers. Both functions run on a PE, must not throw, and may be called at
// any scheduler turn, also before the layer's pe_start ran on other PEs.
//  run_tasks:    once per scheduler turn, after the messages; `idle` is true
//                when the turn found no message, timer or network work.
//                Runs at most a little work (one task of the PE's own, or,
//                when idle, one stolen from another PE of the node) and
//                returns how many tasks ran (0 lets the PE go idle).
//  tasks_visible: polled by the idle back-off and checked once more after a
//                PE announced it sleeps (see scheduler.cpp, "wake-up
//                protocol"): true when some PE of the node has exposed tasks
//                this PE could take. A layer that exposes tasks calls
//                wake_idle_pes after publishing them, so either it sees the
//                sleeper or the sleeper sees the tasks.
struct scheduler_hooks {
  int (*run_tasks)(bool idle) = nullptr;
  bool (*tasks_visible)() = nullptr;
};
WEFT_API void set_scheduler_hooks(const scheduler_hooks& hooks);

// --- for the layer behind scheduler_hooks (PE only unless said otherwise) ---
// PEs of this node in an idle period: their last scheduler turn found
// nothing to do, nor did a quick look at their queue of about a
// microsecond after it, and they have not found work since (spinning,
// yielding or asleep). A hint, read relaxed; 0 off a running node.
WEFT_API int idle_pes() noexcept;
// Ends this PE's idle period now (it took a task): idle_pes() stops counting
// it before the task runs, not after.
WEFT_API void end_idle_period() noexcept;
// After a seq_cst publication of tasks: wakes up to `n` sleeping PEs of this
// node (none if nobody sleeps: one fence and one load).
WEFT_API void wake_idle_pes(int n) noexcept;
// The same for a caller that has already ordered its publication before
// this call with a full fence or a seq_cst read-modify-write: no fence.
WEFT_API void wake_idle_pes_fenced(int n) noexcept;
// Cycles (base::cycles) this PE was not idle since it started: handlers,
// the scheduler's own work, the network; only with
// runtime_config::measure_busy (else 0). On a PE (0 elsewhere). The lb
// layer's background load comes from it.
WEFT_API std::uint64_t pe_busy_cycles() noexcept;
// Runs up to `max` messages of this PE's own queue, from inside a handler
// (a synchronous parallel_for serving its messages between chunks). The
// handlers it runs are nested in the caller's. Returns how many ran.
WEFT_API int serve_messages(int max);
// For a logical thread alone on its PE that waits for a message (the mpi
// layer's ranks, --weft:rank-wait=serve): serve_messages, and on a PE that
// polls the network (comm=workers) a turn of the transport when the queue
// was empty, so that a message from another process reaches the waiter
// without a context switch. Returns how many messages ran, or -1 where the
// PE has work only its loop does (timers, conditions, the node's queue,
// the end of the run): the waiter then suspends.
WEFT_API int serve_while_waiting(int max);
// Work that is not a message but must keep quiescence detection from firing
// while it is pending (an asynchronous loop): begin counts as a message sent
// by this PE, end as one handled by this PE (any PE of the node).
WEFT_API void pending_work_begin() noexcept;
WEFT_API void pending_work_end() noexcept;

// --- for the threads layer: carriers, OS threads that run a logical thread
// in a PE's place, bound to its CPUs (weft/threads/ult.hpp). PE numbers
// here are node-local ranks. Any thread; no-ops or 0 when no node runs.
// A carrier of PE `rank` became runnable (delta +1) or blocked (-1): while
// one is runnable, the PE's idle back-off yields instead of spinning.
WEFT_API void add_pe_guests(int rank, int delta) noexcept;
// Whether a carrier of PE `rank` is runnable now (a hint, read relaxed).
WEFT_API bool pe_has_guests(int rank) noexcept;
// PE `rank`'s progress: the messages it handled, times two, plus one while
// it is inside a handler. Two equal odd readings some time apart: the PE
// stayed inside one handler all that time.
WEFT_API std::uint64_t pe_progress(int rank) noexcept;
// The CPU time PE `rank`'s thread has used, in ns (0 if unknown): tells a
// PE that stays inside a handler because it runs from one that is merely
// not scheduled (a loaded machine).
WEFT_API std::uint64_t pe_cpu_time_ns(int rank) noexcept;
// Whether PE `rank`'s thread sleeps in the kernel now (a lock, a read, a
// sleep: /proc's state S or D) rather than running or waiting for a CPU.
// A system call or two; for slow paths.
WEFT_API bool pe_blocked(int rank) noexcept;
// A carrier is a *guest* of its PE: it has the PE's identity (my_pe,
// my_rank, node_size answer as on the PE, for the code it runs) but none of
// its state -- it is not a PE: calls that need a PE's own state (its
// timers, the objects and tasks layers) refuse or run without the PE, and
// its sends take the path of threads that are not PEs. enter_guest: the
// calling thread (not a PE) becomes a guest of PE `rank` of the running
// node; leave_guest: no longer.
WEFT_API void enter_guest(int rank);
WEFT_API void leave_guest() noexcept;
// True on a guest thread.
WEFT_API bool on_guest_thread() noexcept;
// The CPU PE `rank` is bound to (-1: unbound).
WEFT_API int pe_cpu(int rank) noexcept;

// A node for a program that never calls weft::run (libweft-omp started
// from a plain OpenMP program's first parallel region): PEs 1..N-1 run on
// threads of their own; the calling thread becomes PE 0 but runs no
// scheduler loop of its own: it handles its messages only inside calls
// that serve them (serve_messages, as a PE waiting in a parallel region
// does), and otherwise goes on with the program. It stays bound to PE 0's
// CPU until the node stops. Only one node at a time, as with weft::run.
//  start_attached_node: the calling thread, which must not be a PE;
//  stop_attached_node:  the same thread; ends the node (weft::exit(0)),
//                       joins its PEs and returns the exit code.
WEFT_API void start_attached_node(const runtime_config& cfg);
// Whether a node runs in this process (weft::run or attached). Any thread.
WEFT_API bool node_runs() noexcept;
WEFT_API bool attached_node_runs() noexcept;
WEFT_API int stop_attached_node();
}  // namespace detail

}  // namespace weft
