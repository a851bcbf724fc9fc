// Work-sharing constructs: loops (static, dynamic, guided, runtime, auto;
// long and unsigned long long iteration spaces; ordered), sections, single.
// The GOMP_* entry points as GCC lowers these constructs.
//
// A construct's shared state is a ws_slot of the team's ring (see
// omp_internal.hpp); loops count iterations 0..trips-1 and map them back to
// the user's start + k * incr only when handing a chunk out, so that no
// bound or step can overflow. Dynamic chunks are one fetch_add; guided ones
// a compare-exchange of the next iteration.
//
// Ordered loops: every chunk gets a sequence number in iteration order
// (dynamic: its index; static: its block or round-robin index); a thread
// runs its chunk's ordered regions once the team's turn counter reaches its
// number, and passes the turn on when it asks for its next chunk or leaves
// the loop -- so ordered regions run in iteration order, one chunk after
// another.
#include <algorithm>
#include <cstdint>
#include "omp/gomp_abi.hpp"
#include "omp/omp_internal.hpp"
#include "weft/base/cache.hpp"

namespace weft::omp {

namespace {

int team_size(const thread_state& me) {
  return me.t != nullptr ? me.t->size : 1;
}

// Takes slot `s` for construct `id`, which `joined` threads entered so far.
void open_slot(ws_slot& s, unsigned id, int joined) {
  s.busy = true;
  s.id = id;
  s.joined = joined;
  s.left = 0;
  s.cancelled.store(false, std::memory_order_relaxed);
  s.scheme.kind = 0;
}

// The slot of the next construct this thread meets; `init` runs, under the
// slot's lock, for the first thread to arrive (first = true).
template <class Init>
ws_slot& enter(thread_state& me, bool& first, Init init) {
  if (me.t == nullptr) {
    // An orphaned construct met outside any region: a team of one.
    static thread_local ws_slot solo;
    open_slot(solo, me.ws_next++, 1);
    init(solo);
    first = true;
    me.ws = &solo;
    return solo;
  }
  const unsigned i = me.ws_next++;
  ws_slot& s = me.t->ring[i % ws_ring];
  wait_until(me, [&] {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.busy && s.id == i) {
      ++s.joined;
      first = false;
      return true;
    }
    if (!s.busy) {
      open_slot(s, i, 1);
      init(s);
      first = true;
      return true;
    }
    return false;  // still holds the construct ws_ring before: a thread lags behind
  });
  me.ws = &s;
  return s;
}

void leave(thread_state& me) {
  ws_slot* s = me.ws;
  me.ws = nullptr;
  if (s == nullptr || me.t == nullptr) return;
  std::lock_guard<std::mutex> lock(s->mutex);
  if (++s->left == me.t->size) {
    s->busy = false;
    if (s->doacross.active) s->doacross.release();
  }
}

// ---- iteration spaces -----------------------------------------------------------

// Iterations of [start, end) by incr (either sign), as GCC passes them.
long trips_of(long start, long end, long incr) {
  using u = unsigned long;
  if (incr > 0) return end > start ? long((u(end) - u(start) + u(incr) - 1) / u(incr)) : 0;
  if (incr < 0) return start > end ? long((u(start) - u(end) + u(-incr) - 1) / u(-incr)) : 0;
  return 0;
}

unsigned long long trips_of_ull(bool up, unsigned long long start, unsigned long long end,
                                unsigned long long incr) {
  if (up) return end > start ? (end - start + incr - 1) / incr : 0;
  const unsigned long long step = -incr;  // incr is negative, two's complement
  return start > end ? (start - end + step - 1) / step : 0;
}

// The loop's parameters, in the slot. Iterations are counted in `end`
// (trips) and `next` (handed out); ull loops likewise in the ull fields.
void init_loop(ws_slot& s, int sched, long start, long end, long incr, long chunk) {
  s.sched = sched;
  s.start = start;
  s.incr = incr;
  s.end = trips_of(start, end, incr);
  s.chunk = chunk;
  s.next.store(0, std::memory_order_relaxed);
  s.ordered_turn.store(0, std::memory_order_relaxed);
}

void init_loop_ull(ws_slot& s, int sched, bool up, unsigned long long start, unsigned long long end,
                   unsigned long long incr, unsigned long long chunk) {
  s.sched = sched;
  s.up = up;
  s.start_ull = start;
  s.incr_ull = incr;
  s.end_ull = trips_of_ull(up, start, end, incr);
  s.chunk_ull = chunk;
  s.next_ull.store(0, std::memory_order_relaxed);
  s.ordered_turn.store(0, std::memory_order_relaxed);
}

int effective(int sched, long& chunk, const thread_state& me) {
  sched &= ~sched_monotonic;  // the flag changes nothing here but the loop schemes
  if (sched == 0) {           // runtime
    sched = me.icv.run_sched;
    chunk = me.icv.run_chunk;
  }
  if (sched == sched_auto) sched = sched_static, chunk = 0;
  if (sched != sched_static && chunk < 1) chunk = 1;
  return sched;
}

// Passes the ordered turn on once this thread's chunk had it.
void release_ordered(thread_state& me) {
  if (me.ordered_seq < 0 || me.ws == nullptr) return;
  ws_slot& s = *me.ws;
  const long seq = me.ordered_seq;
  wait_until(me, [&] { return s.ordered_turn.load(std::memory_order_acquire) == seq; });
  s.ordered_turn.store(seq + 1, std::memory_order_release);
  me.ordered_seq = -1;
}

// The next chunk [lo, hi) of trips, in iteration numbers; false when none.
// `seq`: its ordered sequence number.
template <class T>
bool next_chunk(thread_state& me, ws_slot& s, std::atomic<T>& next, T trips, T chunk, T& lo, T& hi,
                long& seq) {
  const int n = team_size(me);
  switch (s.sched) {
    case sched_static: {
      const T nt = T(n), id = T(me.t != nullptr ? me.id : 0);
      if (chunk == 0) {
        if (me.static_trip++ != 0) return false;
        const T q = trips / nt, r = trips % nt;
        lo = id * q + std::min(id, r);
        hi = lo + q + (id < r ? 1 : 0);
        seq = long(id);
        return lo < hi;
      }
      const T k = id + T(me.static_trip++) * nt;
      if (k >= (trips + chunk - 1) / chunk) return false;
      lo = k * chunk;
      hi = std::min(trips, lo + chunk);
      seq = long(k);
      return true;
    }
    case sched_guided: {
      T cur = next.load(std::memory_order_relaxed);
      for (;;) {
        if (cur >= trips) return false;
        const T left = trips - cur;
        T q = (left + T(n) - 1) / T(n);
        if (q < chunk) q = chunk;
        const T end = left > q ? cur + q : trips;
        if (next.compare_exchange_weak(cur, end, std::memory_order_relaxed)) {
          lo = cur;
          hi = end;
          seq = -1;  // ordered guided loops run as dynamic ones (see below)
          return true;
        }
      }
    }
    default: {  // dynamic
      const T at = next.fetch_add(chunk, std::memory_order_relaxed);
      if (at >= trips) return false;
      lo = at;
      hi = std::min(trips, at + chunk);
      seq = long(at / chunk);
      return true;
    }
  }
}

bool hand_out(thread_state& me, long* istart, long* iend, bool ordered) {
  ws_slot& s = *me.ws;
  if (s.scheme.kind != 0) {  // never ordered
    unsigned long long a = 0, b = 0;
    if (!scheme_next(me, s, a, b)) return false;
    *istart = s.start + long(a) * s.incr;
    *iend = s.start + long(b) * s.incr;
    return true;
  }
  if (ordered) release_ordered(me);
  long lo = 0, hi = 0, seq = -1;
  if (!next_chunk<long>(me, s, s.next, s.end, s.chunk, lo, hi, seq)) return false;
  *istart = s.start + lo * s.incr;
  *iend = s.start + hi * s.incr;
  if (ordered) me.ordered_seq = seq;
  return true;
}

bool hand_out_ull(thread_state& me, unsigned long long* istart, unsigned long long* iend,
                  bool ordered) {
  ws_slot& s = *me.ws;
  if (s.scheme.kind != 0) {
    unsigned long long a = 0, b = 0;
    if (!scheme_next(me, s, a, b)) return false;
    *istart = s.start_ull + a * s.incr_ull;
    *iend = s.start_ull + b * s.incr_ull;
    return true;
  }
  if (ordered) release_ordered(me);
  unsigned long long lo = 0, hi = 0;
  long seq = -1;
  if (!next_chunk<unsigned long long>(me, s, s.next_ull, s.end_ull, s.chunk_ull, lo, hi, seq))
    return false;
  *istart = s.start_ull + lo * s.incr_ull;
  *iend = s.start_ull + hi * s.incr_ull;
  if (ordered) me.ordered_seq = seq;
  return true;
}

// What GCC 9+'s generic entry points may add to a work share: task
// reductions (reduction(task, ...)), and memory every thread of the
// construct shares (lastprivate(conditional: ...)), zeroed.
struct ws_extras {
  std::uintptr_t* reductions = nullptr;
  void** mem = nullptr;
};

// Before entering the construct: its task reductions get a taskgroup.
void extras_begin(thread_state& me, const ws_extras* x) {
  if (x != nullptr && x->reductions != nullptr) workshare_taskgroup_start(me);
}

// The first thread, under the slot's lock: registers the reductions (the
// memory every thread's copies share) and makes the memory.
void extras_init(thread_state& me, ws_slot& s, const ws_extras* x) {
  if (x == nullptr) return;
  if (x->reductions != nullptr) {
    workshare_reductions_register(me, x->reductions, nullptr);
    s.task_reductions = x->reductions;
  }
  if (x->mem != nullptr) {
    const auto bytes = reinterpret_cast<std::uintptr_t>(*x->mem);
    s.mem.assign(std::max<std::size_t>(1, (bytes + sizeof(long long) - 1) / sizeof(long long)), 0);
  }
}

// Every thread once it entered: the others share the first's registration.
void extras_join(thread_state& me, ws_slot& s, const ws_extras* x, bool first) {
  if (x == nullptr) return;
  if (x->reductions != nullptr && !first)
    workshare_reductions_register(me, x->reductions, s.task_reductions);
  if (x->mem != nullptr) *x->mem = s.mem.data();
}

// A thread's start of a new loop: the team's work-sharing slot, set up by
// the first thread to arrive (`init`, then the extras: reductions,
// lastprivate), and the thread's own loop position reset.
template <class Init>
void join_loop(thread_state& me, const ws_extras* x, Init init) {
  extras_begin(me, x);
  bool first = false;
  ws_slot& slot = enter(me, first, [&](ws_slot& s) {
    init(s);
    extras_init(me, s, x);
  });
  extras_join(me, slot, x, first);
  me.static_trip = 0;
  me.ordered_seq = -1;
}

// The call site of a loop GCC schedules at run time (the return address of
// its start call): the history scheme's key.
const void* site_or(const void* site, const thread_state& me) {
  if (site != nullptr || me.t == nullptr) return site;
  return reinterpret_cast<const void*>(me.t->fn);
}

bool loop_start(int sched, long start, long end, long incr, long chunk, long* istart, long* iend,
                bool ordered = false, const ws_extras* x = nullptr, const void* site = nullptr) {
  thread_state& me = current();
  const int requested = sched;
  sched = effective(sched, chunk, me);
  // Ordered guided loops run dynamic: their chunks then have sequence numbers.
  if (ordered && sched == sched_guided) sched = sched_dynamic;
  unsigned long long part = 1;
  const int kind = loop_scheme_of(requested, sched, chunk, ordered, me, part);
  join_loop(me, x, [&](ws_slot& s) {
    init_loop(s, sched, start, end, incr, chunk);
    scheme_init(s, team_size(me), (unsigned long long)s.end, kind, part, site_or(site, me));
  });
  if (istart == nullptr) return true;  // GCC schedules it (GOMP_loop_start)
  return hand_out(me, istart, iend, ordered);
}

bool loop_start_ull(int sched, bool up, unsigned long long start, unsigned long long end,
                    unsigned long long incr, unsigned long long chunk, unsigned long long* istart,
                    unsigned long long* iend, bool ordered = false, const ws_extras* x = nullptr,
                    const void* site = nullptr) {
  thread_state& me = current();
  long c = long(chunk);
  const int requested = sched;
  sched = effective(sched, c, me);
  if (ordered && sched == sched_guided) sched = sched_dynamic;
  unsigned long long part = 1;
  const int kind = loop_scheme_of(requested, sched, c, ordered, me, part);
  join_loop(me, x, [&](ws_slot& s) {
    init_loop_ull(s, sched, up, start, end, incr, (unsigned long long)c);
    scheme_init(s, team_size(me), s.end_ull, kind, part, site_or(site, me));
  });
  if (istart == nullptr) return true;  // GCC schedules it (GOMP_loop_ull_start)
  return hand_out_ull(me, istart, iend, ordered);
}

bool loop_next(long* istart, long* iend) {
  thread_state& me = current();
  return hand_out(me, istart, iend, me.ordered_seq >= 0);
}

bool loop_next_ull(unsigned long long* istart, unsigned long long* iend) {
  thread_state& me = current();
  return hand_out_ull(me, istart, iend, me.ordered_seq >= 0);
}

void loop_end(bool wait) {
  thread_state& me = current();
  release_ordered(me);
  leave(me);
  if (wait) barrier(me);
}

// A combined parallel construct: the team's first work share is the loop
// (or the sections), ready before any thread runs, so that the region's
// body starts with GOMP_loop_*_next (GOMP_sections_next).
struct combined_loop {
  int sched;
  long start, end, incr, chunk;
  int scheme = 0;
  unsigned long long part = 1;
};

void prepare_loop(team& t, void* ctx) {
  const auto* c = static_cast<const combined_loop*>(ctx);
  ws_slot& s = t.ring[0];
  open_slot(s, 0, t.size);
  init_loop(s, c->sched, c->start, c->end, c->incr, c->chunk);
  // The outlined function is the loop's call site.
  scheme_init(s, t.size, (unsigned long long)s.end, c->scheme, c->part,
              reinterpret_cast<const void*>(t.fn));
  t.proto.ws_next = 1;
  t.proto.ws = &s;
  t.proto.static_trip = 0;
  t.proto.ordered_seq = -1;
}

// begin_only: GCC before 4.9's *_start form, whose caller runs thread 0's
// body itself and ends the region with GOMP_parallel_end.
void parallel_loop(void (*fn)(void*), void* data, unsigned num_threads, int sched, long start,
                   long end, long incr, long chunk, unsigned flags, bool begin_only = false) {
  thread_state& me = current();
  combined_loop c{0, start, end, incr, chunk};
  c.sched = effective(sched, c.chunk, me);
  c.scheme = loop_scheme_of(sched, c.sched, c.chunk, false, me, c.part);
  const int n = team_size_for(me, num_threads);
  if (begin_only)
    begin_region(fn, data, n, &prepare_loop, &c, flags);
  else
    run_region(fn, data, n, &prepare_loop, &c, flags);
}

void prepare_sections(team& t, void* ctx) {
  ws_slot& s = t.ring[0];
  open_slot(s, 0, t.size);
  s.sections = *static_cast<unsigned*>(ctx);
  s.section.store(1, std::memory_order_relaxed);
  t.proto.ws_next = 1;
  t.proto.ws = &s;
}

unsigned next_section(thread_state& me) {
  ws_slot& s = *me.ws;
  const unsigned k = s.section.fetch_add(1, std::memory_order_relaxed);
  return k <= s.sections ? k : 0;
}

}  // namespace

