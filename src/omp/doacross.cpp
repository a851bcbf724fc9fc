// Doacross loops: `ordered(n)` loops whose iterations wait for others with
// `ordered depend(sink: vec)` and announce themselves with `ordered
// depend(source)` (OpenMP 5.0, 2.17.9). GCC lowers such a loop to a work
// share over its outermost (collapsed) dimension, 0..counts[0]-1, taken
// with the ordinary GOMP_loop_*_next of its schedule, and the body's
// directives to GOMP_doacross_post(vec) and GOMP_doacross_wait(vec...),
// where vec holds one index per dimension, each normalized to
// 0..counts[i]-1.
//
// The idea: one thread runs each outer iteration, and a thread runs its
// iterations in lexicographic order (its chunks come in increasing order
// under every schedule, and the iterations of a chunk in order). So a
// thread's progress is one value, the vector it last posted, and
// iteration v has posted once the thread that runs v[0] has posted v or
// anything after it. A post is one store to the poster's own line; a wait
// finds the thread that runs v[0] and polls that thread's line. Both touch
// O(1) shared lines whatever the team's size.
//
// Finding the thread: under schedule(static) it is a formula of v[0] (the
// block or the round robin loop.cpp hands out). Under dynamic and guided
// it is whoever took the chunk: each chunk (dynamic; an outer iteration,
// guided, whose chunks have no fixed boundaries) has an entry in an owner
// table that its thread fills at its first post; a wait for a chunk nobody
// posted in yet waits for the entry. The table is 4 bytes an entry, once
// per loop; the progress lines one per thread. (libgomp keeps a 64-byte
// line per dynamic chunk or guided iteration instead.) Rejected: a bitmap
// over the whole iteration space, which grows with the product of the
// counts; and one progress entry per chunk, which costs a cache line a
// chunk where an owner entry costs 4 bytes.
//
// A vector packs into one word (dimension i shifted by the bits of the
// dimensions after it) when the counts' bits add up to 63 or fewer, and
// the packed order is the lexicographic one. Otherwise a thread's line
// holds the whole vector, written under a sequence lock (odd while
// written), which a waiter reads until it sees a stable copy.
//
// Waits give the PE back (wait_step, as every wait of this layer): several
// members may share a PE, and the thread that must post may be one of
// them. A team of one, or a space with an empty dimension, tracks nothing:
// its iterations run in order on one thread, or there are none.
#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <type_traits>
#include "absl/container/inlined_vector.h"
#include "omp/gomp_abi.hpp"
#include "omp/omp_internal.hpp"
#include "weft/base/cache.hpp"

