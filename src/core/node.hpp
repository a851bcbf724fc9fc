// Library-private state of a running node: one node_state per weft::run, one
// pe_state per PE. Shared fields carry their ownership and concurrency notes.
#pragma once
#include <atomic>
#include <bit>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>
#include "core/handler_table.hpp"
#include "weft/base/cache.hpp"
#include "weft/base/mpsc_queue.hpp"
#include "weft/base/os.hpp"
#include "weft/base/spsc_pairs.hpp"
#include "weft/base/topology.hpp"
#include "weft/core/pe.hpp"
#include "weft/core/run.hpp"
#include "weft/core/send.hpp"
#include "weft/net/transport.hpp"

namespace weft::core {

// What a PE is doing, for the watchdog's dump.
enum class pe_phase : int { starting, running, spinning, yielding, sleeping, stopped };
const char* to_string(pe_phase p);

struct timer_entry {
  std::uint64_t deadline_ns;
  std::uint64_t seq;  // FIFO among equal deadlines
  std::function<void()> fn;
  bool operator>(const timer_entry& o) const {
    return deadline_ns != o.deadline_ns ? deadline_ns > o.deadline_ns : seq > o.seq;
  }
};

// A message waiting in a PE's priority order: higher priority first, then
// arrival order.
struct held_message {
  std::int32_t priority;
  std::uint64_t seq;
  message* m;
  bool operator<(const held_message& o) const {
    return priority != o.priority ? priority < o.priority : seq > o.seq;
  }
};

struct pe_state {
  explicit pe_state(int rank, int num_pes, queue_kind kind);

  const int rank;

  // --- incoming messages: written by producers, consumed by this PE only.
  base::mpsc_queue queue;  // queue=mpsc: every producer; queue=spsc-pairs: non-PE threads
  std::unique_ptr<base::spsc_pairs<message*>> pairs;  // queue=spsc-pairs: one ring per PE

  // Futex word: 1 while this PE sleeps or is about to. Written by this PE
  // (set) and by the producer that wakes it (cleared); both sides order it
  // against the queue with seq_cst (see scheduler.cpp, "wake-up protocol").
  alignas(base::cache_line) std::atomic<int> sleeping{0};

  // Carrier threads of this PE (layer threads: OS threads that run a
  // logical thread in the PE's place, on its CPUs) that are runnable now.
  // Written by the carriers, read by this PE's idle back-off: while one is
  // runnable, the PE yields its CPU instead of spinning on it.
  alignas(base::cache_line) std::atomic<int> guests{0};

  // --- counters written only by this PE (relaxed stores of its own value),
  // read by PE 0 for quiescence and by the watchdog and stats at the end.
  alignas(base::cache_line) std::atomic<std::uint64_t> sent{0};
  std::atomic<std::uint64_t> processed{0};
  std::atomic<std::int64_t> current_handler{-1};
  std::atomic<int> phase{int(pe_phase::starting)};
  // What this PE ran last (a handler id, or a run_kind below), and about
  // when it finished: the start of the first idle period after it. Read by
  // the end-of-job check (quiescent_exit.cpp) to say what ran last. The
  // handler is one relaxed store per message to a line the PE writes for
  // that message anyway; the time is taken only as an idle period begins,
  // from the clock read the back-off makes there.
  std::atomic<std::int64_t> last_run{-1};
  std::atomic<std::uint64_t> last_run_ns{0};