// Doacross loops (omp_internal.hpp): plain loops over 0..trips-1 for
// GOMP_loop_*_next, with no loop scheme (open_slot left it off).
bool doacross_loop_start(int sched, long chunk, long trips, long* istart, long* iend,
                         std::uintptr_t* reductions, void** mem, doacross_init init, void* ctx) {
  thread_state& me = current();
  sched = effective(sched, chunk, me);
  const ws_extras x{reductions, mem};
  join_loop(me, &x, [&](ws_slot& s) {
    init_loop(s, sched, 0, trips, 1, chunk);
    init(me, s, ctx);
  });
  return hand_out(me, istart, iend, false);
}

bool doacross_loop_start_ull(int sched, unsigned long long chunk, unsigned long long trips,
                             unsigned long long* istart, unsigned long long* iend,
                             std::uintptr_t* reductions, void** mem, doacross_init init,
                             void* ctx) {
  thread_state& me = current();
  long c = long(chunk);
  sched = effective(sched, c, me);
  const ws_extras x{reductions, mem};
  join_loop(me, &x, [&](ws_slot& s) {
    init_loop_ull(s, sched, true, 0, trips, 1, (unsigned long long)c);
    init(me, s, ctx);
  });
  return hand_out_ull(me, istart, iend, false);
}

}  // namespace weft::omp