namespace weft::omp {

namespace {

using ull = unsigned long long;
using vec = absl::InlinedVector<ull, 8>;
using line = doacross_loop::line;
constexpr unsigned words_per_line = sizeof(line) / sizeof(ull);

// The space GCC passes to a doacross start, for the first thread's init.
struct space {
  const ull* counts;
  unsigned ncounts;
  bool is_ull;  // the loop is an unsigned long long one (its chunk in chunk_ull)
};

unsigned bits_of(ull count) {
  return count <= 1 ? 1u : unsigned(64 - __builtin_clzll(count - 1));
}

// The first thread to arrive, under the slot's lock: the loop's schedule is
// in the slot.
void init_state(thread_state& me, ws_slot& s, void* ctx) {
  const space& sp = *static_cast<const space*>(ctx);
  doacross_loop& d = s.doacross;
  d.release();
  const int n = me.t != nullptr ? me.t->size : 1;
  if (n < 2 || sp.ncounts == 0) return;
  d.counts.assign(sp.counts, sp.counts + sp.ncounts);
  d.shifts.assign(sp.ncounts, 0);
  unsigned bits = 0;
  for (unsigned i = sp.ncounts; i-- > 0;) {
    if (d.counts[i] == 0) return;  // no iteration: nothing posts or waits
    d.shifts[i] = bits < 64 ? bits : 0;
    bits += bits_of(d.counts[i]);
  }
  // 63, not 64: a post stores its packed vector + 1 (0 is "nothing yet").
  d.flattened = bits <= 63;
  d.threads = n;
  d.stride = d.flattened ? 1 : (1 + sp.ncounts + words_per_line - 1) / words_per_line;
  d.progress.reset(new line[std::size_t(n) * d.stride]());
  const ull trips = d.counts[0];
  const ull chunk = sp.is_ull ? s.chunk_ull : ull(s.chunk);
  if (s.sched == sched_static && chunk == 0) {
    d.find = doacross_loop::by_block;
    d.q = trips / ull(n);
    d.r = trips % ull(n);
  } else if (s.sched == sched_static) {
    d.find = doacross_loop::by_round_robin;
    d.unit = chunk;
  } else {
    d.find = doacross_loop::by_table;
    d.unit = s.sched == sched_guided ? 1 : chunk;
    d.owners.reset(new std::atomic<unsigned>[(trips - 1) / d.unit + 1]());
  }
  d.active = true;
}

template <class T>
bool loop_start(unsigned ncounts, const T* counts, int sched, T chunk, T* istart, T* iend,
                std::uintptr_t* reductions, void** mem) {
  vec c(counts, counts + ncounts);
  space sp{c.data(), ncounts, std::is_same_v<T, ull>};
  bool more;
  if constexpr (std::is_same_v<T, ull>)
    more = doacross_loop_start_ull(sched, chunk, ncounts != 0 ? c[0] : 0, istart, iend, reductions,
                                   mem, &init_state, &sp);
  else
    more = doacross_loop_start(sched, chunk, ncounts != 0 ? long(c[0]) : 0, istart, iend,
                               reductions, mem, &init_state, &sp);
  // Before this thread's first post of the loop.
  current().doacross_claimed = ~0ull;
  return more;
}

std::atomic<ull>& word(const doacross_loop& d, int thread, unsigned i) {
  return d.progress[std::size_t(thread) * d.stride + i / words_per_line].word[i % words_per_line];
}

ull packed(const doacross_loop& d, const ull* v) {
  ull f = 0;
  for (std::size_t i = 0; i < d.counts.size(); ++i) f |= v[i] << d.shifts[i];
  return f;
}

bool in_space(const doacross_loop& d, const ull* v) {
  for (std::size_t i = 0; i < d.counts.size(); ++i)
    if (v[i] >= d.counts[i]) return false;  // a negative index of a long loop is huge here
  return true;
}

void post(thread_state& me, doacross_loop& d, const ull* v) {
  if (!in_space(d, v)) return;
  if (d.find == doacross_loop::by_table) {
    const ull k = v[0] / d.unit;
    if (me.doacross_claimed != k) {
      // Needs no order with the progress store below: a waiter that finds
      // this entry polls our line until the post it wants shows there.
      d.owners[k].store(unsigned(me.id) + 1, std::memory_order_relaxed);
      me.doacross_claimed = k;
    }
  }
  if (d.flattened) {
    // Release: the iteration's writes are seen by whoever sees this post.
    word(d, me.id, 0).store(packed(d, v) + 1, std::memory_order_release);
    return;
  }
  // Only this thread writes its line: the sequence word is its own.
  std::atomic<ull>& seq = word(d, me.id, 0);
  const ull s = seq.load(std::memory_order_relaxed);
  seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (std::size_t i = 0; i < d.counts.size(); ++i)
    word(d, me.id, unsigned(1 + i)).store(v[i], std::memory_order_relaxed);
  seq.store(s + 2, std::memory_order_release);
}

// Whether `thread` has posted v or an iteration after it.
bool reached(const doacross_loop& d, int thread, const ull* v) {
  if (d.flattened) return word(d, thread, 0).load(std::memory_order_acquire) > packed(d, v);
  std::atomic<ull>& seq = word(d, thread, 0);
  const ull s = seq.load(std::memory_order_acquire);
  if (s == 0 || (s & 1) != 0) return false;  // nothing posted yet, or a post half written
  vec got(d.counts.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    got[i] = word(d, thread, unsigned(1 + i)).load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (seq.load(std::memory_order_relaxed) != s) return false;  // torn: look again
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != v[i]) return got[i] > v[i];
  return true;
}

// The thread that runs outer iteration v0, found without waiting; -1 when
// only the owner table knows.
int runner_of(const doacross_loop& d, ull v0) {
  switch (d.find) {
    case doacross_loop::by_block: {
      const ull boundary = d.r * (d.q + 1);  // the first r threads have q + 1 iterations
      return int(v0 < boundary ? v0 / (d.q + 1) : d.r + (v0 - boundary) / d.q);
    }
    case doacross_loop::by_round_robin:
      return int(v0 / d.unit % ull(d.threads));
    default:
      return -1;
  }
}

void wait(thread_state& me, const doacross_loop& d, const ull* v) {
  if (!in_space(d, v)) return;  // a sink outside the space names no iteration
  int runner = runner_of(d, v[0]);
  if (runner < 0) {
    const std::atomic<unsigned>& owner = d.owners[v[0] / d.unit];
    unsigned o = 0;
    wait_until(me, [&] { return (o = owner.load(std::memory_order_relaxed)) != 0; });
    runner = int(o) - 1;
  }
  wait_until(me, [&] { return reached(d, runner, v); });
}

template <class T>
void wait_args(T first, va_list ap) {
  thread_state& me = current();
  if (me.ws == nullptr || !me.ws->doacross.active) return;
  const doacross_loop& d = me.ws->doacross;
  vec v(d.counts.size());
  v[0] = ull(first);
  for (std::size_t i = 1; i < v.size(); ++i) v[i] = ull(va_arg(ap, T));
  wait(me, d, v.data());
}

template <class T>
void post_args(const T* counts) {
  thread_state& me = current();
  if (me.ws == nullptr || !me.ws->doacross.active) return;
  doacross_loop& d = me.ws->doacross;
  vec v(counts, counts + d.counts.size());
  post(me, d, v.data());
}

}  // namespace

}  // namespace weft::omp

