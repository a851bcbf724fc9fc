// How a node's trace ends: each track's end record, and the two ways of
// ending that do not come through end_session: the abort path (a fatal
// error, --weft:timeout: abort_session, from the failing thread) and
// SIGTERM or SIGINT (a handler that writes out what it can, then lets the
// signal take its default action).
//
// Each track's file ends with an end record saying how the run ended; a file
// without one was cut off (SIGKILL). After a fatal error the failing thread
// writes out the other tracks' buffers too: those handed to the writer and
// not yet written, then what the one being filled has published (each
// buffer's count is published with a release store after its record), and
// the count of events dropped since the last dropped record. A track's
// `file` hold keeps the writer thread, the owner's end and the abort path
// from writing the same file at once.
// SIGTERM and SIGINT do the same from a handler that uses only
// async-signal-safe calls (write, rename, atomics): the metadata it writes is
// rendered beforehand (metadata.cpp).
//
// The calls here (open, write, rename, sigaction) stay out of base/os: they
// must be async-signal-safe as written, and every failure is ignored on
// purpose, the fatal message or the signal being what matters then.
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <string>
#include "session_state.hpp"
#include "weft/base/error.hpp"
#include "weft/base/timer.hpp"

namespace weft::trace {
namespace internal {

// Appends the track's end record to its file, at `tick` or after the last
// record written. The caller holds the file (track::file). Async-signal-safe:
// write(2) alone.
void write_end_record(track& t, end_how how, int signal, std::uint64_t tick) {
  tick = std::max(tick, t.written_tick.load(std::memory_order_relaxed));
  const record r{tick << 8 | std::uint64_t(kind::end), std::uint32_t(how), std::uint32_t(signal), 0,
                 0};
  (void)write_all(t.fd, &r, sizeof r);
}

namespace {

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    default:
      return "signal";
  }
}

// --- SIGTERM and SIGINT ------------------------------------------------------

struct sigaction g_old_actions[2];
bool g_installed[2] = {false, false};
constexpr int g_signals[2] = {SIGTERM, SIGINT};
std::atomic<bool> g_in_signal{false};

// Decimal digits of v at p; returns the end. Async-signal-safe.
char* put_u64(char* p, std::uint64_t v) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = char('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0) *p++ = digits[--n];
  return p;
}
char* put_text(char* p, const char* text) {
  while (*text != '\0') *p++ = *text++;
  return p;
}

// Takes the track's file for good, waiting for a write of the writer
// thread's to end (a buffer takes milliseconds; a second at most, so that a
// file system that hangs does not hang the abort). False when the file is
// taken already: its owner ended it (complete) or the writer never let go.
// Async-signal-safe: atomics and nanosleep.
bool take_file(track& t) {
  for (int i = 0; i < 1000; ++i) {
    int expect = file_free;
    if (t.file.compare_exchange_strong(expect, file_taken, std::memory_order_acquire)) return true;
    if (expect == file_taken) return false;
    timespec ts{0, 1000000};
    ::nanosleep(&ts, nullptr);
  }
  return false;
}

// After an abort, a timeout or a signal: writes out what every track's
// buffers hold (those handed to the writer, in order, then the published
// part of the one being filled), the events it dropped and its end record.
// Async-signal-safe: the tracks are in slots, the counts and file holds
// lock-free atomics. The owner, if it still runs, goes on filling its
// buffers; with the file taken the writer writes none of them again.
void write_buffers_at_end(session& s, end_how how, int sig, std::uint64_t tick) {
  if (s.cfg.mode != trace_mode::full) return;
  for (std::size_t i = 0; i < s.nslots; ++i) {
    track* t = s.slots[i].load(std::memory_order_acquire);
    if (t == nullptr || !take_file(*t)) continue;
    if (t->fd < 0 || t->failed.load(std::memory_order_relaxed)) continue;
    bool ok = true;
    for (std::uint32_t k = 0; ok && k < t->nbufs; ++k) {
      const std::uint32_t b = (t->wnext + k) % t->nbufs;
      const std::uint32_t n = t->full[b].load(std::memory_order_acquire);
      if (n == 0) break;  // the one being filled, or free
      ok = write_all(t->fd, t->bufs[b].get(), std::size_t(n) * sizeof(record)) == 0;
      if (ok) t->written_tick.store(t->bufs[b][n - 1].w >> 8, std::memory_order_relaxed);
    }
    // The buffer being filled: `next` within it (null while the track drops
    // events or hands a buffer off).
    const std::uint32_t c = t->cur.load(std::memory_order_acquire);
    const record* first = t->bufs[c].get();
    const record* next = std::atomic_ref<record*>(t->fp->next).load(std::memory_order_acquire);
    if (ok && t->full[c].load(std::memory_order_acquire) == 0 && next > first &&
        next <= first + t->cap) {
      const std::size_t n = std::size_t(next - first);
      ok = write_all(t->fd, first, n * sizeof(record)) == 0;
      if (ok) t->written_tick.store(first[n - 1].w >> 8, std::memory_order_relaxed);
    }
    if (!ok) continue;
    if (const std::uint64_t lost = t->dropped.load(std::memory_order_relaxed); lost != 0) {
      const std::uint64_t at = std::max(tick, t->written_tick.load(std::memory_order_relaxed));
      const record r = dropped_record(at, lost, t->drop_tick);
      if (write_all(t->fd, &r, sizeof r) == 0) t->written_tick.store(at, std::memory_order_relaxed);
    }
    write_end_record(*t, how, sig, tick);
  }
}

// The metadata as last written with `tail` for its ending, without a lock
// or an allocation (async-signal-safe), through its own temporary file.
void write_prerendered_metadata(session& s, const char* tail, std::size_t n) {
  const std::string* body = s.signal_meta.load(std::memory_order_acquire);
  if (body == nullptr) return;
  const int fd = ::open(s.signal_tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const bool ok = write_all(fd, body->data(), body->size()) == 0 && write_all(fd, tail, n) == 0;
  ::close(fd);
  if (ok) ::rename(s.signal_tmp_path.c_str(), s.meta_path.c_str());
}

// Writes out every track's buffer and end record and the metadata, then the
// signal takes its default action (SA_RESETHAND put it back; a second signal
// meanwhile ends the process at once). Only async-signal-safe calls: the
// buffers' counts and the file holds are lock-free atomics, files are
// written with open/write/rename, the metadata's body was rendered before.
void on_end_signal(int sig) {
  const int saved_errno = errno;
  g_in_signal.store(true);
  session* s = g_session.load(std::memory_order_acquire);
  if (s != nullptr && s->traces && !s->aborted.exchange(true)) {
    const std::uint64_t tick = tick_of(*s, base::cycles());
    write_buffers_at_end(*s, end_how::signal, sig, tick);
    char tail[256];
    char* p = put_text(tail, "  \"end\": {\"how\": \"signal\", \"tick\": ");
    p = put_u64(p, tick);
    p = put_text(p, ", \"signal\": ");
    p = put_u64(p, std::uint64_t(sig));
    p = put_text(p, ", \"message\": \"");
    p = put_text(p, signal_name(sig));
    p = put_text(p, "\"},\n  \"complete\": false, \"aborted\": true\n}\n");
    write_prerendered_metadata(*s, tail, std::size_t(p - tail));
  }
  errno = saved_errno;
  ::raise(sig);
}

}  // namespace

// Handles SIGTERM and SIGINT where nobody else does (the program, MPI).
void install_signal_handlers() {
  for (int i = 0; i < 2; ++i) {
    struct sigaction old {};
    if (::sigaction(g_signals[i], nullptr, &old) != 0) continue;
    if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) continue;
    struct sigaction sa {};
    sa.sa_handler = on_end_signal;
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (::sigaction(g_signals[i], &sa, &g_old_actions[i]) == 0) g_installed[i] = true;
  }
}