// ---- the entry points ----------------------------------------------------------------

using namespace weft::omp;

extern "C" {

// Loops over long.
#define WEFT_LOOP_KIND(kind, sched_value)                                                       \
  WEFT_GOMP bool GOMP_loop_##kind##_start(long start, long end, long incr, long chunk,          \
                                          long* istart, long* iend) {                           \
    return loop_start(sched_value, start, end, incr, chunk, istart, iend);                      \
  }                                                                                             \
  WEFT_GOMP bool GOMP_loop_##kind##_next(long* istart, long* iend) {                            \
    return loop_next(istart, iend);                                                             \
  }                                                                                             \
  WEFT_GOMP bool GOMP_loop_ull_##kind##_start(                                                  \
      bool up, unsigned long long start, unsigned long long end, unsigned long long incr,       \
      unsigned long long chunk, unsigned long long* istart, unsigned long long* iend) {         \
    return loop_start_ull(sched_value, up, start, end, incr, chunk, istart, iend);              \
  }                                                                                             \
  WEFT_GOMP bool GOMP_loop_ull_##kind##_next(unsigned long long* istart,                        \
                                             unsigned long long* iend) {                        \
    return loop_next_ull(istart, iend);                                                         \
  }                                                                                             \
  WEFT_GOMP bool GOMP_loop_ordered_##kind##_start(long start, long end, long incr, long chunk,  \
                                                  long* istart, long* iend) {                   \
    return loop_start(sched_value, start, end, incr, chunk, istart, iend, true);                \
  }                                                                                             \
  WEFT_GOMP bool GOMP_loop_ordered_##kind##_next(long* istart, long* iend) {                    \
    return loop_next(istart, iend);                                                             \
  }                                                                                             \
  WEFT_GOMP bool GOMP_loop_ull_ordered_##kind##_start(                                          \
      bool up, unsigned long long start, unsigned long long end, unsigned long long incr,       \
      unsigned long long chunk, unsigned long long* istart, unsigned long long* iend) {         \
    return loop_start_ull(sched_value, up, start, end, incr, chunk, istart, iend, true);        \
  }                                                                                             \
  WEFT_GOMP bool GOMP_loop_ull_ordered_##kind##_next(unsigned long long* istart,                \
                                                     unsigned long long* iend) {                \
    return loop_next_ull(istart, iend);                                                         \
  }                                                                                             \
  WEFT_GOMP void GOMP_parallel_loop_##kind(void (*fn)(void*), void* data, unsigned num_threads, \
                                           long start, long end, long incr, long chunk,         \
                                           unsigned flags) {                                    \
    parallel_loop(fn, data, num_threads, sched_value, start, end, incr, chunk, flags);          \
  }