  // --- owned by this PE only.
  // Messages this PE sent to itself, FIFO, with no atomic operation. Through
  // the MPSC queue a self-send exchanged the very line other PEs push to,
  // and under kNeighbor (half of the sends go to the own PE at 2 PEs) that
  // line moved between the cores several times per iteration.
  message* local_head = nullptr;
  message* local_tail = nullptr;
  bool local_first = false;  // pop_own alternates, so neither queue starves the other
  // Messages from the network that this PE delivered to itself while it
  // drove the transport, FIFO, with no atomic operation (the MPSC push and
  // the pop's stub exchange were two locked instructions on the path of
  // every message a non-SMP process receives). Used only while the MPSC
  // queue is empty, and popped before it: so a message of one source node
  // never overtakes an earlier one that another thread delivered (see
  // deliver_local).
  message* net_head = nullptr;
  message* net_tail = nullptr;
  // How many wait in the local and net queues, for the watchdog (a relaxed
  // store of the owner's count; it is the only writer).
  std::atomic<std::size_t> local_count{0};
  std::priority_queue<timer_entry, std::vector<timer_entry>, std::greater<>> timers;
  std::uint64_t timer_seq = 0;
  std::vector<std::function<bool()>> conditions;
  // Messages popped while a prioritised one was queued (empty unless some
  // message has a non-zero priority: then the scheduler pays nothing).
  std::priority_queue<held_message> prioritized;
  std::uint64_t held_seq = 0;
  bool pairs_backlog = false;       // this PE has spsc-pairs overflow to flush
  std::uint64_t idle_since_ns = 0;  // start of the current idle period (0: busy)
  std::uint64_t idle_mark = 0;      // `processed` as the last idle period began
  // Statistics (stats=on), in cycles.
  std::uint64_t busy_cycles = 0, idle_cycles = 0, start_cycles = 0, end_cycles = 0;
  std::uint64_t cpu_changes = 0;
  int mem_node = -1;  // --weft:stats: the NUMA node of a block the PE allocated (-1: unknown)
  int last_cpu = -1;
  // perf_event counts of the PE's thread (stats or trace on), read as it ends.
  std::vector<std::uint64_t> counter_values;

  // --- set by the PE at start, read by the watchdog.
  std::atomic<bool> has_thread{false};
  pthread_t thread{};
  // Its thread's CPU-time clock and kernel thread id (-1: not yet), for
  // detail::pe_cpu_time_ns and detail::pe_blocked.
  std::atomic<int> cpu_clock{-1};
  std::atomic<int> tid{-1};
  // Backtrace captured by the watchdog's signal (written in the handler,
  // read after `bt_ready`).
  void* bt_frames[48] = {};
  std::atomic<int> bt_depth{0};
  std::atomic<bool> bt_ready{false};
};

// Who drives the transport (--weft:comm). none: a one-node run.
enum class comm_mode { none, thread, workers, hybrid };
const char* to_string(comm_mode m);

// What the comm mode asks of the node's threads, chosen once with the mode
// (comm_policy_of, net_start, before the PEs start) and read where the
// modes differ, so that the scheduler and the send path ask what to do,
// never which mode runs. Flags, not a function table (Argobots' pool and
// scheduler defs): the sites are on the path of every scheduler turn and of
// every message to another node, where a flag costs the one load and
// branch the mode's test did and an indirect call would cost more, and the
// functions they call stay inline (docs/design/scheduler.md, "The comm mode
// and the queue kind: chosen once").
struct comm_policy {
  bool pes_drive = false;            // workers: each scheduler turn and each send to
                                     // another node drive the transport themselves
  bool idle_pes_poll = false;        // workers, hybrid: idle PEs poll the network
  bool comm_thread = false;          // thread, hybrid: a comm thread drives it
  bool idle_pe_waits_in_it = false;  // workers over a transport that can wait: one
                                     // idle PE sleeps inside it
};
comm_policy comm_policy_of(comm_mode m, bool transport_waits);

// Messages for another node wait here until whoever drives the transport
// hands them to it: one lock-free queue per destination node, so the node
// needs no room in the message header while it waits.
struct outbox {
  base::mpsc_queue queue;
};

struct node_state {
  runtime_config cfg;
  std::unique_ptr<net::transport> transport;
  // Fixed once PEs start; read by every send, on lines of its own.
  std::vector<std::unique_ptr<pe_state>, base::line_allocator<std::unique_ptr<pe_state>>> pes;

