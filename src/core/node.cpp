// Node startup and shutdown, and the public API but the send family
// (send.cpp).
//
// weft::run turns the calling thread into PE 0 and starts PEs 1..N-1 as
// threads bound by the configured policy; it returns when weft::exit is
// called. An attached node (detail::start_attached_node) is the same node
// with PE 0's thread handed back to the program between the calls that
// serve its messages.
#include "core/node.hpp"
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include "core/handler_table.hpp"
#include "core/node_ref.hpp"
#include "weft/base/error.hpp"
#include "weft/base/fence.hpp"
#include "weft/base/memory.hpp"
#include "weft/base/timer.hpp"
#include "weft/base/topology.hpp"
#include "weft/trace/counters.hpp"
#include "weft/trace/hooks.hpp"
#include "weft/trace/session.hpp"

namespace weft {

namespace detail {
constinit thread_local pe_local t_pe_local;
namespace {
// The calling thread is a guest of a PE (enter_guest): it has the PE's
// identity but not its state.
constinit thread_local bool t_guest WEFT_TLS_FAST = false;
}  // namespace
bool in_main_setup() noexcept {
  if (t_pe_local.pe != 0) return false;
  core::node_state* node = core::g_node.load(std::memory_order_acquire);
  return node != nullptr && node->main_running.load(std::memory_order_relaxed);
}
}  // namespace detail

namespace core {

std::atomic<node_state*> g_node{nullptr};

std::atomic<int> g_external_calls{0};
std::atomic<bool> g_ever_ran{false};
constinit thread_local std::uint64_t t_caller_of_run WEFT_TLS_FAST = 0;
namespace {
// Runs started in this process (node_state::run_seq).
std::atomic<std::uint64_t> g_runs{0};
}  // namespace
constinit thread_local pe_state* t_pe WEFT_TLS_FAST = nullptr;

pe_state::pe_state(int r, int num_pes, queue_kind kind) : rank(r) {
  // Rings of 1024 pointers: 8 KiB per producer that actually sends here.
  if (kind == queue_kind::spsc_pairs)
    pairs = std::make_unique<base::spsc_pairs<message*>>(num_pes, 1024);
}

const char* to_string(pe_phase p) {
  switch (p) {
    case pe_phase::starting:
      return "starting";
    case pe_phase::running:
      return "running";
    case pe_phase::spinning:
      return "idle (spinning)";
    case pe_phase::yielding:
      return "idle (yielding)";
    case pe_phase::sleeping:
      return "idle (sleeping)";
    case pe_phase::stopped:
      return "stopped";
  }
  return "?";
}

namespace {

void pe_enter(node_state& node, pe_state& pe) {
  t_pe = &pe;
  detail::pe_local& local = detail::this_pe_local();
  local = {node.first_pe + pe.rank, node.total_pes, node.node_id,
           node.num_nodes,          pe.rank,        int(node.pes.size())};
  pe.thread = pthread_self();
  // Without a CPU clock (the call fails only for a thread that ended) the
  // PE's CPU time reads as 0 (pe_cpu_time_ns): nothing to report.
  clockid_t clock;
  if (pthread_getcpuclockid(pe.thread, &clock) == 0)
    pe.cpu_clock.store(int(clock), std::memory_order_relaxed);
  pe.tid.store(int(gettid()), std::memory_order_relaxed);
  pe.has_thread.store(true, std::memory_order_release);
  base::topology::get().bind_this_thread(node.cfg.pe_cpus[std::size_t(pe.rank)]);
  // The default policy is the kernel's own: no call for it, so that a
  // policy the program (or numactl) set stays.
  if (node.cfg.mem != "first-touch")
    base::topology::get().apply_mem(node.cfg.mem, node.cfg.pe_cpus[std::size_t(pe.rank)]);
  trace::begin_track(trace::track_kind::pe, node.first_pe + pe.rank, pe.rank);
  for (const auto& l : handlers().layers)
    if (l.pe_start) l.pe_start();
}

void pe_leave(node_state& node, pe_state& pe) {
  (void)node;
  detail::pe_local& local = detail::this_pe_local();
  pe.has_thread.store(false, std::memory_order_release);  // the watchdog must not signal it now
  pe.counter_values = trace::track_counters();
  if (node.cfg.stats) {
    // Where this PE's memory went (--weft:mem): a message block of its own,
    // touched, asked of the kernel. A block from its pool, as its messages.
    std::uint8_t size_class = 0;
    void* block = base::block_alloc(4096, size_class);
    static_cast<volatile char*>(block)[0] = 1;
    pe.mem_node = base::numa_node_of(block);
    base::block_free(block, size_class);
  }
  trace::end_track();
  // Layers free their per-PE state in reverse order of registration.
  const auto& layers = handlers().layers;
  for (auto it = layers.rbegin(); it != layers.rend(); ++it)
    if (it->pe_stop) it->pe_stop();
  // Closures of timers and conditions may own messages: free them here,
  // before this thread's block cache goes back to the allocator.
  pe.conditions.clear();
  while (!pe.timers.empty()) pe.timers.pop();
  base::block_cache_release();
  local = {};
  t_pe = nullptr;
}

void pe_thread_main(node_state& node, pe_state& pe) {
  pe_enter(node, pe);
  scheduler_loop(node, pe);
  pe_leave(node, pe);
}

void print_startup(const node_state& node) {
  const runtime_config& c = node.cfg;
  std::string map;
  for (std::size_t i = 0; i < c.pe_cpus.size(); ++i) {
    if (i == 16 && c.pe_cpus.size() > 20) {
      map += " ... (" + std::to_string(c.pe_cpus.size() - 16) + " more)";
      break;
    }
    map += " " + std::to_string(i) + "->" +
           (c.pe_cpus[i] < 0 ? std::string("*") : std::to_string(c.pe_cpus[i]));
  }
  // In a job of several nodes every line already starts with "node N: ".
  std::string who =
      node.num_nodes > 1
          ? "of " + std::to_string(node.num_nodes) + " nodes (transport=" + node.transport->name() +
                ", comm=" + to_string(node.comm) + "), PEs " + std::to_string(node.first_pe) +
                ".." + std::to_string(node.first_pe + c.threads - 1)
          : "node 0";
  const std::string mem =
      c.mem == "first-touch" ? "" : ", " + base::topology::get().describe_mem(c.mem);
  base::info("%s: %d PE%s, bind=%s, queue=%s, alloc=%s%s; PE->CPU:%s", who.c_str(), c.threads,
             c.threads == 1 ? "" : "s", c.bind.c_str(), to_string(c.queue), to_string(c.alloc),
             mem.c_str(), map.c_str());
}

}  // namespace

// --weft:report-bindings: one line per PE, as Open MPI's --report-bindings
// prints one per rank, so that users read weft's placement the way they
// read their MPI's. On stderr, whole lines, and even with --weft:quiet
// (it was asked for).
void report_bindings(const node_state& node) {
  const base::topology& topo = base::topology::get();
  const runtime_config& c = node.cfg;
  std::string text;
  for (std::size_t i = 0; i < c.pe_cpus.size(); ++i) {
    const int cpu = c.pe_cpus[i];
    text += "weft: node " + std::to_string(node.node_id) + " PE " +
            std::to_string(node.first_pe + int(i)) +
            (cpu < 0 ? std::string(" not bound (bind=none): ")
                     : " bound to " + topo.binding_place(cpu) + ": ") +
            topo.binding_map(cpu) + "\n";
  }
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace core

// ---- public API ---------------------------------------------------------------
// (The send family is in send.cpp.)

void exit(int code) {
  // After the run has ended (another thread's exit won), a late exit has
  // nothing left to do.
  core::node_ref ref("weft::exit", /*tolerate_ended=*/true);
  if (!ref) return;
  core::node_state& node = *ref;
  // The whole job ends: the other nodes hear it before this one stops
  // driving the transport (net_stop sends what is queued).
  if (core::record_exit(node, code) && node.num_nodes > 1) core::send_exit(node, code);
  core::stop_pes(node);
}

void on_timeout_dump(void (*dump)(int fd)) {
  core::node_ref ref("weft::on_timeout_dump");
  core::node_state& node = *ref;
  std::lock_guard<std::mutex> lock(node.wd_mutex);
  node.wd_dumps.push_back(dump);
}

void detail::abort_job(int code, const char* why) {
  std::fflush(stdout);
  // What the PEs recorded goes out first (the transport's abort does not
  // run the fatal hook).
  trace::abort_session(trace::end_how::fatal, why);
  core::node_state* node = core::g_node.load(std::memory_order_acquire);
  if (node != nullptr && node->transport != nullptr && node->num_nodes > 1)
    node->transport->abort(code, why);
  std::fprintf(stderr, "weft: fatal: %s\n", why);
  std::fflush(stderr);
  std::_Exit(code);
}

void on_quiescence(std::function<void()> fn) {
  core::node_ref ref("weft::on_quiescence");
  core::node_state& node = *ref;
  {
    std::lock_guard<std::mutex> lock(node.qd_mutex);
    node.qd_callbacks.push_back(std::move(fn));
  }
  node.qd_requested.store(true, std::memory_order_seq_cst);
  // PE 0 runs the detection; make sure it is not asleep with no timeout.
  core::wake_pe(node, *node.pes[0]);
}

void exit_at_quiescence(int code) {
  on_quiescence([code] { weft::exit(code); });
}

void after(std::chrono::nanoseconds delay, std::function<void()> fn) {
  core::pe_state* pe = core::t_pe;
  if (pe == nullptr) base::fatal("weft::after called on a thread that is not a PE");
  std::uint64_t now = base::wall_ns();
  std::uint64_t d = delay.count() > 0 ? std::uint64_t(delay.count()) : 0;
  pe->timers.push({now + d, pe->timer_seq++, std::move(fn)});
  // A pending timer is work in flight for quiescence detection.
  pe->sent.store(pe->sent.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

void poll_while(std::function<bool()> fn) {
  core::pe_state* pe = core::t_pe;
  if (pe == nullptr) base::fatal("weft::poll_while called on a thread that is not a PE");
  pe->conditions.push_back(std::move(fn));
  // A condition may wait for anything outside weft: the job is never over
  // while one waits (quiescent_exit.cpp).
  core::g_node.load(std::memory_order_relaxed)->conditions.fetch_add(1, std::memory_order_relaxed);
}

const runtime_config& config() {
  core::node_state* node = core::g_node.load(std::memory_order_acquire);
  if (node == nullptr) base::fatal("weft::config called while no node runs");
  return node->cfg;  // valid on PEs and inside run, where the node outlives the caller
}

int run(int& argc, char**& argv, std::function<void(args)> main_fn) {
  runtime_config cfg = parse_options(argc, argv);
  return run(cfg, argc, argv, std::move(main_fn));
}

namespace {

// The node's trace session (--weft:trace), or its counters alone for
// --weft:stats. After net_start: the node knows its place in the job.
void start_trace(core::node_state& node, int argc, char** argv) {
  const runtime_config& cfg = node.cfg;
  if (cfg.trace_dir.empty() && !cfg.stats) return;
  trace::session_config t;
  t.dir = cfg.trace_dir;
  t.mode = cfg.trace_mode == "summary" ? trace::trace_mode::summary : trace::trace_mode::full;
  t.buffer_bytes = cfg.trace_buffer_bytes;
  t.sample = cfg.trace_sample;
  t.time_every = cfg.trace_time_every;
  t.pool_buffers = cfg.trace_pool;
  t.counters = trace::split_counter_list(cfg.counters);
  t.quiet = cfg.quiet;
  t.counters_asked = cfg.counters_given;
  t.node = node.node_id;
  t.nodes = node.num_nodes;
  t.first_pe = node.first_pe;
  t.pes = int(node.pes.size());
  for (int i = 0; i < argc && argv != nullptr; ++i) t.argv.emplace_back(argv[i]);
  if (t.argv.empty()) t.argv.emplace_back(program_invocation_name);
  trace::set_name_source("handler", [] {
    std::vector<std::pair<std::uint32_t, std::string>> names;
    const auto& table = core::handlers().entries;
    for (std::size_t i = 0; i < table.size(); ++i)
      names.emplace_back(std::uint32_t(i), table[i].name);
    return names;
  });
  // A fatal error writes out what the PEs have recorded.
  base::set_fatal_hook(trace::abort_session);
  trace::start_session(t);
}

// A node between its start and its end: what run() and an attached node
// (detail::start_attached_node) share.
struct running_node {
  std::unique_ptr<core::node_state> node;
  std::thread watchdog;
  std::vector<std::thread> threads;  // PEs 1..N-1
  cpu_set_t saved{};
  bool have_saved = false;
};

// Everything up to the PE threads: the node, the transport, the layers, the
// watchdog; PEs 1..N-1 started. PE 0 is the calling thread's to run.
void start_node(running_node& r, const runtime_config& cfg, int argc, char** argv,
                std::function<void(args)> main_fn, bool attached) {
  if (core::g_node.load() != nullptr) base::fatal("weft::run called while a node already runs");
  if (cfg.threads < 1 || int(cfg.pe_cpus.size()) != cfg.threads)
    base::usage_error(
        "threads=%d: a node needs at least one PE and a CPU placement for each "
        "(build the configuration with weft::parse_options)",
        cfg.threads);
  base::ns_per_cycle();  // calibrate once, off the hot paths
  base::select_allocator(cfg.alloc == alloc_kind::mimalloc ? base::raw_allocator::mimalloc
                                                           : base::raw_allocator::system);
  base::set_block_pool(cfg.msg_pool);
  // --weft:mem=local: mimalloc's arenas, one per NUMA node, before any PE
  // allocates (numa_arenas.cpp). 64 GiB of address space each: nothing is
  // touched until used.
  if (cfg.mem == "local" && cfg.alloc == alloc_kind::mimalloc)
    base::make_numa_arenas(std::size_t(64) << 30);

  r.node = std::make_unique<core::node_state>();
  core::node_state* node = r.node.get();
  node->cfg = cfg;
  node->main_fn = std::move(main_fn);
  node->main_args = {argc, argv};
  node->start_ns = base::wall_ns();
  if (cfg.stats) node->numa_at_start = base::numa_counters();
  node->attached = attached;
  node->run_seq = core::g_runs.fetch_add(1) + 1;
  for (int i = 0; i < cfg.threads; ++i)
    node->pes.push_back(std::make_unique<core::pe_state>(i, cfg.threads, cfg.queue));
  node->qd_last.assign(std::size_t(cfg.threads) * 2 + 1, 0);
  node->sleeper_words = (cfg.threads + 63) / 64;
  node->sleeper_mask =
      std::make_unique<core::node_state::sleeper_word[]>(std::size_t(node->sleeper_words));

  // The handler table is complete now: nodes compare it as they meet.
  core::handlers().frozen.store(true, std::memory_order_release);
  node->handler_entries = core::handlers().entries.data();
  node->num_handlers = core::handlers().entries.size();
  node->tasks = core::handlers().sched;
  core::net_start(*node);

  if (cfg.print_config && node->node_id == 0) std::fputs(cfg.config_text.c_str(), stdout);
  if (!cfg.quiet) core::print_startup(*node);
  if (cfg.report_bindings) core::report_bindings(*node);
  const int cpus = int(base::topology::get().allowed().size());
  // net_start may have found the host oversubscribed by all its processes.
  if (cfg.oversubscribed) {
    // Bound PEs share the CPUs they are bound to (bind=1 puts every PE on
    // one CPU of a larger set); unbound ones share the whole CPU set.
    std::vector<int> distinct;
    for (int c : cfg.pe_cpus)
      if (c >= 0) distinct.push_back(c);
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    if (!distinct.empty() && int(distinct.size()) < cfg.threads)
      base::warn(
          "%d PEs on %zu CPU%s (bind=%s binds them there; the process's CPU set has %d): the "
          "run is oversubscribed (PEs share CPUs; idle PEs yield instead of spinning)",
          cfg.threads, distinct.size(), distinct.size() == 1 ? "" : "s", cfg.bind.c_str(), cpus);
    else
      base::warn(
          "%d PEs on %d CPU%s of this process's CPU set (bind=%s): the run is "
          "oversubscribed (PEs share CPUs; idle PEs yield instead of spinning)",
          cfg.threads, cpus, cpus == 1 ? "" : "s", cfg.bind.c_str());
  } else if (node->cfg.oversubscribed)
    base::warn(
        "%d PEs of the job's processes on this host share its %d CPU%s (bind=%s): the run is "
        "oversubscribed (PEs share CPUs; idle PEs yield instead of spinning)",
        node->host_pes, cpus, cpus == 1 ? "" : "s", cfg.bind.c_str());
  std::fflush(stdout);

  core::g_node.store(node, std::memory_order_seq_cst);
  core::g_ever_ran.store(true);
  core::install_backtrace_handler();

  // Remember the caller's CPU set: PE 0 is bound while the node runs, and the
  // program gets its thread back as it was.
  CPU_ZERO(&r.saved);
  r.have_saved = pthread_getaffinity_np(pthread_self(), sizeof r.saved, &r.saved) == 0;

  for (const auto& l : core::handlers().layers)
    if (l.node_start) l.node_start();
  core::start_watchdog(*node, r.watchdog);
  // Last before the threads: the trace's time line starts as they do.
  start_trace(*node, argc, argv);
  core::net_start_threads(*node);
  // A job that is quiescent without weft::exit ends with an error, unless
  // the program waits for outside events; node 0 checks for the job. An
  // attached node serves a program that runs on its own thread: never.
  node->qe_watch = node->node_id == 0 && !attached && !cfg.quiescence_wait;
  core::note_start_threads(*node);
  r.threads.reserve(std::size_t(cfg.threads - 1));
  for (int i = 1; i < cfg.threads; ++i)
    r.threads.emplace_back(core::pe_thread_main, std::ref(*node),
                           std::ref(*node->pes[std::size_t(i)]));
}

// After PE 0 has left its scheduler: joins the other PEs and ends the node.
int finish_node(running_node& r) {
  core::node_state* node = r.node.get();
  const runtime_config& cfg = node->cfg;
  for (auto& t : r.threads) t.join();
  r.threads.clear();
  trace::pes_ended();
  // Before the layers free their state: finalize still delivers (and drops)
  // what arrives, and the watchdog still covers a peer that never comes.
  core::net_stop(*node);
  core::stop_watchdog(*node, r.watchdog);
  {
    const auto& layers = core::handlers().layers;
    for (auto it = layers.rbegin(); it != layers.rend(); ++it)
      if (it->node_stop) it->node_stop();
  }

  // No PE runs any more; wait out calls from the program's own threads.
  core::g_node.store(nullptr, std::memory_order_seq_cst);
  while (core::g_external_calls.load(std::memory_order_seq_cst) != 0) sched_yield();

  if (r.have_saved) pthread_setaffinity_np(pthread_self(), sizeof r.saved, &r.saved);
  if (cfg.stats) core::print_stats(*node);
  trace::end_session();
  // What the program printed during the run goes out now, whatever the
  // program does next (a job that ended at quiescence was probably not
  // expected to end, and its output is what tells the user why).
  std::cout.flush();
  std::fflush(nullptr);

  // Messages still queued at exit are freed (exit ends the run by design).
  for (auto& pe : node->pes) {
    while (message* m = pe->local_head) {
      pe->local_head = reinterpret_cast<message*>(m->link.next.load(std::memory_order_relaxed));
      core::release_message(m);
    }
    pe->local_tail = nullptr;
    while (message* m = pe->net_head) {
      pe->net_head = reinterpret_cast<message*>(m->link.next.load(std::memory_order_relaxed));
      core::release_message(m);
    }
    pe->net_tail = nullptr;
    while (base::queue_link* l = pe->queue.pop())
      core::release_message(reinterpret_cast<message*>(l));
    if (pe->pairs) pe->pairs->drain_quiescent([](message* m) { core::release_message(m); });
    while (!pe->prioritized.empty()) {
      core::release_message(pe->prioritized.top().m);
      pe->prioritized.pop();
    }
  }
  for (message* m : node->node_queue) core::release_message(m);
  core::handlers().frozen.store(false, std::memory_order_release);
  base::block_cache_release();
  const int code = node->exit_code.load();
  r.node.reset();
  return code;
}

// The attached node, if one runs (detail::start_attached_node).
running_node* g_attached = nullptr;

}  // namespace

int run(const runtime_config& cfg, int argc, char** argv, std::function<void(args)> main_fn) {
  // An OpenMP region before weft::run started an attached node on this
  // thread (libweft-omp): it ends here, and the run starts afresh.
  if (g_attached != nullptr && core::t_pe == g_attached->node->pes[0].get())
    detail::stop_attached_node();
  running_node r;
  start_node(r, cfg, argc, argv, std::move(main_fn), /*attached=*/false);
  core::pe_thread_main(*r.node, *r.node->pes[0]);
  return finish_node(r);
}

namespace detail {

void start_attached_node(const runtime_config& cfg) {
  if (core::t_pe != nullptr) base::fatal("weft: a PE cannot start an attached node");
  auto* r = new running_node;
  start_node(*r, cfg, 0, nullptr, {}, /*attached=*/true);
  core::pe_enter(*r->node, *r->node->pes[0]);
  r->node->pes[0]->phase.store(int(core::pe_phase::running), std::memory_order_relaxed);
  // PE 0 is the program's thread between the calls that serve it: on the
  // trace that is its main function, as in a weft::run.
  if (trace::on())
    trace::detail::emit(trace::kind::handler_begin, trace::main_handler, std::uint32_t(-1), 0, 0);
  g_attached = r;
}

void enter_guest(int rank) {
  core::node_state* node = core::g_node.load(std::memory_order_acquire);
  if (node == nullptr || rank < 0 || rank >= int(node->pes.size()))
    base::fatal("weft: a guest thread of PE %d, but %s", rank,
                node == nullptr
                    ? "no node runs"
                    : ("the node has PEs 0.." + std::to_string(node->pes.size() - 1)).c_str());
  if (core::t_pe != nullptr) base::fatal("weft: a PE cannot be a guest of another");
  t_pe_local = {node->first_pe + rank, node->total_pes, node->node_id, node->num_nodes, rank,
                int(node->pes.size())};
  t_guest = true;
  // A carrier is weft's thread, not the program's (quiescent_exit.cpp).
  core::note_guest(true);
}

void leave_guest() noexcept {
  if (!t_guest) return;
  t_pe_local = {};
  t_guest = false;
  core::note_guest(false);
}

bool on_guest_thread() noexcept {
  return t_guest;
}

bool node_runs() noexcept {
  return core::g_node.load(std::memory_order_acquire) != nullptr;
}

bool attached_node_runs() noexcept {
  return g_attached != nullptr;
}

int stop_attached_node() {
  running_node* r = g_attached;
  if (r == nullptr) return 0;
  if (core::t_pe != r->node->pes[0].get())
    base::fatal("weft: the attached node is stopped by another thread than the one it runs on");
  // This process's program is done; the others' may not be (each process
  // of a job of attached nodes runs its own OpenMP program): only this node
  // stops, and the transport's finalize waits for the others. weft::exit
  // would stop their PEs in the middle of their regions.
  core::record_exit(*r->node, 0);
  core::stop_pes(*r->node);
  if (trace::on()) trace::detail::emit(trace::kind::handler_end, trace::main_handler, 0, 0, 0);
  core::pe_leave(*r->node, *r->node->pes[0]);
  const int code = finish_node(*r);
  g_attached = nullptr;
  delete r;
  return code;
}

}  // namespace detail

}  // namespace weft