WEFT_LOOP_KIND(static, sched_static)
WEFT_LOOP_KIND(dynamic, sched_dynamic)
WEFT_LOOP_KIND(guided, sched_guided)
WEFT_LOOP_KIND(nonmonotonic_dynamic, sched_dynamic)
WEFT_LOOP_KIND(nonmonotonic_guided, sched_guided)
#undef WEFT_LOOP_KIND

// schedule(runtime): the kind and chunk come from the run-sched ICV. The
// plain entries are GCC's schedule(monotonic:runtime), which no loop scheme
// keeps (a thread's chunks in increasing order): sched_monotonic says so.
WEFT_GOMP bool GOMP_loop_runtime_start(long start, long end, long incr, long* istart, long* iend) {
  return loop_start(sched_monotonic, start, end, incr, 0, istart, iend, false, nullptr,
                    __builtin_return_address(0));
}
WEFT_GOMP bool GOMP_loop_runtime_next(long* istart, long* iend) {
  return loop_next(istart, iend);
}
WEFT_GOMP bool GOMP_loop_nonmonotonic_runtime_start(long start, long end, long incr, long* istart,
                                                    long* iend) {
  return loop_start(0, start, end, incr, 0, istart, iend, false, nullptr,
                    __builtin_return_address(0));
}
WEFT_GOMP bool GOMP_loop_nonmonotonic_runtime_next(long* istart, long* iend) {
  return loop_next(istart, iend);
}
WEFT_GOMP bool GOMP_loop_maybe_nonmonotonic_runtime_start(long start, long end, long incr,
                                                          long* istart, long* iend) {
  return loop_start(0, start, end, incr, 0, istart, iend, false, nullptr,
                    __builtin_return_address(0));
}
WEFT_GOMP bool GOMP_loop_maybe_nonmonotonic_runtime_next(long* istart, long* iend) {
  return loop_next(istart, iend);
}
WEFT_GOMP bool GOMP_loop_ordered_runtime_start(long start, long end, long incr, long* istart,
                                               long* iend) {
  return loop_start(0, start, end, incr, 0, istart, iend, true);
}
WEFT_GOMP bool GOMP_loop_ordered_runtime_next(long* istart, long* iend) {
  return loop_next(istart, iend);
}
WEFT_GOMP bool GOMP_loop_ull_runtime_start(bool up, unsigned long long start,
                                           unsigned long long end, unsigned long long incr,
                                           unsigned long long* istart, unsigned long long* iend) {
  return loop_start_ull(sched_monotonic, up, start, end, incr, 0, istart, iend, false, nullptr,
                        __builtin_return_address(0));
}
WEFT_GOMP bool GOMP_loop_ull_nonmonotonic_runtime_start(bool up, unsigned long long start,
                                                        unsigned long long end,
                                                        unsigned long long incr,
                                                        unsigned long long* istart,
                                                        unsigned long long* iend) {
  return loop_start_ull(0, up, start, end, incr, 0, istart, iend, false, nullptr,
                        __builtin_return_address(0));
}
WEFT_GOMP bool GOMP_loop_ull_runtime_next(unsigned long long* istart, unsigned long long* iend) {
  return loop_next_ull(istart, iend);
}
// The maybe-nonmonotonic runtime loop is the nonmonotonic one (plain
// schedule(runtime)), and the _next entries are one function: the same
// functions under the ABI's other names.
WEFT_GOMP bool GOMP_loop_ull_nonmonotonic_runtime_next(unsigned long long*, unsigned long long*)
    __attribute__((alias("GOMP_loop_ull_runtime_next")));
