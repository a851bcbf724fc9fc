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

using namespace weft::omp;

namespace {

spin_word g_critical;  // unnamed critical sections
spin_word g_atomic;    // atomics GCC cannot do in hardware

}  // namespace

extern "C" {

WEFT_GOMP void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads,
                             unsigned flags) {
  (void)flags;  // proc_bind: weft binds its PEs itself (--weft:bind)
  thread_state& me = current();
  run_region(fn, data, team_size_for(me, num_threads));
}

WEFT_GOMP void GOMP_parallel_start(void (*fn)(void*), void* data, unsigned num_threads) {
  thread_state& me = current();
  begin_region(fn, data, team_size_for(me, num_threads));
}

WEFT_GOMP void GOMP_parallel_end() {
  thread_state& me = current();
  if (me.t == nullptr || me.id != 0) not_implemented("GOMP_parallel_end outside GOMP_parallel_start");
  end_region(me.t);
}

WEFT_GOMP void GOMP_barrier() {
  barrier(current());
}

// Cancellation is never active (OMP_CANCELLATION is not provided): these are
// the plain constructs, and nothing was cancelled.
WEFT_GOMP bool GOMP_barrier_cancel() {
  barrier(current());
  return false;
}
WEFT_GOMP bool GOMP_cancellation_point(int which) {
  (void)which;
  return false;
}
WEFT_GOMP bool GOMP_cancel(int which, bool do_cancel) {
  (void)which;
  if (do_cancel) not_implemented("cancellation (#pragma omp cancel; OMP_CANCELLATION)");
  return false;
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