  // --- the job (fixed before PEs start). PEs are numbered across the job:
  // node n has PEs first_pe .. first_pe + pes.size() - 1, every node the same
  // count.
  int node_id = 0;
  int num_nodes = 1;
  int first_pe = 0;
  int total_pes = 1;
  int host_pes = 0;  // PEs of all the job's processes on this host (0: this node's only)
  // The handler table, frozen for the run (run() sets these as it freezes
  // it): the message path reads them without handlers()'s guard.
  const handler_entry* handler_entries = nullptr;
  std::size_t num_handlers = 0;
  comm_mode comm = comm_mode::none;
  comm_policy policy;                  // follows from comm (fixed before PEs start)
  std::unique_ptr<outbox[]> outboxes;  // one per node (this node's stays empty)
  // Messages in the outboxes (a hint that spares the scan when zero).
  alignas(base::cache_line) std::atomic<std::int64_t> outbox_count{0};
  // Held by the thread inside the transport (calls are serialised, see
  // net/transport.hpp).
  alignas(base::cache_line) std::atomic<bool> comm_busy{false};
  // The comm thread: its sleep word (1 while it sleeps, as for a PE) and stop.
  alignas(base::cache_line) std::atomic<int> comm_sleeping{0};
  std::atomic<bool> comm_stop{false};
  std::atomic<bool> net_closed{false};  // net_stop holds the transport for good
  bool transport_waits = false;         // the transport can block until something arrives
  bool transport_pauses = true;         // a polling loop pauses between progress() calls
  // comm=workers: 1 while a PE sleeps inside the transport (its sleep word
  // is then 2): a send for another node must ring the transport to wake it.
  alignas(base::cache_line) std::atomic<int> transport_sleeping{0};
  // Quiescence across nodes (node 0): the wave in flight and its replies.
  std::mutex qd_wave_mutex;
  std::uint64_t qd_wave = 0;           // guarded by qd_wave_mutex
  int qd_replies = 0;                  // guarded by qd_wave_mutex
  std::uint64_t qd_wave_sent = 0;      // guarded by qd_wave_mutex
  std::uint64_t qd_wave_done = 0;      // guarded by qd_wave_mutex
  bool qd_wave_open = false;           // guarded by qd_wave_mutex
  std::uint64_t qd_prev_sent = ~0ull;  // PE 0 of node 0 only
  std::uint64_t qd_prev_done = 0;      // PE 0 of node 0 only
  bool node_of_pe(int pe, int& node, int& local) const {
    if (pe < 0 || pe >= total_pes) return false;
    const auto per = unsigned(pes.size());
    // A power of two (1 in non-SMP runs) skips the division: an idiv is
    // 10-40 cycles on the path of every message to another node.
    if ((per & (per - 1)) == 0) {
      node = pe >> std::countr_zero(per);
      local = pe & int(per - 1);
      return true;
    }
    node = pe / int(per);
    local = pe - node * int(per);
    return true;
  }

  // Node queue: any PE may take. A short lock around a deque (lesson 2:
  // locks only around what is not thread-safe); the size is read without the
  // lock so a PE that finds it empty pays nothing.
  std::mutex node_mutex;
  std::deque<message*> node_queue;  // guarded by node_mutex
  alignas(base::cache_line) std::atomic<std::size_t> node_queue_size{0};
  // PEs sleeping or about to (for waking one on send_node).
  alignas(base::cache_line) std::atomic<int> sleepers{0};
  // Which PEs those are: bit r % 64 of word r / 64, set by PE r before its
  // sleep word and cleared after (same wake-up protocol). A waker finds a
  // sleeper in P / 64 loads instead of reading every PE's sleep word
  // (O(P) per exposed task or node message: DESIGN.md, lesson 13).
  struct alignas(base::cache_line) sleeper_word {
    std::atomic<std::uint64_t> bits{0};
  };
  std::unique_ptr<sleeper_word[]> sleeper_mask;
  int sleeper_words = 0;
  // PEs in an idle period (detail::idle_pes): each PE adds itself once when
  // a period begins and removes itself when it ends, so a busy node never
  // writes this line. A period begins only after the PE's quick spin (about
  // a microsecond) found nothing: a PE that exchanges messages (a reply
  // back within the spin) never writes it (scheduler.cpp, quick_spin).
  // Read relaxed by the tasks layer to decide how many tasks to expose.
  alignas(base::cache_line) std::atomic<int> idle_pes{0};
  // The tasks layer's scheduler hooks (fixed before PEs start; null members
  // when that layer is not linked).
  detail::scheduler_hooks tasks{};