WEFT_GOMP bool GOMP_loop_ull_maybe_nonmonotonic_runtime_start(
    bool, unsigned long long, unsigned long long, unsigned long long, unsigned long long*,
    unsigned long long*) __attribute__((alias("GOMP_loop_ull_nonmonotonic_runtime_start")));
WEFT_GOMP bool GOMP_loop_ull_maybe_nonmonotonic_runtime_next(unsigned long long*,
                                                             unsigned long long*)
    __attribute__((alias("GOMP_loop_ull_runtime_next")));
WEFT_GOMP bool GOMP_loop_ull_ordered_runtime_start(bool up, unsigned long long start,
                                                   unsigned long long end, unsigned long long incr,
                                                   unsigned long long* istart,
                                                   unsigned long long* iend) {
  return loop_start_ull(0, up, start, end, incr, 0, istart, iend, true);
}
WEFT_GOMP bool GOMP_loop_ull_ordered_runtime_next(unsigned long long* istart,
                                                  unsigned long long* iend) {
  return loop_next_ull(istart, iend);
}

WEFT_GOMP void GOMP_parallel_loop_runtime(void (*fn)(void*), void* data, unsigned num_threads,
                                          long start, long end, long incr, unsigned flags) {
  parallel_loop(fn, data, num_threads, sched_monotonic, start, end, incr, 0, flags);
}

