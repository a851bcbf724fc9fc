// Parallel regions, barriers, critical sections, atomics, cancellation: the
// GOMP_* entry points GCC emits for them.
//
// Mutual exclusion (critical, atomic, omp_lock_t) is a word that a thread
// takes with one compare-exchange and waits for with wait_step, so that a
// thread waiting for a lock held by a fiber of its own PE lets that fiber
// run (a blocking mutex there would never be released).
#include <atomic>
#include <cstdint>
#include "omp/gomp_abi.hpp"
#include "omp/omp_internal.hpp"
#include "omp/spin_lock.hpp"
#include "weft/base/error.hpp"

using namespace weft::omp;

namespace {

spin_word g_critical;  // unnamed critical sections
spin_word g_atomic;    // atomics GCC cannot do in hardware

}  // namespace

extern "C" {

WEFT_GOMP void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags) {
  thread_state& me = current();
  run_region(fn, data, team_size_for(me, num_threads), nullptr, nullptr, flags);
}

// parallel reduction(task, ...): the region's implicit tasks all belong to
// one taskgroup holding the registration (GCC combines the copies after
// this returns the team size, and unregisters).
WEFT_GOMP unsigned GOMP_parallel_reductions(void (*fn)(void*), void* data, unsigned num_threads,
                                            unsigned flags) {
  thread_state& me = current();
  const int n = team_size_for(me, num_threads);
  // GCC's arguments start with a pointer to its array.
  taskgroup* g = parallel_reductions_group(*static_cast<std::uintptr_t**>(data), n);
  run_region(
      fn, data, n, [](team& t, void* group) { t.proto.group = static_cast<taskgroup*>(group); }, g,
      flags);
  delete g;
  return unsigned(n);
}

WEFT_GOMP void GOMP_parallel_start(void (*fn)(void*), void* data, unsigned num_threads) {
  thread_state& me = current();
  begin_region(fn, data, team_size_for(me, num_threads));
}

WEFT_GOMP void GOMP_parallel_end() {
  thread_state& me = current();
  if (me.t == nullptr || me.id != 0)
    weft::base::fatal("libweft-omp: GOMP_parallel_end without GOMP_parallel_start on this thread");
  end_region(me.t);
}

WEFT_GOMP void GOMP_barrier() {
  barrier(current());
}

}  // extern "C"

// Cancellation (OMP_CANCELLATION=true; else every entry point is the plain
// construct and nothing is ever cancelled). `which`, as GCC passes it:
// parallel 1, for 2, sections 4, taskgroup 8. What each one cancels, and
// what a cancellation point checks:
//  - parallel: the team (team::cancelled); its cancellable barriers
//    release their waiters and let later arrivals through (true), its
//    tasks not yet started are discarded (task.cpp);
//  - for, sections: the thread's work share (ws_slot::cancelled, reset when
//    the slot is set up for the next construct), or, for a loop GCC
//    schedules inline (no work share), team::ws_cancelled, reset when the
//    barrier at the loop's end opens. Not the construct's end: the
//    *_end_cancel barriers return true for a cancelled region only, as
//    GCC then jumps to the region's end (libgomp the same);
//  - taskgroup: the innermost taskgroup of the running task (me.group; for
//    a work-sharing construct's own taskgroup, the one around it); a
//    cancellation point there checks that group, then, as libgomp does,
//    the region (cancel parallel cancels the region's tasks too).
// Outside any team (an orphaned construct) cancel ends the encountering
// thread's part and cancellation points see nothing.

namespace {

enum : int { cancel_parallel = 1, cancel_loop = 2, cancel_sections = 4, cancel_taskgroup = 8 };

bool cancellation_point(int which) {
  thread_state& me = current();
  team* t = me.t;
  if ((which & (cancel_loop | cancel_sections)) != 0) {
    if (t == nullptr) return false;
    if (me.ws != nullptr) return me.ws->cancelled.load(std::memory_order_acquire);
    return t->ws_cancelled.load(std::memory_order_acquire);
  }
  if ((which & cancel_taskgroup) != 0 && taskgroup_cancelled(me.group)) return true;
  return t != nullptr && t->cancelled.load(std::memory_order_acquire);
}

}  // namespace

extern "C" {

WEFT_GOMP bool GOMP_barrier_cancel() {
  return barrier_cancel(current());
}
WEFT_GOMP bool GOMP_cancellation_point(int which) {
  if (!globals().cancellation) return false;
  return cancellation_point(which);
}
// do_cancel false: the if clause of cancel was false, which leaves a
// cancellation point.
WEFT_GOMP bool GOMP_cancel(int which, bool do_cancel) {
  if (!globals().cancellation) return false;
  if (!do_cancel) return cancellation_point(which);
  thread_state& me = current();
  team* t = me.t;
  if ((which & (cancel_loop | cancel_sections)) != 0) {
    if (me.ws != nullptr)
      me.ws->cancelled.store(true, std::memory_order_release);
    else if (t != nullptr)
      t->ws_cancelled.store(true, std::memory_order_release);
  } else if ((which & cancel_taskgroup) != 0) {
    // A work-sharing construct's own taskgroup (task reductions) is not one
    // the program wrote: the cancel is for the one around it (libgomp the
    // same).
    taskgroup* g = me.group;
    if (g != nullptr && g->workshare && g->outer != nullptr) g = g->outer;
    if (g != nullptr) g->cancelled.store(true, std::memory_order_release);
  } else if (t != nullptr) {  // cancel_parallel
    cancel_region(*t);
  }
  return true;
}

WEFT_GOMP void GOMP_critical_start() {
  lock(g_critical, current());
}
WEFT_GOMP void GOMP_critical_end() {
  unlock(g_critical);
}

// A named critical section: GCC passes a pointer-sized word of its own per
// name (zero at start), which serves as that section's lock word.
WEFT_GOMP void GOMP_critical_name_start(void** pptr) {
  static_assert(sizeof(void*) >= sizeof(spin_word));
  lock(*reinterpret_cast<spin_word*>(pptr), current());
}
WEFT_GOMP void GOMP_critical_name_end(void** pptr) {
  unlock(*reinterpret_cast<spin_word*>(pptr));
}

WEFT_GOMP void GOMP_atomic_start() {
  lock(g_atomic, current());
}
WEFT_GOMP void GOMP_atomic_end() {
  unlock(g_atomic);
}

}  // extern "C"