  alignas(base::cache_line) std::atomic<bool> stop{false};
  std::atomic<int> exit_code{0};
  std::atomic<bool> exit_called{false};

  // Messages sent by threads that are not PEs (quiescence counts them).
  alignas(base::cache_line) std::atomic<std::uint64_t> external_sent{0};

  // --- the end of a job that forgot weft::exit (quiescent_exit.cpp).
  // poll_while conditions waiting on all PEs: added by poll_while, removed
  // by the PE whose condition returned false (rare: never per message).
  alignas(base::cache_line) std::atomic<int> conditions{0};
  // The node serves a program's own thread (detail::start_attached_node).
  bool attached = false;  // fixed before PEs start
  std::mutex callers_mutex;
  // Kernel thread ids of the process as the PEs started (sorted): the
  // program's threads from before weft::run and the transport's own. A
  // thread not among them and not weft's is the program's, made during the
  // run, and may still send. (Guarded: the comm thread, older, reads it.)
  std::vector<int> start_tids;  // guarded by callers_mutex
  // Threads that are not PEs and have called into this node (sorted; a
  // thread adds itself on its first call).
  std::vector<int> caller_tids;  // guarded by callers_mutex
  std::uint64_t run_seq = 0;     // this run's number in the process (fixed)
  // The check itself, on PE 0 of node 0 only (quiescent_exit.cpp).
  bool qe_watch = false;            // on for this node (fixed before PEs start)
  bool qe_active = false;           // a check is under way (PE 0 reads it to poll)
  std::uint64_t qe_period = 0;      // the idle period of PE 0 the due time is for
  std::uint64_t qe_due_ns = 0;      // when the next check starts
  std::uint64_t qe_backoff_ns = 0;  // the wait before the next check after a failed one
  std::uint64_t qe_mark = 0;        // PE 0's `processed` when the wait last started afresh
  std::uint64_t qe_first_wave = 0;  // qd_wave as the check began
  int qe_stage = 0;                 // 0: counting waves, 1: inspection out
  // Inspection across nodes: the replies (guarded by qd_wave_mutex).
  std::uint64_t qd_quiet_sent = 0, qd_quiet_done = 0;  // totals of the last quiet pair of waves
  bool qi_open = false;
  std::uint64_t qi_wave = 0;
  int qi_replies = 0;
  std::uint64_t qi_sent = 0, qi_done = 0;
  std::uint32_t qi_blockers = 0;
  std::int64_t qi_last_run = -1;
  int qi_last_pe = -1;
  std::uint64_t qi_last_ns = 0;

  // Quiescence detection, owned by PE 0 (requests may come from any PE).
  std::mutex qd_mutex;
  std::vector<std::function<void()>> qd_callbacks;  // guarded by qd_mutex
  std::atomic<bool> qd_requested{false};
  std::vector<std::uint64_t> qd_last;  // PE 0 only
  bool qd_last_valid = false;          // PE 0 only
  std::uint64_t qd_last_check = 0;     // PE 0 only

  std::function<void(args)> main_fn;
  args main_args{};
  std::atomic<bool> main_running{false};  // main_fn is running on PE 0

  // Watchdog.
  std::mutex wd_mutex;
  std::condition_variable wd_cv;
  bool wd_done = false;                 // guarded by wd_mutex
  std::vector<void (*)(int)> wd_dumps;  // weft::on_timeout_dump; guarded by wd_mutex