// GCC before 4.9: the region begins here, the caller runs thread 0's body
// and calls GOMP_parallel_end. Binaries built then still run.
WEFT_GOMP void GOMP_parallel_loop_static_start(void (*fn)(void*), void* data, unsigned num_threads,
                                               long start, long end, long incr, long chunk) {
  parallel_loop(fn, data, num_threads, sched_static, start, end, incr, chunk, 0, true);
}
WEFT_GOMP void GOMP_parallel_loop_dynamic_start(void (*fn)(void*), void* data, unsigned num_threads,
                                                long start, long end, long incr, long chunk) {
  parallel_loop(fn, data, num_threads, sched_dynamic, start, end, incr, chunk, 0, true);
}
WEFT_GOMP void GOMP_parallel_loop_guided_start(void (*fn)(void*), void* data, unsigned num_threads,
                                               long start, long end, long incr, long chunk) {
  parallel_loop(fn, data, num_threads, sched_guided, start, end, incr, chunk, 0, true);
}
WEFT_GOMP void GOMP_parallel_loop_runtime_start(void (*fn)(void*), void* data, unsigned num_threads,
                                                long start, long end, long incr) {
  parallel_loop(fn, data, num_threads, sched_monotonic, start, end, incr, 0, 0, true);
}
WEFT_GOMP void GOMP_parallel_loop_nonmonotonic_runtime(void (*fn)(void*), void* data,
                                                       unsigned num_threads, long start, long end,
                                                       long incr, unsigned flags) {
  parallel_loop(fn, data, num_threads, 0, start, end, incr, 0, flags);
}
WEFT_GOMP void GOMP_parallel_loop_maybe_nonmonotonic_runtime(void (*fn)(void*), void* data,
                                                             unsigned num_threads, long start,
                                                             long end, long incr, unsigned flags) {
  parallel_loop(fn, data, num_threads, 0, start, end, incr, 0, flags);
}