void remove_signal_handlers() {
  for (int i = 0; i < 2; ++i) {
    if (!g_installed[i]) continue;
    g_installed[i] = false;
    struct sigaction now {};
    if (::sigaction(g_signals[i], nullptr, &now) == 0 && (now.sa_flags & SA_SIGINFO) == 0 &&
        now.sa_handler == on_end_signal)
      ::sigaction(g_signals[i], &g_old_actions[i], nullptr);
  }
  // A handler already running ends the process: the session stays for it.
  if (g_in_signal.load()) {
    for (;;) ::pause();
  }
}

}  // namespace internal

using namespace internal;

void abort_session(end_how how, const char* message) noexcept {
  session* s = g_session.load(std::memory_order_acquire);
  if (s == nullptr || !s->traces || s->aborted.exchange(true)) return;
  // Other threads may still run (a hung PE, under --weft:timeout): take
  // nothing that one of them could hold for long, and write only what each
  // buffer has published.
  const std::uint64_t tick = tick_of(*s, base::cycles());
  write_buffers_at_end(*s, how, 0, tick);
  try {
    run_end end{how, message != nullptr ? message : "", tick};
    // The mutex is held only to write the metadata or to add a track: wait
    // a little for it, then fall back on the metadata as last written.
    std::unique_lock<std::mutex> lock(s->mutex, std::defer_lock);
    for (int i = 0; i < 200 && !lock.try_lock(); ++i) ::usleep(1000);
    if (lock.owns_lock()) {
      write_metadata(*s, &end);
    } else {
      std::string tail = std::string("  \"end\": {\"how\": \"") + how_name(how) +
                         "\", \"tick\": " + std::to_string(tick);
      if (!end.message.empty()) tail += ", \"message\": " + json_string(end.message);
      tail += "},\n  \"complete\": false, \"aborted\": true\n}\n";
      write_prerendered_metadata(*s, tail.data(), tail.size());
    }
  } catch (...) {
    // Out of memory while failing: the fatal message is what matters.
  }
}

void abort_session() noexcept {
  abort_session(end_how::fatal, base::fatal_message());
}

}  // namespace weft::trace
