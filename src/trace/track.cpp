// A thread's track: its pool of event buffers and the writer thread that
// empties them into the track's file, and the hooks' slow paths (what
// weft/trace/hooks.hpp calls when its inline path cannot store an event).
// Format: docs/design/trace-format.md.
//
// Every track (a PE, or a node's comm thread) owns a pool of buffers and
// its file; its thread alone appends, so recording takes no lock and
// touches no line another thread writes. A full buffer is handed to the
// session's writer thread and the track goes on in the next buffer of its
// pool: no PE waits for the file system (writing 4 MiB to /dev/shm takes
// ~10 ms, which used to land in whatever the PE ran). When the writer falls
// behind and no buffer is free, the track drops events and counts them,
// never blocks; the count goes into the trace as a dropped record when a
// buffer is free again. After a fatal error the failing thread writes out
// the other tracks' buffers too (ending.cpp): each buffer's count is
// published with a release store after its record, and a track's `file`
// hold keeps the writer, the owner's end and the abort path from writing
// the same file at once.
//
// Summary mode's counts are summary.cpp's: the events the inline path does
// not count come to it through record().
//
// The file calls (open, write) stay here, not in base/os: write_all is also
// the signal handler's, which must use write(2) alone.
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include "session_state.hpp"
#include "weft/base/error.hpp"
#include "weft/base/timer.hpp"