// GCC 9+'s generic entries: the schedule as a value (0: runtime), task
// reductions and memory for the construct. A null istart: GCC schedules the
// loop itself (static), and only the rest is wanted.
WEFT_GOMP bool GOMP_loop_start(long start, long end, long incr, long sched, long chunk,
                               long* istart, long* iend, uintptr_t* reductions, void** mem) {
  const ws_extras x{reductions, mem};
  return loop_start(int(sched), start, end, incr, chunk, istart, iend, false, &x,
                    __builtin_return_address(0));
}
WEFT_GOMP bool GOMP_loop_ull_start(bool up, unsigned long long start, unsigned long long end,
                                   unsigned long long incr, long sched, unsigned long long chunk,
                                   unsigned long long* istart, unsigned long long* iend,
                                   uintptr_t* reductions, void** mem) {
  const ws_extras x{reductions, mem};
  return loop_start_ull(int(sched), up, start, end, incr, chunk, istart, iend, false, &x,
                        __builtin_return_address(0));
}
WEFT_GOMP bool GOMP_loop_ordered_start(long start, long end, long incr, long sched, long chunk,
                                       long* istart, long* iend, uintptr_t* reductions,
                                       void** mem) {
  const ws_extras x{reductions, mem};
  return loop_start(int(sched), start, end, incr, chunk, istart, iend, true, &x);
}
WEFT_GOMP bool GOMP_loop_ull_ordered_start(bool up, unsigned long long start,
                                           unsigned long long end, unsigned long long incr,
                                           long sched, unsigned long long chunk,
                                           unsigned long long* istart, unsigned long long* iend,
                                           uintptr_t* reductions, void** mem) {
  const ws_extras x{reductions, mem};
  return loop_start_ull(int(sched), up, start, end, incr, chunk, istart, iend, true, &x);
}

WEFT_GOMP void GOMP_loop_end() {
  loop_end(true);
}
WEFT_GOMP void GOMP_loop_end_nowait() {
  loop_end(false);
}
// The end of a loop in a region that may be cancelled: true when the
// region was cancelled (GCC then jumps to the region's end), not when the
// loop was (see GOMP_cancel in parallel.cpp).
WEFT_GOMP bool GOMP_loop_end_cancel() {
  thread_state& me = current();
  release_ordered(me);
  leave(me);
  return barrier_cancel(me);
}