// ---- the entry points ----------------------------------------------------------------

using namespace weft::omp;
using weft::omp::ull;

extern "C" {

WEFT_GOMP bool GOMP_loop_doacross_static_start(unsigned ncounts, long* counts, long chunk,
                                               long* istart, long* iend) {
  return loop_start<long>(ncounts, counts, sched_static, chunk, istart, iend, nullptr, nullptr);
}
WEFT_GOMP bool GOMP_loop_doacross_dynamic_start(unsigned ncounts, long* counts, long chunk,
                                                long* istart, long* iend) {
  return loop_start<long>(ncounts, counts, sched_dynamic, chunk, istart, iend, nullptr, nullptr);
}
WEFT_GOMP bool GOMP_loop_doacross_guided_start(unsigned ncounts, long* counts, long chunk,
                                               long* istart, long* iend) {
  return loop_start<long>(ncounts, counts, sched_guided, chunk, istart, iend, nullptr, nullptr);
}
WEFT_GOMP bool GOMP_loop_doacross_runtime_start(unsigned ncounts, long* counts, long* istart,
                                                long* iend) {
  return loop_start<long>(ncounts, counts, 0, 0, istart, iend, nullptr, nullptr);
}
// GCC 9+'s generic entry: the schedule as a value (0: runtime), task
// reductions and memory for the construct, as GOMP_loop_start's.
WEFT_GOMP bool GOMP_loop_doacross_start(unsigned ncounts, long* counts, long sched, long chunk,
                                        long* istart, long* iend, uintptr_t* reductions,
                                        void** mem) {
  return loop_start<long>(ncounts, counts, int(sched), chunk, istart, iend, reductions, mem);
}

WEFT_GOMP bool GOMP_loop_ull_doacross_static_start(unsigned ncounts, ull* counts, ull chunk,
                                                   ull* istart, ull* iend) {
  return loop_start<ull>(ncounts, counts, sched_static, chunk, istart, iend, nullptr, nullptr);
}
WEFT_GOMP bool GOMP_loop_ull_doacross_dynamic_start(unsigned ncounts, ull* counts, ull chunk,
                                                    ull* istart, ull* iend) {
  return loop_start<ull>(ncounts, counts, sched_dynamic, chunk, istart, iend, nullptr, nullptr);
}
WEFT_GOMP bool GOMP_loop_ull_doacross_guided_start(unsigned ncounts, ull* counts, ull chunk,
                                                   ull* istart, ull* iend) {
  return loop_start<ull>(ncounts, counts, sched_guided, chunk, istart, iend, nullptr, nullptr);
}
WEFT_GOMP bool GOMP_loop_ull_doacross_runtime_start(unsigned ncounts, ull* counts, ull* istart,
                                                    ull* iend) {
  return loop_start<ull>(ncounts, counts, 0, 0, istart, iend, nullptr, nullptr);
}
WEFT_GOMP bool GOMP_loop_ull_doacross_start(unsigned ncounts, ull* counts, long sched, ull chunk,
                                            ull* istart, ull* iend, uintptr_t* reductions,
                                            void** mem) {
  return loop_start<ull>(ncounts, counts, int(sched), chunk, istart, iend, reductions, mem);
}

WEFT_GOMP void GOMP_doacross_post(long* counts) {
  post_args(counts);
}
WEFT_GOMP void GOMP_doacross_ull_post(ull* counts) {
  post_args(counts);
}
WEFT_GOMP void GOMP_doacross_wait(long first, ...) {
  va_list ap;
  va_start(ap, first);
  wait_args(first, ap);
  va_end(ap);
}
WEFT_GOMP void GOMP_doacross_ull_wait(ull first, ...) {
  va_list ap;
  va_start(ap, first);
  wait_args(first, ap);
  va_end(ap);
}

}  // extern "C"