namespace weft::trace {

namespace detail {
std::atomic<bool> g_on{false};
constinit thread_local fast_path t_fast;
}  // namespace detail

namespace internal {

// Writes all of [p, p + n) or returns the errno that stopped it.
int write_all(int fd, const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    c += w;
    n -= std::size_t(w);
  }
  return 0;
}

namespace {

// The thread's track while it records (null when the session only counts).
thread_local track* t_track = nullptr;
// The thread's track in any case (its counters serve --weft:stats).
thread_local track* t_own = nullptr;

// Writes n records at `b` to the track's file. Returns false (and stops the
// track, once said) when the file cannot take them.
bool write_records(track& t, const record* b, std::uint32_t n) {
  if (t.fd < 0 || t.failed.load(std::memory_order_relaxed)) return false;
  if (int err = write_all(t.fd, b, std::size_t(n) * sizeof(record)); err != 0) {
    t.failed.store(true, std::memory_order_relaxed);
    base::warn("trace: write failed for %s: %s (errno %d); this track records no more",
               t.path.c_str(), base::errno_text(err).c_str(), err);
    return false;
  }
  if (n > 0) t.written_tick.store(b[n - 1].w >> 8, std::memory_order_relaxed);
  return true;
}

void sleep_us(long us) {
  timespec ts{us / 1000000, (us % 1000000) * 1000};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// --- recording -------------------------------------------------------------

void flush(track& t, std::uint64_t now);
bool resume(track& t, std::uint64_t now);

void set_count(track& t, std::uint32_t n) {
  std::atomic_ref<record*>(t.fp->next).store(cur_buf(t) + n, std::memory_order_release);
}

// A record at `tick` (a session tick) into the buffer, which has room for it
// (the caller checked t.dropping).
inline void put_tick(track& t, kind k, std::uint64_t tick, std::uint32_t a, std::uint32_t b,
                     std::uint32_t c, std::uint32_t d) {
  // A track's records never go back in time: callers that stamp two records
  // with one `now` (idle_end then a begin) may see the first one fill the
  // buffer, and the flush's own records come after `now`.
  if (tick < t.last_tick) tick = t.last_tick;
  const std::uint32_t i = count(t);
  cur_buf(t)[i] = {tick << 8 | std::uint64_t(k), a, b, c, d};
  set_count(t, i + 1);
  t.last_tick = tick;
  // Room stays for what a flush records into the full buffer (flush_begin);
  // the inline path stops at the same mark (fast_path::limit).
  if (i + 2 >= t.cap) flush(t, base::cycles());
}

// An event of the track's own (not the program's: counters, cpu, the
// flush's records), recorded unless the track drops events.
inline void put(track& t, kind k, std::uint64_t now, std::uint32_t a, std::uint32_t b,
                std::uint32_t c, std::uint32_t d) {
  if (t.summary) return;  // it counts slices only (summary.cpp)
  const session& s = *g_session.load(std::memory_order_relaxed);
  if (t.failed.load(std::memory_order_relaxed) || t.dropping) return;
  put_tick(t, k, tick_of(s, now), a, b, c, d);
}

// The program's events (through the hooks): while the track drops them,
// counted (the abort path reads the count) until a buffer is free again.
inline void event(track& t, kind k, std::uint64_t now, std::uint32_t a, std::uint32_t b,
                  std::uint32_t c, std::uint32_t d, std::uint64_t n = 1) {
  if (t.dropping && !resume(t, now)) {
    t.dropped.store(t.dropped.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    return;
  }
  put(t, k, now, a, b, c, d);
}

void put_counters(track& t, std::uint64_t now) {
  const std::vector<std::uint64_t> v = t.counters.read();
  for (std::size_t i = 0; i < v.size(); ++i)
    put(t, kind::counter, now, std::uint32_t(i), 0, std::uint32_t(v[i]), std::uint32_t(v[i] >> 32));
}

void wake_writer(session& s) {
  s.wake.fetch_add(1, std::memory_order_release);
  s.wake.notify_one();
}

// Hands the buffer's n records to the writer. `next` goes null first, so
// the abort path, seeing the buffer handed off, does not write it again as
// the one being filled.
void hand_off(track& t, std::uint32_t n) {
  t.fp->limit = nullptr;
  std::atomic_ref<record*>(t.fp->next).store(nullptr, std::memory_order_release);
  t.full[t.cur.load(std::memory_order_relaxed)].store(n, std::memory_order_release);
  wake_writer(*g_session.load(std::memory_order_relaxed));
}

// A full buffer goes to the writer, its end a flush slice (the hand-off's
// time, on the track as overhead); the track goes on in the next buffer of
// its pool, or drops events until that one is free.
void flush(track& t, std::uint64_t now) {
  session& s = *g_session.load(std::memory_order_relaxed);
  std::uint32_t n = count(t);
  const std::uint64_t tick = std::max(tick_of(s, now), t.last_tick);
  cur_buf(t)[n] = {tick << 8 | std::uint64_t(kind::flush_begin), 0, 0, 0, 0};
  set_count(t, ++n);
  t.handoff_tick = tick;
  t.handed = n;
  hand_off(t, n);
  t.dropping = true;
  t.drop_tick = tick;
  resume(t, base::cycles());
}

// The next buffer of the pool, if the writer has written it: the track
// records again, first the flush's end, the events it dropped meanwhile and
// its counters. False while that buffer waits for the writer.
bool resume(track& t, std::uint64_t now) {
  if (t.failed.load(std::memory_order_relaxed)) return false;
  const std::uint32_t next = (t.cur.load(std::memory_order_relaxed) + 1) % t.nbufs;
  if (t.full[next].load(std::memory_order_acquire) != 0) return false;
  t.cur.store(next, std::memory_order_release);
  detail::fast_path& f = *t.fp;
  record* b = t.bufs[next].get();
  f.first = b;
  f.limit = b + (t.cap - 2);  // put_tick's flush mark
  std::atomic_ref<record*>(f.next).store(b, std::memory_order_release);
  t.dropping = false;
  put_tick(t, kind::flush_end, t.handoff_tick, t.handed, 0, 0, 0);
  if (const std::uint64_t lost = t.dropped.load(std::memory_order_relaxed); lost != 0) {
    const std::uint64_t tick =
        std::max(tick_of(*g_session.load(std::memory_order_relaxed), now), t.last_tick);
    const record r = dropped_record(tick, lost, t.drop_tick);
    put_tick(t, kind::dropped, tick, r.a, r.b, r.c, r.d);
    t.dropped_total.store(t.dropped_total.load(std::memory_order_relaxed) + lost,
                          std::memory_order_relaxed);
    t.dropped.store(0, std::memory_order_relaxed);
  }
  put_counters(t, now);
  return true;
}

// --- the writer thread -----------------------------------------------------

// Writes the track's next buffer if it waits; false when none does. One
// buffer a track per pass: a track that refills as fast as the writer
// empties it does not starve the others.
bool write_waiting(session& s, track& t) {
  const std::uint32_t i = t.wnext;
  const std::uint32_t n = t.full[i].load(std::memory_order_acquire);
  if (n == 0 || t.file.load(std::memory_order_relaxed) == file_taken) return false;
  if (s.slow_writer_ms != 0) sleep_us(long(s.slow_writer_ms) * 1000);
  int expect = file_free;
  // Held for good: the abort path writes what is left, or the file ended.
  if (!t.file.compare_exchange_strong(expect, file_writing, std::memory_order_acquire))
    return false;
  write_records(t, t.bufs[i].get(), n);
  // Before the file is let go: whoever takes it next starts after this one.
  t.wnext = (i + 1) % t.nbufs;
  t.full[i].store(0, std::memory_order_release);
  t.file.store(file_free, std::memory_order_release);
  return true;
}

inline void append(track& t, kind k, std::uint64_t now, std::uint32_t a, std::uint32_t b,
                   std::uint32_t c, std::uint32_t d) {
  if (t.summary) {
    summary_event(t, k, a, now);
    return;
  }
  if (t.fp->idle_open && is_begin(k)) {
    t.fp->idle_open = false;
    event(t, kind::idle_end, now, 0, 0, 0, 0);
  }
  event(t, k, now, a, b, c, d);
}

// The CPUs the calling thread may run on (its binding, if it has one).
std::vector<int> thread_cpus() {
  std::vector<int> cpus;
  for (int n = CPU_SETSIZE;; n *= 2) {
    cpu_set_t* set = CPU_ALLOC(n);
    if (set == nullptr) return cpus;
    const std::size_t size = CPU_ALLOC_SIZE(n);
    const int rc = pthread_getaffinity_np(pthread_self(), size, set);
    if (rc == 0)
      for (int c = 0; c < n; ++c)
        if (CPU_ISSET_S(std::size_t(c), size, set)) cpus.push_back(c);
    CPU_FREE(set);
    // EINVAL: the kernel's mask is larger than the set; try a larger one.
    if (rc != EINVAL || n >= (1 << 20)) return cpus;
  }
}

std::string counter_note(const std::vector<std::string>& refused) {
  std::string note;
  for (const auto& r : refused) note += (note.empty() ? "" : "; ") + r;
  return note;
}

}  // namespace

// Writes what the tracks hand over until end_session stops it: each pass
// looks at every track (a slot each, filled as tracks begin) and writes what
// waits; with nothing to write it sleeps until the next hand-off. It holds
// no lock while it writes; SIGTERM and SIGINT go to the other threads (the
// handler waits for a write in progress, which it could not do here).
void writer_main(session& s) {
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGINT);
  pthread_sigmask(SIG_BLOCK, &block, nullptr);
  for (;;) {
    const std::uint32_t seen = s.wake.load(std::memory_order_acquire);
    bool did = false;
    for (std::size_t i = 0; i < s.nslots; ++i)
      if (track* t = s.slots[i].load(std::memory_order_acquire)) did |= write_waiting(s, *t);
    // User names interned since the metadata was written: a run killed later
    // has them named (rare: most are interned once, early).
    if (did && metadata_stale(s)) {
      std::unique_lock<std::mutex> lock(s.mutex, std::try_to_lock);
      if (lock.owns_lock() && metadata_stale(s)) write_metadata(s, nullptr);
    }
    if (did) continue;
    if (s.writer_stop.load(std::memory_order_acquire)) return;
    s.wake.wait(seen, std::memory_order_acquire);
  }
}

}  // namespace internal

using namespace internal;

// --- hooks -------------------------------------------------------------------

namespace detail {

void record(kind k, std::uint32_t a, std::uint32_t b, std::uint32_t c, std::uint32_t d) noexcept {
  track* t = t_track;
  if (t == nullptr) return;
  // The summary counts slices: an instant costs it nothing, not even the
  // time, and a slice's time is read only if it is timed.
  if (t->summary) {
    summary_event(*t, k, a, 0);
    return;
  }
  append(*t, k, base::cycles(), a, b, c, d);
}

void record_adjacent(kind after, kind k, std::uint32_t a, std::uint32_t b, std::uint32_t c,
                     std::uint32_t d) noexcept {
  track* t = t_track;
  if (t == nullptr) return;
  // Summary mode: one clock read for a handler, its entry method and the
  // next handler of the batch, as the buffer's inline path takes.
  if (t->summary) {
    const bool shared = t_fast.stamped == std::uint8_t(after) && !t_fast.idle_open;
    summary_event(*t, k, a, shared ? t->sum.last_now : 0);
    return;
  }
  record(k, a, b, c, d);
}

void idle_enter_slow() noexcept {
  track* t = t_track;
  if (t == nullptr || t_fast.idle_open) return;
  if (t->summary)
    summary_idle(*t, true, base::cycles());
  else
    event(*t, kind::idle_begin, base::cycles(), 0, 0, 0, 0);
  t_fast.idle_open = true;
}

void idle_leave_slow() noexcept {
  track* t = t_track;
  if (t == nullptr || !t_fast.idle_open) return;
  t_fast.idle_open = false;
  if (t->summary)
    summary_idle(*t, false, base::cycles());
  else
    event(*t, kind::idle_end, base::cycles(), 0, 0, 0, 0);
}

void record_progress(std::uint64_t t0, std::uint32_t moved) noexcept {
  track* t = t_track;
  if (t == nullptr || moved == 0) return;
  check_cpu(t_fast);
  append(*t, kind::progress_begin, t0, 0, 0, 0, 0);
  append(*t, kind::progress_end, base::cycles(), moved, 0, 0, 0);
}

void cpu_changed(int cpu) noexcept {
  if (cpu < 0) return;  // no CPU number (no rseq and no getcpu): nothing to record
  // Also on a thread without a track, so that it is not asked again.
  t_fast.cpu = cpu;
  record(kind::cpu, std::uint32_t(cpu), 0, 0, 0);
}
}  // namespace detail

// --- a track's beginning and end -------------------------------------------

void begin_track(track_kind what, int pe, int local) {
  session* s = g_session.load(std::memory_order_acquire);
  if (s == nullptr || t_track != nullptr) return;
  auto t = std::make_unique<track>();
  t->what = what;
  t->pe = pe;
  t->local = local;
  t->cpus = thread_cpus();
  if (what == track_kind::pe && !s->cfg.counters.empty()) {
    t->counters.open(s->cfg.counters, s->cfg.perf_open);
    std::lock_guard<std::mutex> lock(s->mutex);
    if (!s->counters_known) {
      s->counters_known = true;
      s->counter_names = t->counters.opened();
      s->counter_note = counter_note(t->counters.refused());
      // Nobody asked for counters (the default list of --weft:stats and
      // --weft:trace): what the kernel refuses is noted in the metadata
      // only, not said on every run of a machine without them.
      if (!s->counter_note.empty() && s->cfg.counters_asked && !s->cfg.quiet) {
        std::string have;
        for (const auto& n : s->counter_names) have += (have.empty() ? "" : ", ") + n;
        base::info("counters not available: %s; %s", s->counter_note.c_str(),
                   have.empty() ? "no counters this run" : ("counting " + have + " only").c_str());
      }
    }
  }
  if (s->traces && s->cfg.mode == trace_mode::full) {
    t->path = what == track_kind::pe ? node_file(*s, ".pe" + std::to_string(local) + ".events")
                                     : node_file(*s, ".comm.events");
    t->fd = ::open(t->path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (t->fd < 0) base::fatal_sys(errno, "open", "for the trace file %s", t->path.c_str());
    unsigned char header[32] = {};
    std::memcpy(header, magic, 8);
    const std::uint32_t fields[6] = {
        format_version,    std::uint32_t(sizeof(record)), std::uint32_t(s->cfg.node),
        std::uint32_t(pe), std::uint32_t(what),           0};
    std::memcpy(header + 8, fields, sizeof fields);
    if (int err = write_all(t->fd, header, sizeof header); err != 0)
      base::fatal_sys(err, "write", "for the trace file %s (its header)", t->path.c_str());
    t->cap = s->cap;
    t->nbufs = s->pool;
    // Zeroed, so that every page is touched here, before the time line
    // starts: left to the first records, a page fault every ~170 records
    // (4 KiB pages: THP is madvise-only on common kernels) cost the traced
    // run more than the records did.
    for (std::uint32_t i = 0; i < t->nbufs; ++i) t->bufs.emplace_back(new record[t->cap]());
    t->full = std::make_unique<std::atomic<std::uint32_t>[]>(t->nbufs);
    for (std::uint32_t i = 0; i < t->nbufs; ++i) t->full[i].store(0, std::memory_order_relaxed);
  }
  if (s->traces && s->cfg.mode == trace_mode::summary) t->summary = true;
  track* raw = t.get();
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->tracks.push_back(std::move(t));
    s->track_count.store(s->tracks.size(), std::memory_order_relaxed);
  }
  t_own = raw;
  if (!s->traces) return;  // counters only, for --weft:stats
  bool took_base = false;
  if (what == track_kind::pe && s->pes_begun.fetch_add(1) + 1 == s->cfg.pes) {
    take_base(*s);
    s->base_ready.store(true, std::memory_order_release);
    took_base = true;
  }
  while (!s->base_ready.load(std::memory_order_acquire)) sched_yield();
  // A PE waited here from before the time line began: its track starts
  // with it (its first counts are read now, a moment later).
  const std::uint64_t now = what == track_kind::pe ? s->tsc_base : base::cycles();
  raw->first_tick = raw->last_tick = tick_of(*s, now);
  detail::fast_path& f = detail::t_fast;
  f = {};
  f.base = s->tsc_base;
  raw->fp = &f;
  if (s->cfg.mode == trace_mode::full) {
    f.next = f.first = raw->bufs[0].get();
    f.limit = f.first + (raw->cap - 2);  // put_tick()'s flush mark
  }
  if (raw->summary) summary_begin(*raw, *s);
  t_track = raw;
  if (s->cfg.mode == trace_mode::full) {
    put_counters(*raw, now);
    // Every track begins with the CPU it starts on.
    const int cpu = sched_getcpu();
    if (cpu >= 0) put(*raw, kind::cpu, now, std::uint32_t(cpu), 0, 0, 0);
    f.cpu = cpu;
    // Visible to the signal handler from here on (its buffer and file are).
    for (std::size_t i = 0; i < s->nslots; ++i) {
      track* empty = nullptr;
      if (s->slots[i].compare_exchange_strong(empty, raw, std::memory_order_release)) break;
    }
  }
  // The metadata of a run that is killed from here on: the time line's
  // clock and every track. Written by the PE that took the base (the others
  // began before it, so their tracks are listed) and by a track that began
  // later (a comm thread); it costs that thread its first ~0.1 ms, overhead
  // on its track.
  if (took_base || (what != track_kind::pe && metadata_stale(*s))) {
    std::lock_guard<std::mutex> lock(s->mutex);
    if (took_base || metadata_stale(*s)) write_metadata(*s, nullptr);
  }
}

std::vector<std::uint64_t> track_counters() {
  track* t = t_own;
  if (t == nullptr) return {};
  return t->final_counters.empty() ? t->counters.read() : t->final_counters;
}

void end_track() {
  track* t = t_own;
  session* s = g_session.load(std::memory_order_acquire);
  if (t == nullptr || s == nullptr) return;
  std::uint64_t now = base::cycles();
  if (t_track != nullptr && t->what == track_kind::pe) {
    // The time line ends when the last PE gets here; the others wait (idle,
    // if they were) and end with it, so every PE track spans the same run.
    if (s->pes_ending.fetch_add(1) + 1 == s->cfg.pes) {
      s->end_tsc = base::cycles();
      s->end_mono = base::wall_ns();
      s->end_ready.store(true, std::memory_order_release);
    }
    while (!s->end_ready.load(std::memory_order_acquire)) sched_yield();
    now = s->end_tsc;
  }
  if (t_track != nullptr) {
    if (t->fp->idle_open && !t->summary) {
      t->fp->idle_open = false;
      put(*t, kind::idle_end, now, 0, 0, 0, 0);
    }
    if (s->cfg.mode == trace_mode::full) {
      // Nothing is lost at a normal end: a track that drops events waits for
      // a buffer (the count goes in), and the last one goes to the writer
      // like the others; the end record follows once all are written.
      // Waiting ends with an abort, which writes what it can.
      auto wait = [&](auto done) {
        for (int i = 0; !done() && !s->aborted.load(std::memory_order_acquire); ++i)
          if (i < 64)
            sched_yield();
          else
            sleep_us(100);
      };
      // Stamped with the end's time: the track ends with the others.
      wait([&] { return !t->dropping || t->failed.load() || resume(*t, now); });
      // Where the thread ends, if it moved since the last scheduler point.
      if (const int cpu = sched_getcpu(); cpu >= 0 && cpu != t->fp->cpu)
        put(*t, kind::cpu, now, std::uint32_t(cpu), 0, 0, 0);
      put_counters(*t, now);
      if (!t->dropping) {
        if (const std::uint32_t n = count(*t); n != 0) hand_off(*t, n);
        t->dropping = true;  // nothing more goes into a buffer
      }
      wait([&] {
        for (std::uint32_t i = 0; i < t->nbufs; ++i)
          if (t->full[i].load(std::memory_order_acquire) != 0) return false;
        return true;
      });
      // The file is complete with its end record: it stays taken, so
      // neither the abort path nor the signal handler touches it again.
      int expect = file_free;
      if (t->file.compare_exchange_strong(expect, file_taken, std::memory_order_acquire)) {
        if (t->fd >= 0 && !t->failed.load())
          write_end_record(*t, end_how::exit, 0, tick_of(*s, now));
        if (t->fd >= 0) ::close(t->fd);
        t->fd = -1;
      }
    } else {
      summary_end(*t, now);
    }
  }
  t->last_tick = tick_of(*s, now);
  t->final_counters = t->counters.read();
  t->counters.close();
  if (t->fd >= 0) {
    // The abort path may be writing this track's buffers: the file stays
    // open then.
    int expect = file_free;
    if (t->file.compare_exchange_strong(expect, file_taken, std::memory_order_acquire)) {
      ::close(t->fd);
      t->fd = -1;
    }
  }
  detail::t_fast = {};
  t_track = nullptr;
  t_own = nullptr;
}

}  // namespace weft::trace