WEFT_GOMP void GOMP_ordered_start() {
  thread_state& me = current();
  if (me.ws == nullptr || me.ordered_seq < 0) return;  // not in an ordered loop's chunk
  ws_slot& s = *me.ws;
  const long seq = me.ordered_seq;
  wait_until(me, [&] { return s.ordered_turn.load(std::memory_order_acquire) == seq; });
}
WEFT_GOMP void GOMP_ordered_end() {}

// ---- sections ------------------------------------------------------------------------

WEFT_GOMP unsigned GOMP_sections_start(unsigned count) {
  thread_state& me = current();
  bool first = false;
  enter(me, first, [&](ws_slot& s) {
    s.sections = count;
    s.section.store(1, std::memory_order_relaxed);
  });
  return next_section(me);
}
// scope with reduction(task, ...) (OpenMP 5.1): a work share only to pick
// the thread that registers; GCC emits its barrier and
// GOMP_workshare_task_reduction_unregister itself. Nothing is handed out,
// so every thread leaves the slot at once.
WEFT_GOMP void GOMP_scope_start(uintptr_t* reductions) {
  thread_state& me = current();
  const ws_extras x{reductions, nullptr};
  extras_begin(me, &x);
  bool first = false;
  ws_slot& slot = enter(me, first, [&](ws_slot& s) { extras_init(me, s, &x); });
  extras_join(me, slot, &x, first);
  leave(me);
}

// GCC 9+'s form, with task reductions and memory for the construct.
WEFT_GOMP unsigned GOMP_sections2_start(unsigned count, uintptr_t* reductions, void** mem) {
  thread_state& me = current();
  const ws_extras x{reductions, mem};
  extras_begin(me, &x);
  bool first = false;
  ws_slot& slot = enter(me, first, [&](ws_slot& s) {
    s.sections = count;
    s.section.store(1, std::memory_order_relaxed);
    extras_init(me, s, &x);
  });
  extras_join(me, slot, &x, first);
  return next_section(me);
}
WEFT_GOMP unsigned GOMP_sections_next() {
  return next_section(current());
}
WEFT_GOMP void GOMP_sections_end() {
  thread_state& me = current();
  leave(me);
  barrier(me);
}
WEFT_GOMP void GOMP_sections_end_nowait() {
  leave(current());
}
// As GOMP_loop_end_cancel.
WEFT_GOMP bool GOMP_sections_end_cancel() {
  thread_state& me = current();
  leave(me);
  return barrier_cancel(me);
}
WEFT_GOMP void GOMP_parallel_sections(void (*fn)(void*), void* data, unsigned num_threads,
                                      unsigned count, unsigned flags) {
  thread_state& me = current();
  run_region(fn, data, team_size_for(me, num_threads), &prepare_sections, &count, flags);
}
// GCC before 4.9 (see GOMP_parallel_loop_static_start).
WEFT_GOMP void GOMP_parallel_sections_start(void (*fn)(void*), void* data, unsigned num_threads,
                                            unsigned count) {
  thread_state& me = current();
  begin_region(fn, data, team_size_for(me, num_threads), &prepare_sections, &count, 0);
}

// ---- single ----------------------------------------------------------------------------

WEFT_GOMP bool GOMP_single_start() {
  thread_state& me = current();
  bool first = false;
  enter(me, first, [](ws_slot&) {});
  leave(me);
  return first;
}

// copyprivate: the thread that runs the single block gets null and passes
// its data to GOMP_single_copy_end; the others get that pointer (GCC puts a
// barrier after the copies, so the data outlives them).
WEFT_GOMP void* GOMP_single_copy_start() {
  thread_state& me = current();
  bool first = false;
  ws_slot& s = enter(me, first, [](ws_slot& slot) {
    slot.copy_ready.store(false, std::memory_order_relaxed);
    slot.copy_data.store(nullptr, std::memory_order_relaxed);
  });
  if (first) return nullptr;
  wait_until(me, [&] { return s.copy_ready.load(std::memory_order_acquire); });
  void* data = s.copy_data.load(std::memory_order_relaxed);
  leave(me);
  return data;
}
WEFT_GOMP void GOMP_single_copy_end(void* data) {
  thread_state& me = current();
  ws_slot& s = *me.ws;
  s.copy_data.store(data, std::memory_order_relaxed);
  s.copy_ready.store(true, std::memory_order_release);
  leave(me);
}

}  // extern "C"
