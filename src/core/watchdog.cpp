// --weft:timeout=SEC. A hang becomes an abort with a per-PE dump: what each PE
// is doing (running a handler, spinning, yielding, asleep), which handler,
// how many messages wait in its queue, its counters, and a stack backtrace
// captured on that PE's own thread by a signal. Exit code 124.
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include "base/symbolize.hpp"
#include "core/node.hpp"
#include "weft/base/error.hpp"
#include "weft/base/timer.hpp"
#include "weft/trace/session.hpp"

namespace weft::core {

namespace {

int backtrace_signal() {
  return SIGRTMIN + 4;
}

void on_backtrace_signal(int) {
  pe_state* pe = t_pe;
  if (pe == nullptr) return;
  int depth = backtrace(pe->bt_frames, int(sizeof pe->bt_frames / sizeof pe->bt_frames[0]));
  pe->bt_depth.store(depth, std::memory_order_relaxed);
  pe->bt_ready.store(true, std::memory_order_release);
}

const char* current_text(std::int64_t h, char* buf, std::size_t n) {
  if (h == -1) return "none";
  if (h == -2) return "main function";
  if (h == -3) return "timer callback";
  std::snprintf(buf, n, "'%s' (id %lld)", handler_name(handler_id(h)), (long long)h);
  return buf;
}

// Plain write(2) to stderr, on the way to an abort: a failed write has
// nowhere to be reported, and the dump goes on. A PE whose thread cannot be
// signalled (pthread_kill fails: it ended) gets no backtrace.
void dump(node_state& node) {
  char line[512];
  std::snprintf(line, sizeof line,
                "weft: timeout: the node still runs after --weft:timeout=%g s; aborting. PE "
                "state:\n",
                node.cfg.timeout_s);
  ssize_t w = write(STDERR_FILENO, line, std::strlen(line));
  std::size_t nq = node.node_queue_size.load();
  std::snprintf(line, sizeof line, "  node queue: %zu message(s); quiescence requested: %s\n", nq,
                node.qd_requested.load() ? "yes" : "no");
  w = write(STDERR_FILENO, line, std::strlen(line));
  // Names the frames from the objects' symbol tables, weft's hidden
  // functions included; without libdw, backtrace_symbols_fd names only what
  // the dynamic symbol tables export.
  base::symbolizer symbols;
  bool unnamed = false;
  for (auto& pe : node.pes) {
    // Counting the MPSC queue walks its links, which is safe only while the
    // PE does not pop (and free) messages: when it is inside a handler (the
    // usual hang), asleep or stopped. Otherwise say only whether it is empty.
    // The rings are counted by their indices and the local FIFO by its
    // counter, always safe.
    const std::int64_t h = pe->current_handler.load();
    const pe_phase phase = pe_phase(pe->phase.load());
    const bool still = h != -1 || phase == pe_phase::sleeping || phase == pe_phase::stopped;
    char qtext[64];
    const std::size_t ring = (pe->pairs ? pe->pairs->approx_size() : 0) +
                             pe->local_count.load(std::memory_order_relaxed);
    if (still)
      std::snprintf(qtext, sizeof qtext, "%zu message(s)", pe->queue.approx_size() + ring);
    else if (pe->queue.empty())
      std::snprintf(qtext, sizeof qtext, "%zu message(s)", ring);
    else
      std::snprintf(qtext, sizeof qtext, "%zu+ message(s) (PE busy: not all counted)", ring + 1);
    char hb[160];
    std::snprintf(line, sizeof line,
                  "  PE %d: %s; current handler: %s; queue: %s; sent %llu, handled %llu\n",
                  pe->rank, to_string(phase), current_text(h, hb, sizeof hb), qtext,
                  (unsigned long long)pe->sent.load(), (unsigned long long)pe->processed.load());
    w = write(STDERR_FILENO, line, std::strlen(line));
    if (!pe->has_thread.load(std::memory_order_acquire)) continue;
    pe->bt_ready.store(false);
    if (pthread_kill(pe->thread, backtrace_signal()) != 0) continue;
    for (int i = 0; i < 200 && !pe->bt_ready.load(std::memory_order_acquire); ++i) usleep(1000);
    if (pe->bt_ready.load(std::memory_order_acquire)) {
      w = write(STDERR_FILENO, "    backtrace:\n", 15);
      if (symbols.ok()) {
        unnamed |= symbols.write(STDERR_FILENO, pe->bt_frames, pe->bt_depth.load()) > 0;
      } else {
        backtrace_symbols_fd(pe->bt_frames, pe->bt_depth.load(), STDERR_FILENO);
        unnamed = true;
      }
    } else {
      static const char no_bt[] = "    (no backtrace: the thread did not answer)\n";
      w = write(STDERR_FILENO, no_bt, sizeof no_bt - 1);  // not the terminating NUL
    }
  }
  // Say how to name the frames left unnamed: without libdw they print as
  // binary(+offset), and a frame no symbol covers as 0x...(object+offset).
  char exe[400];
  ssize_t n = unnamed && !symbols.ok() ? readlink("/proc/self/exe", exe, sizeof exe - 1) : 0;
  if (unnamed && symbols.ok()) {
    static const char hint[] =
        "  (frames shown as 0x... (object+offset): addr2line -C -f -e <object> <offset> names "
        "them)\n";
    w = write(STDERR_FILENO, hint, sizeof hint - 1);
  } else if (n > 0) {
    exe[n] = '\0';
    std::snprintf(
        line, sizeof line,
        "  (frames shown as binary(+offset): addr2line -C -f -e %s <offset> names them)\n", exe);
    w = write(STDERR_FILENO, line, std::strlen(line));
  }
  (void)w;
}

void watchdog_main(node_state* node) {
  std::unique_lock<std::mutex> lock(node->wd_mutex);
  auto limit = std::chrono::duration<double>(node->cfg.timeout_s);
  if (node->wd_cv.wait_for(lock, limit, [node] { return node->wd_done; })) return;
  const std::vector<void (*)(int)> layers = node->wd_dumps;
  lock.unlock();
  dump(*node);
  for (auto* layer_dump : layers) layer_dump(STDERR_FILENO);
  std::fflush(stdout);
  // What the PEs recorded is what a user needs to see the hang: the trace
  // writes it out and says the run timed out (the transport's abort does
  // not run the fatal hook).
  trace::abort_session(trace::end_how::timeout, "--weft:timeout expired");
  node->transport->abort(base::exit_timeout, "--weft:timeout expired");
}

}  // namespace

void install_backtrace_handler() {
  static bool done = false;
  if (done) return;
  done = true;
  void* warm[2];
  backtrace(warm, 2);  // loads the unwinder now, not inside a signal handler
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_backtrace_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(backtrace_signal(), &sa, nullptr) != 0)
    base::fatal_sys(errno, "sigaction", "for the watchdog's backtrace signal %d",
                    backtrace_signal());
}

void start_watchdog(node_state& node, std::thread& thread) {
  if (node.cfg.timeout_s <= 0) return;
  thread = std::thread(watchdog_main, &node);
}

void stop_watchdog(node_state& node, std::thread& thread) {
  if (!thread.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(node.wd_mutex);
    node.wd_done = true;
  }
  node.wd_cv.notify_all();
  thread.join();
}

}  // namespace weft::core
