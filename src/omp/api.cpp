// The omp_* runtime library routines (OpenMP 5.0, chapter 3) that codes
// use, with the C calling convention and the types of GCC's <omp.h>
// (omp_lock_t: 4 bytes; omp_nest_lock_t: 8 + sizeof(void*) bytes).
//
// Device and teams routines answer as a host-only runtime does (no device;
// one league of one team).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "omp/gomp_abi.hpp"
#include "omp/omp_internal.hpp"
#include "omp/spin_lock.hpp"
#include "weft/base/topology.hpp"
#include "weft/core/pe.hpp"
#include "weft/core/run.hpp"
#include "weft/core/send.hpp"

using namespace weft::omp;

namespace {

// PEs a region would get: the node's, or those a node started now would
// have (WEFT_THREADS, else OMP_NUM_THREADS, else the CPUs we may run on).
int available_pes() {
  if (weft::threads::current_pe() >= 0) return weft::threads::node_pes();
  if (weft::detail::node_runs()) return 1;  // a thread of the program's own
  if (const char* v = std::getenv("WEFT_THREADS"); v != nullptr && std::atoi(v) > 0)
    return std::atoi(v);
  if (globals().initial.nthreads > 0) return globals().initial.nthreads;
  return std::max<int>(1, int(weft::base::topology::get().allowed().size()));
}

const thread_state* ancestor(int level) {
  const thread_state* x = &current();
  if (level < 0 || level > x->level) return nullptr;
  while (x != nullptr && x->level > level) x = x->parent;
  return x;
}

// The owner is read by threads that do not hold the lock (to tell a
// re-entry from a wait), so it is atomic; the count belongs to the owner.
struct nest_lock {
  spin_word word;
  int count;
  std::atomic<void*> owner;
};

void* lock_owner() {
  thread_state& me = current();
  return me.task != nullptr ? static_cast<void*>(me.task) : static_cast<void*>(&me);
}

}  // namespace

extern "C" {

// ---- threads and teams -----------------------------------------------------------------

WEFT_GOMP int omp_get_thread_num() {
  const thread_state& me = current();
  return me.t != nullptr ? me.id : 0;
}
WEFT_GOMP int omp_get_num_threads() {
  const thread_state& me = current();
  return me.t != nullptr ? me.t->size : 1;
}
// The first element of nthreads-var (OpenMP 5.1, 3.2.3), also where a
// region would run inactive: programs size per-thread arrays with it inside
// a region, and index them by the enclosing team's thread numbers.
WEFT_GOMP int omp_get_max_threads() {
  const thread_state& me = current();
  const int n = me.icv.nthreads > 0 ? me.icv.nthreads : available_pes();
  return std::max(1, std::min(n, me.icv.thread_limit));
}
WEFT_GOMP void omp_set_num_threads(int n) {
  if (n > 0) icv_for_write(current()).nthreads = n;
}
WEFT_GOMP int omp_in_parallel() {
  return current().active_level > 0 ? 1 : 0;
}
WEFT_GOMP int omp_get_num_procs() {
  return std::max<int>(1, int(weft::base::topology::get().allowed().size()));
}
WEFT_GOMP int omp_get_level() {
  return current().level;
}
WEFT_GOMP int omp_get_active_level() {
  return current().active_level;
}
WEFT_GOMP int omp_get_ancestor_thread_num(int level) {
  const thread_state* x = ancestor(level);
  if (x == nullptr) return -1;
  return x->t != nullptr ? x->id : 0;
}
WEFT_GOMP int omp_get_team_size(int level) {
  const thread_state* x = ancestor(level);
  if (x == nullptr) return -1;
  return x->t != nullptr ? x->t->size : 1;
}
WEFT_GOMP int omp_get_thread_limit() {
  return current().icv.thread_limit;
}
WEFT_GOMP void omp_set_dynamic(int v) {
  icv_for_write(current()).dynamic = v != 0;
}
WEFT_GOMP int omp_get_dynamic() {
  return current().icv.dynamic ? 1 : 0;
}
// Nested parallelism is the max-active-levels ICV; these set and read it
// through the old interface.
WEFT_GOMP void omp_set_nested(int v) {
  icvs& icv = icv_for_write(current());
  if (v != 0)
    icv.max_active_levels = 1 << 20;
  else if (icv.max_active_levels > 1)
    icv.max_active_levels = 1;
}
// Whether a region met now could be active and nested in another.
WEFT_GOMP int omp_get_nested() {
  const thread_state& me = current();
  return me.icv.max_active_levels > 1 && me.icv.max_active_levels > me.active_level ? 1 : 0;
}
WEFT_GOMP void omp_set_max_active_levels(int n) {
  if (n >= 0) icv_for_write(current()).max_active_levels = std::min(n, 1 << 20);
}
WEFT_GOMP int omp_get_max_active_levels() {
  return current().icv.max_active_levels;
}
WEFT_GOMP int omp_get_supported_active_levels() {
  return 1 << 20;
}
WEFT_GOMP int omp_in_final() {
  const thread_state& me = current();
  return me.in_final ? 1 : 0;
}
WEFT_GOMP int omp_get_cancellation() {
  return globals().cancellation ? 1 : 0;
}
WEFT_GOMP int omp_get_max_task_priority() {
  return 0;
}

// omp_sched_t: static 1, dynamic 2, guided 3, auto 4, monotonic flag 0x80000000.
WEFT_GOMP void omp_set_schedule(int kind, int chunk) {
  icvs& icv = icv_for_write(current());
  const int k = kind & 0x7fffffff;
  if (k < sched_static || k > sched_auto) return;
  icv.run_sched = k;
  icv.run_chunk = chunk >= 1 ? chunk : (k == sched_static ? 0 : 1);
  // OpenMP's kinds only: --weft:omp-scheme decides again.
  icv.run_scheme = scheme_option;
  icv.run_part = 1;
}
WEFT_GOMP void omp_get_schedule(int* kind, int* chunk) {
  const icvs& icv = current().icv;
  *kind = icv.run_sched;
  *chunk = int(icv.run_chunk);
}

// ---- devices: the host only (target.cpp has teams and target regions)
// -------------------------------------------------

WEFT_GOMP int omp_get_num_devices() {
  return 0;
}
WEFT_GOMP int omp_get_default_device() {
  return 0;
}
WEFT_GOMP void omp_set_default_device(int) {}
WEFT_GOMP int omp_is_initial_device() {
  return 1;
}
WEFT_GOMP int omp_get_initial_device() {
  return 0;
}

// ---- the error directive at execution (OpenMP 5.1) ----------------------------------

namespace {
// GCC passes the message with its length, or a C string with length -1,
// or none.
void error_directive(const char* kind, const char* msg, std::size_t len) {
  if (msg == nullptr)
    std::fprintf(stderr, "weft: %serror directive encountered\n", kind);
  else if (len == std::size_t(-1))
    std::fprintf(stderr, "weft: %serror directive encountered: %s\n", kind, msg);
  else
    std::fprintf(stderr, "weft: %serror directive encountered: %.*s\n", kind, int(len), msg);
}
}  // namespace

// severity(warning): the program goes on.
WEFT_GOMP void GOMP_warning(const char* msg, std::size_t len) {
  error_directive("", msg, len);
}
// severity(fatal): the job ends, with libgomp's exit code.
WEFT_GOMP void GOMP_error(const char* msg, std::size_t len) {
  error_directive("fatal ", msg, len);
  std::fflush(stderr);
  std::exit(EXIT_FAILURE);
}

// ---- time ------------------------------------------------------------------------------

WEFT_GOMP double omp_get_wtime() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}
WEFT_GOMP double omp_get_wtick() {
  return 1e-9;
}

