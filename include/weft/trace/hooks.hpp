// The trace layer's hooks, called by the layers below it on their hot paths
// (docs/design/trace-format.md lists the events and their fields).
//
// Cost when tracing is off: `on()` reads one byte that is written only
// before any PE starts and after all have stopped, so the branch is always
// predicted and the line stays shared in every core's cache. Everything
// else lives out of line behind it. When on, an event is one time-stamp
// read and one 24-byte store into the calling thread's own buffer: no lock,
// no atomic read-modify-write, no line another thread writes.
#pragma once
#include <sched.h>
#include <atomic>
#include <cstdint>
#include <string_view>
#include "weft/base/export.hpp"
#include "weft/base/timer.hpp"

namespace weft::trace {

// Record kinds (the `kind` byte of a record; fixed by the file format).
enum class kind : std::uint8_t {
  handler_begin = 1,
  handler_end = 2,
  entry_begin = 3,
  entry_end = 4,
  send = 5,
  idle_begin = 6,
  idle_end = 7,
  task_begin = 8,
  task_end = 9,
  steal = 10,
  reduction = 11,
  migrate_out = 12,
  migrate_in = 13,
  lb_begin = 14,
  lb_end = 15,
  progress_begin = 16,
  progress_end = 17,
  mark = 18,
  region_begin = 19,
  region_end = 20,
  counter = 21,
  flush_begin = 22,
  flush_end = 23,
  end = 24,  // the track's last record: how the run ended (session.hpp's end_how)
  cpu = 25,  // the CPU the track's thread runs on, when it changed
  // MPI ranks (src/mpi/tracing.cpp): a call's span and its waits, each
  // naming the rank (a rank runs on its PE's thread: tools split them).
  mpi_begin = 26,
  mpi_end = 27,
  mpi_wait_begin = 28,
  mpi_wait_end = 29,
  // A balancing step's phases (src/objects/sync_trace.cpp); like lb_begin
  // and lb_end they pair per collection and step, not with the track's
  // slices: a step spans many handlers.
  lb_phase_begin = 30,
  lb_phase_end = 31,
  // Events a track dropped while its writer fell behind (no buffer of its
  // pool free): a, b the count (low, high), c, d the tick it began dropping.
  dropped = 32,
  // A logical thread (threads layer: an MPI rank, an OpenMP thread) switched
  // in and out on the PE's thread: a names it (user names: "MPI rank 3").
  ult_begin = 34,
  ult_end = 35,
};

// Handler ids of what runs on a PE without a message.
inline constexpr std::uint32_t main_handler = 0xffffffffu;
inline constexpr std::uint32_t callback_handler = 0xfffffffeu;

// Flag bits of the `d` field of handler_begin and send.
namespace send_flags {
inline constexpr std::uint32_t node_queue = 1u << 8;  // a node-queue message (send: `a` is a node)
inline constexpr std::uint32_t remote = 1u << 9;      // handler_begin: came from another node
inline constexpr std::uint32_t bcast_copy = 1u << 9;  // send: a broadcast forwarded down the tree
inline constexpr std::uint32_t to_remote = 1u << 10;  // send: to another node
}  // namespace send_flags

namespace detail {
// True while a node of this process records a trace. Atomic because a
// program's own threads may send while a node starts or ends; a relaxed load
// is the same plain move as a bool's.
WEFT_API extern std::atomic<bool> g_on;

// A record as it is stored (docs/design/trace-format.md).
struct raw_record {
  std::uint64_t w;  // tick << 8 | kind
  std::uint32_t a, b, c, d;
};
static_assert(sizeof(raw_record) == 24);

// The calling thread's buffer, for the inline path: records go to `next`
// while it is below `limit`. Null `next` (no track) and an open idle
// period send every event through record(). `next` is read by
// the abort path of another thread, hence the release stores (plain moves
// on x86). While the track drops events (its writer fell behind) `next`
// and `limit` are null, so every event goes to record(), which counts it.
//
// Summary mode counts every slice but times only some (docs/tracing.md,
// "Summary mode"): it has no buffer (`next` null); a slice that is not
// timed is counted in place, in its name's summary_count, and a timed one,
// and every event while one is open, goes through record().
struct summary_count {
  std::uint64_t count = 0;       // slices of the name begun
  std::uint64_t next_timed = 1;  // the count its next timed slice will make
};
// The kinds whose names the inline path counts: handler, entry, task, region.
inline constexpr int summary_kinds = 4;
struct fast_path {
  raw_record* next = nullptr;
  raw_record* limit = nullptr;
  raw_record* first = nullptr;  // the buffer's start
  std::uint64_t base = 0;       // the session's first tick
  bool idle_open = false;
  std::uint8_t seq = 0;   // sends so far, modulo 256
  std::int32_t cpu = -1;  // the CPU of the thread's last cpu record
  // Summary mode.
  bool summary = false;
  bool timing = false;       // a timed slice is open: every slice inside it is timed
  std::uint8_t stamped = 0;  // the last event's kind, if it read the clock (0: it did not)
  std::uint32_t depth = 0;   // slices open, timed or not
  summary_count* counts[summary_kinds] = {};  // by summary_index()
  std::uint32_t count_size[summary_kinds] = {};
};
WEFT_API extern constinit thread_local fast_path t_fast;

// Appends an event to the calling thread's track (nothing on a thread that
// has none). Never throws, never blocks: a full buffer goes to the writer
// thread, and with no buffer free the event is dropped and counted.
WEFT_API void record(kind k, std::uint32_t a, std::uint32_t b, std::uint32_t c,
                     std::uint32_t d) noexcept;
// The idle state's slow paths (summary mode, a full buffer); the inline
// idle_enter / idle_leave below are what the scheduler calls.
WEFT_API void idle_enter_slow() noexcept;
WEFT_API void idle_leave_slow() noexcept;
// A progress call that began at time stamp t0 (base::cycles()) and moved
// `moved` items, on the comm thread or a worker PE:
// recorded only when it moved something, so a polling thread does not fill
// its buffer with empty polls.
WEFT_API void record_progress(std::uint64_t t0, std::uint32_t moved) noexcept;
// An event right after one of kind `after`, on a thread without a buffer
// (summary mode, a track that drops): in summary mode it takes that one's
// time stamp when it is the last event summed.
WEFT_API void record_adjacent(kind after, kind k, std::uint32_t a, std::uint32_t b, std::uint32_t c,
                              std::uint32_t d) noexcept;
// The thread runs on another CPU than its last cpu record says: records it.
WEFT_API void cpu_changed(int cpu) noexcept;
WEFT_API std::uint32_t intern_user_name(std::string_view name);
}  // namespace detail

[[gnu::always_inline]] inline bool on() noexcept {
  return __builtin_expect(detail::g_on.load(std::memory_order_relaxed), false);
}

namespace detail {
// The kinds that open a slice: one of them ends an idle period. 64 bits:
// kinds run past 31.
inline constexpr std::uint64_t begin_kinds =
    1ull << std::uint32_t(kind::handler_begin) | 1ull << std::uint32_t(kind::entry_begin) |
    1ull << std::uint32_t(kind::task_begin) | 1ull << std::uint32_t(kind::region_begin) |
    1ull << std::uint32_t(kind::progress_begin) | 1ull << std::uint32_t(kind::flush_begin);
static_assert(std::uint32_t(kind::ult_end) < 64, "begin_kinds holds a bit per kind");

// A scheduler point (a handler, loop chunk or region begins; a turn of an
// idle period) looks at the CPU the thread runs on, and records it when it
// changed: a thread's CPU over time at the cost of a CPU number read per
// scheduler point. glibc reads it from the rseq area the kernel keeps up to
// date (about 2 ns, no system call); a record is taken only on a change.
[[gnu::always_inline]] inline void check_cpu(fast_path& f) noexcept {
  const int cpu = sched_getcpu();
  if (cpu != f.cpu) [[unlikely]]
    cpu_changed(cpu);
}

[[gnu::always_inline]] inline std::uint64_t tick_now(const fast_path& f) noexcept {
  std::uint64_t tick = base::cycles() - f.base;
  return std::int64_t(tick) < 0 ? 0 : tick;  // a core whose counter lags the first one's
}

// Room for two records at r (an event and the idle_end it may imply): one
// test, as `limit` is null when `next` is (no buffer: summary mode, a track
// that drops events).
[[gnu::always_inline]] inline bool has_room(const fast_path& f, const raw_record* r) noexcept {
  return std::uintptr_t(r) + sizeof(raw_record) < std::uintptr_t(f.limit);
}

// The summary_count table of a kind that opens a busy slice (-1: another
// kind, which the slow path counts).
[[gnu::always_inline]] constexpr int summary_index(kind k) noexcept {
  return k == kind::handler_begin  ? 0
         : k == kind::entry_begin  ? 1
         : k == kind::task_begin   ? 2
         : k == kind::region_begin ? 3
                                   : -1;
}

// Summary mode: a slice that is not timed begins or ends (`id` names it):
// counted in place, without a clock read. False when record() must take the
// event: the slice is timed or inside a timed one, an idle period must be
// closed, the table has no row for the name yet, or another kind. Callers
// name their kind as a constant: the tests on it fold away.
[[gnu::always_inline]] inline bool summary_untimed(fast_path& f, kind k,
                                                   std::uint32_t id) noexcept {
  // An instant (a send, a steal, an MPI call's records): the summary keeps
  // none, and it leaves the last time stamp as it was.
  const bool opens = (begin_kinds >> std::uint32_t(k) & 1u) != 0;
  const bool closes = k != kind{} && (begin_kinds >> (std::uint32_t(k) - 1) & 1u) != 0;
  if (!opens && !closes) return true;
  if (f.timing || f.idle_open) return false;
  if (const int i = summary_index(k); i >= 0) {
    if (id >= f.count_size[i]) return false;
    summary_count& c = f.counts[i][id];
    const std::uint64_t n = c.count + 1;
    if (n >= c.next_timed) return false;  // this one is timed
    c.count = n;
    ++f.depth;
    f.stamped = 0;
    return true;
  }
  if (k == kind::handler_end || k == kind::entry_end || k == kind::task_end ||
      k == kind::region_end) {
    if (f.depth == 0) return false;
    --f.depth;
    f.stamped = 0;
    return true;
  }
  return false;
}

// An event: stored in place when the buffer has room for it (and for the
// idle_end it may imply: the common case is a time-stamp read and a few
// stores), else through record(), which also writes a full buffer out.
[[gnu::always_inline]] inline void emit(kind k, std::uint32_t a, std::uint32_t b, std::uint32_t c,
                                        std::uint32_t d) noexcept {
  fast_path& f = t_fast;
  // Summary mode first: it keeps no records (nor CPU numbers), and its
  // common case, a slice counted only, must not pay for building one.
  if (f.summary) {
    if (!summary_untimed(f, k, a)) record(k, a, b, c, d);
    return;
  }
  // Every caller names its kind as a constant: the test folds away.
  if (k == kind::handler_begin || k == kind::task_begin || k == kind::region_begin) check_cpu(f);
  raw_record* r = f.next;
  if (has_room(f, r)) [[likely]] {
    const std::uint64_t tick = tick_now(f);
    if (f.idle_open && (begin_kinds >> std::uint32_t(k) & 1u) != 0) [[unlikely]] {
      *r++ = {tick << 8 | std::uint64_t(kind::idle_end), 0, 0, 0, 0};
      f.idle_open = false;
    }
    *r = {tick << 8 | std::uint64_t(k), a, b, c, d};
    std::atomic_ref<raw_record*>(f.next).store(r + 1, std::memory_order_release);
    return;
  }
  record(k, a, b, c, d);
}

// Moves the idle state to `open` with an idle_begin or idle_end record, in
// place when the buffer has room; false when the slow path must do it.
[[gnu::always_inline]] inline bool idle_switch(fast_path& f, bool open) noexcept {
  raw_record* r = f.next;
  if (!has_room(f, r)) [[unlikely]]
    return false;
  *r = {tick_now(f) << 8 | std::uint64_t(open ? kind::idle_begin : kind::idle_end), 0, 0, 0, 0};
  f.idle_open = open;
  std::atomic_ref<raw_record*>(f.next).store(r + 1, std::memory_order_release);
  return true;
}

// Enters the idle state; the next begin event or idle_leave ends it (an idle
// period spans many turns of the scheduler's back-off, each calling this).
[[gnu::always_inline]] inline void idle_enter() noexcept {
  fast_path& f = t_fast;
  if (!f.summary) check_cpu(f);
  if (!f.idle_open && !idle_switch(f, true)) idle_enter_slow();
}
[[gnu::always_inline]] inline void idle_leave() noexcept {
  fast_path& f = t_fast;
  if (!f.summary) check_cpu(f);
  if (f.idle_open && !idle_switch(f, false)) idle_leave_slow();
}

// An event that happens at once after one of kind `after` (an entry method
// begins as its handler does; a handler ends as its entry method does): if
// that is the last record, this one takes its time, which spares a
// time-stamp read (most of an event's cost) and moves the slice by the few
// nanoseconds of the dispatch between the two.
[[gnu::always_inline]] inline void emit_adjacent(kind after, kind k, std::uint32_t a,
                                                 std::uint32_t b, std::uint32_t c,
                                                 std::uint32_t d) noexcept {
  fast_path& f = t_fast;
  if (f.summary) {
    if (!summary_untimed(f, k, a)) record_adjacent(after, k, a, b, c, d);
    return;
  }
  raw_record* r = f.next;
  if (has_room(f, r) && r > f.first && !f.idle_open && std::uint8_t(r[-1].w) == std::uint8_t(after))
      [[likely]] {
    *r = {(r[-1].w & ~std::uint64_t(0xff)) | std::uint64_t(k), a, b, c, d};
    std::atomic_ref<raw_record*>(f.next).store(r + 1, std::memory_order_release);
    return;
  }
  if (r == nullptr) {
    record_adjacent(after, k, a, b, c, d);
    return;
  }
  emit(k, a, b, c, d);
}

// Summary mode: a slice of kind `k` named `id` begins or ends, right after
// an event of kind `after` when one is named. The summary keeps a slice's
// kind and name only, so the callers' other fields are not built (they
// would be, before the mode's test, where one call takes both).
[[gnu::always_inline]] inline void summary_slice(fast_path& f, kind k, std::uint32_t id,
                                                 kind after = kind{}) noexcept {
  if (summary_untimed(f, k, id)) return;
  if (after != kind{})
    record_adjacent(after, k, id, 0, 0, 0);
  else
    record(k, id, 0, 0, 0);
}

// A handler begins. One that runs right after another of the scheduler's
// batch (`follows`: nothing recorded between them but that one's end) takes
// that handler_end's time stamp: one clock read a message, four records to
// an entry method; the few nanoseconds of the queue's pop between the two
// go to the handler.
[[gnu::always_inline]] inline void begin_handler(bool follows, std::uint32_t hid, std::uint32_t src,
                                                 std::uint32_t bytes,
                                                 std::uint32_t flags) noexcept {
  if (follows)
    emit_adjacent(kind::handler_end, kind::handler_begin, hid, src, bytes, flags);
  else
    emit(kind::handler_begin, hid, src, bytes, flags);
}

// A send: records it and returns the sequence number the message carries
// (the receiver's handler_begin names it, so tools can draw the arrow).
[[gnu::always_inline]] inline std::uint8_t record_send(std::int32_t dst, std::uint32_t bytes,
                                                       std::uint32_t handler,
                                                       std::uint32_t flags) noexcept {
  const std::uint8_t seq = t_fast.seq++;
  emit(kind::send, std::uint32_t(dst), bytes, handler, flags | seq);
  return seq;
}

// Sampled tracing (--weft:trace-sample=N): the sender keeps every Nth of its
// sends, and the message says whether it was kept (message_flags::untraced),
// so the receiver records its handler_begin/handler_end exactly for the kept
// ones, with no counter of its own, and the tool pairs them as before. A send
// left out costs a countdown and a flag bit: no time stamp, no record.
// Written before any PE starts (start_session); 1 keeps every send. Atomic
// for a program's own threads, which may send while a node starts; a
// relaxed load is a plain move.
WEFT_API extern std::atomic<std::uint32_t> g_sample_every;
// Sends of the calling thread until the next kept one (0 or 1: the next).
WEFT_API extern constinit thread_local std::uint32_t t_sample_left;

// Whether the calling thread's next send goes into the trace. Tracing on.
[[gnu::always_inline]] inline bool sample_send() noexcept {
  std::uint32_t& left = t_sample_left;
  if (left > 1) {
    --left;
    return false;
  }
  left = g_sample_every.load(std::memory_order_relaxed);
  return true;
}

// The kind of the calling thread's last record in its buffer (0: none).
[[gnu::always_inline]] inline std::uint8_t last_kind() noexcept {
  const fast_path& f = t_fast;
  return f.next != nullptr && f.next > f.first ? std::uint8_t(f.next[-1].w) : 0;
}
}  // namespace detail

}  // namespace weft::trace