  std::uint64_t start_ns = 0;
  std::vector<base::numa_counts> numa_at_start;  // --weft:stats
};

// The running node (null when none). Set by run before PEs start, cleared
// after they stop. Hidden, as its definition is: every send reads it, and a
// declaration of default visibility is read through the GOT from files other
// than node.cpp.
[[gnu::visibility("hidden")]] extern std::atomic<node_state*> g_node;
// This thread's PE (null on threads that are not PEs). constinit: read on
// every send and delivery, and so read directly, not through the TLS
// initialisation wrapper of a thread_local defined in another file.
extern constinit thread_local pe_state* t_pe WEFT_TLS_FAST;

// Futex on a PE's sleep word. wait: sleeps while *word == expected, at most
// timeout_ns (0: no limit). wake: wakes one sleeper.
inline void futex_wait(std::atomic<int>* word, int expected, std::uint64_t timeout_ns) {
  base::os::futex_wait(*word, expected, timeout_ns, base::os::futex_scope::this_process,
                       "futex(FUTEX_WAIT)");
}
inline void futex_wake(std::atomic<int>* word) {
  base::os::futex_wake(*word, 1, base::os::futex_scope::this_process, "futex(FUTEX_WAKE)");
}

void scheduler_loop(node_state& node, pe_state& pe);

// Wakes `pe` if it sleeps: on its futex (sleep word 1), or inside the
// transport (2, comm=workers). Any thread; the caller has already published
// the work (seq_cst), as the wake-up protocol in scheduler.cpp requires.
// A sleeping PE announces itself in node.sleeper_mask (set before its sleep
// word, cleared after it).
inline void mark_sleeper(node_state& node, const pe_state& pe, bool asleep) {
  auto& word = node.sleeper_mask[std::size_t(pe.rank / 64)].bits;
  const std::uint64_t bit = std::uint64_t(1) << (pe.rank % 64);
  if (asleep)
    word.fetch_or(bit, std::memory_order_seq_cst);
  else
    word.fetch_and(~bit, std::memory_order_seq_cst);
}

inline void wake_pe(node_state& node, pe_state& pe) {
  if (pe.sleeping.load(std::memory_order_seq_cst) == 0) return;
  const int was = pe.sleeping.exchange(0, std::memory_order_seq_cst);
  if (was == 1)
    futex_wake(&pe.sleeping);
  else if (was == 2)
    node.transport->wake_waiter();
}

// --- between nodes (comm.cpp) ---
// Starts the transport and learns the job (before PEs start); stops it
// after they have stopped.
void net_start(node_state& node);
void net_stop(node_state& node);
void net_start_threads(node_state& node);  // the comm thread, if the mode has one
// Queues `m` for node `dst` (never this node) and gets it moving: wakes the
// comm thread, or drives the transport if this PE may.
void send_remote(node_state& node, int dst, message* m);
// One turn of the transport if nobody else is in it: outboxes out, then
// progress(). Returns what it did (0 when busy elsewhere or idle).
int try_progress(node_state& node);
// try_progress in parts, for a caller that keeps the transport over several
// turns (an idle PE polling it): take_transport takes it if nobody else is
// in it and it is still open; progress_held is one turn; give_transport
// lets it go. Other threads meanwhile queue into the outboxes, which every
// turn drains.
bool take_transport(node_state& node);
int progress_held(node_state& node);
void give_transport(node_state& node);
// Tells every other node to stop with `code` (weft::exit on this node).
void send_exit(node_state& node, int code);
// Quiescence across nodes, on PE 0 of node 0: true once two waves over every
// node saw the same balanced counts.
bool global_quiescence_check(node_state& node);
// This node's counts: messages sent (incl. by non-PE threads) and handled.
void local_counts(node_state& node, std::uint64_t& sent, std::uint64_t& done);
// Pushes `m` on the queue of PE `pe` (local rank) and wakes it. A message
// from the network goes through the MPSC queue whatever the queue kind, so
// messages handed over by different threads keep their order.
void deliver_local(node_state& node, int pe, message* m, bool from_network = false);

// Appends to one of a PE's own FIFOs (local or net): no atomic operation.
inline void append_own(message*& head, message*& tail, message* m) {
  m->link.next.store(nullptr, std::memory_order_relaxed);
  if (tail != nullptr)
    tail->link.next.store(&m->link, std::memory_order_relaxed);
  else
    head = m;
  tail = m;
}

// deliver_local for a message from the network. Delivered by the PE itself
// while it drives the transport, it goes to the PE's net FIFO, if nothing
// waits in the MPSC queue. Order per source node holds: only the
// transport's holder delivers, one thread at a time; a message another
// thread delivered earlier is still in the MPSC queue (then this one
// follows it there) or already popped, and one in the net FIFO is popped
// before anything later in the MPSC queue. Inline: it is every message of a
// non-SMP node, on the way from the transport's receive to its handler.
inline void deliver_from_network(node_state& node, int pe, message* m) {
  pe_state& dst = *node.pes[std::size_t(pe)];
  if (t_pe == &dst && dst.queue.empty()) {
    append_own(dst.net_head, dst.net_tail, m);
    dst.local_count.store(dst.local_count.load(std::memory_order_relaxed) + 1,
                          std::memory_order_relaxed);
    return;
  }
  deliver_local(node, pe, m, /*from_network=*/true);
}
// Pushes `m` on the node queue and wakes a sleeping PE.
void enqueue_node(node_state& node, message* m);
void wake_one_sleeper(node_state& node);
// Wakes up to n sleeping PEs but `self` (null: any); returns how many.
int wake_sleepers(node_state& node, const pe_state* self, int n);
void wake_all(node_state& node);
// The node's exit code becomes `code` unless one was set first; true if this
// call set it (weft::exit, an exit from another node, an attached node's end).
inline bool record_exit(node_state& node, int code) {
  if (node.exit_called.exchange(true, std::memory_order_acq_rel)) return false;
  node.exit_code.store(code, std::memory_order_relaxed);
  return true;
}
// This node's PEs stop after their current handler; other nodes are not told.
inline void stop_pes(node_state& node) {
  node.stop.store(true, std::memory_order_seq_cst);
  wake_all(node);
}
void release_message(message* m);
void print_stats(node_state& node);
void start_watchdog(node_state& node, std::thread& thread);
void stop_watchdog(node_state& node, std::thread& thread);
void install_backtrace_handler();
bool quiescence_check(node_state& node);

// --- the end of a job that forgot weft::exit (quiescent_exit.cpp) ---
// What a PE ran besides handlers (pe_state::last_run, current_handler).
enum run_kind : std::int64_t { run_none = -1, run_main = -2, run_timer = -3, run_qd_callback = -4 };
// Why a node may still get work although nothing is in flight (bits).
enum quiet_blocker : std::uint32_t {
  blocks_conditions = 1,  // poll_while conditions wait
  blocks_threads = 2,     // a thread of the program may still call weft
  blocks_callbacks = 4,   // on_quiescence callbacks wait
  blocks_waits = 8,       // on-quiescence=wait, or an attached node
  blocks_ending = 16,     // weft::exit was called
};
// One node's answer to the end-of-job inspection.
struct quiet_report {
  std::uint64_t sent = 0, done = 0;
  std::uint32_t blockers = 0;
  std::int64_t last_run = run_none;  // what ran last on this node, on PE last_pe (of the job)
  std::int32_t last_pe = -1;
  std::uint64_t last_ns = 0;
};
quiet_report local_quiet_report(node_state& node);
// Remembers the node's threads as its PEs start (start_node).
void note_start_threads(node_state& node);
// A thread that is not a PE calls into the node: remembered (once per run).
void note_caller(node_state& node);
// The calling thread becomes a guest of a PE (a carrier), or stops being one.
void note_guest(bool begin);
// PE 0 of node 0 with nothing to do: the check's next step (scheduler loop).
void maybe_end_quiescent_job(node_state& node, pe_state& pe);
// How long PE 0 of node 0 may sleep before the check needs it (0: no
// limit): until the check is due, or 1 ms while one is under way.
std::uint64_t quiescent_check_limit_ns(const node_state& node, const pe_state& pe);
// Across nodes (comm.cpp): sends the inspection to every other node for the
// totals of the last quiet waves; inspection_result is true once every
// reply is in, with the job's report in `out`.
void start_inspection(node_state& node);
bool inspection_result(node_state& node, quiet_report& out, std::uint64_t& quiet_sent,
                       std::uint64_t& quiet_done);

}  // namespace weft::core