// ---- locks -----------------------------------------------------------------------------

WEFT_GOMP void omp_init_lock(void* l) {
  new (l) spin_word(0);
}
WEFT_GOMP void omp_init_lock_with_hint(void* l, int) {
  omp_init_lock(l);
}
WEFT_GOMP void omp_destroy_lock(void*) {}
WEFT_GOMP void omp_set_lock(void* l) {
  lock(*static_cast<spin_word*>(l), current());
}
WEFT_GOMP void omp_unset_lock(void* l) {
  unlock(*static_cast<spin_word*>(l));
}
WEFT_GOMP int omp_test_lock(void* l) {
  return try_lock(*static_cast<spin_word*>(l)) ? 1 : 0;
}

static_assert(sizeof(nest_lock) <= 8 + sizeof(void*), "omp_nest_lock_t of GCC's <omp.h>");

WEFT_GOMP void omp_init_nest_lock(void* l) {
  auto* n = static_cast<nest_lock*>(l);
  new (&n->word) spin_word(0);
  n->count = 0;
  new (&n->owner) std::atomic<void*>(nullptr);
}
WEFT_GOMP void omp_init_nest_lock_with_hint(void* l, int) {
  omp_init_nest_lock(l);
}
WEFT_GOMP void omp_destroy_nest_lock(void*) {}
WEFT_GOMP void omp_set_nest_lock(void* l) {
  auto* n = static_cast<nest_lock*>(l);
  void* me = lock_owner();
  if (n->owner.load(std::memory_order_relaxed) == me) {
    ++n->count;
    return;
  }
  lock(n->word, current());
  n->owner.store(me, std::memory_order_relaxed);
  n->count = 1;
}
WEFT_GOMP void omp_unset_nest_lock(void* l) {
  auto* n = static_cast<nest_lock*>(l);
  if (--n->count == 0) {
    n->owner.store(nullptr, std::memory_order_relaxed);
    unlock(n->word);
  }
}
WEFT_GOMP int omp_test_nest_lock(void* l) {
  auto* n = static_cast<nest_lock*>(l);
  void* me = lock_owner();
  if (n->owner.load(std::memory_order_relaxed) == me) return ++n->count;
  if (!try_lock(n->word)) return 0;
  n->owner.store(me, std::memory_order_relaxed);
  n->count = 1;
  return 1;
}

}  // extern "C"
