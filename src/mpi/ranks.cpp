// The ranks: how a program's main becomes every rank of the job.
//
// weft-mpicc links with -Wl,--wrap=main and libweft-mpi-main.a, whose
// __wrap_main is what the C library's start code calls: it calls
// weft_mpi_run (here) with the program's real main. weft_mpi_run starts the
// node (weft::run: the --weft: options, the PEs; under a launcher, one node
// per process of the job). Each process makes the world as its first PE
// starts (the layer's pe_start, before any PE handles a message): --weft:vp
// ranks, 0 meaning one per PE of the job, mapped over the job's PEs by
// --weft:rank-map -- where every rank runs, and the state of its own ranks.
// PE 0 of the job then asks every PE to start its ranks: each is a logical
// thread of a family of its own (so the ranks of a PE share its OS thread
// as fibers) running the real main with its own copy of the arguments and,
// under --weft:rank-tls=private, of the program's thread-locals.
// The job ends when the last rank of every process has returned, with the
// first non-zero code a main returned (0 if none; procs.cpp gathers the
// processes' codes), or at MPI_Abort; if every rank waits and nothing is in
// flight, quiescence detection ends it with the deadlock report instead of
// a hang.
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include "mpi/mpi_internal.hpp"
#include "weft/base/error.hpp"
#include "weft/core/handler.hpp"
#include "weft/core/pe.hpp"
#include "weft/core/run.hpp"
#include "weft/core/send.hpp"
#include "weft/threads/fiber.hpp"

namespace weft::mpi {

bool g_wait_serve = false;

namespace {

world_state g_world;
bool g_rank_map_rr = false;
int g_argc = 0;
char** g_argv = nullptr;  // the program's arguments, weft's removed
std::once_flag g_made;
std::atomic<int> g_running{0};  // ranks of this process whose main has not returned
std::atomic<int> g_exit_code{0};
handler_id h_start = 0;

void rank_body(threads::ult* u) {
  auto* r = static_cast<rank_state*>(u->arg);
  const int code =
      g_world.main_fn(int(r->args.size()), r->argv.data(), g_world.envp ? g_world.envp : environ);
  if (code != 0) {
    int none = 0;
    g_exit_code.compare_exchange_strong(none, code);
  }
}

// The waits of this process's ranks (rank_state::waits_served), summed as
// each rank ends, for --weft:stats.
std::atomic<std::uint64_t> g_waits_served{0}, g_waits_suspended{0};

void print_stats(std::FILE* out) {
  const std::uint64_t served = g_waits_served.load(), suspended = g_waits_suspended.load();
  if (served + suspended == 0) return;
  std::fprintf(out,
               "MPI ranks' waits: %" PRIu64
               " ended while the rank served its PE (rank-wait=serve), "
               "%" PRIu64 " suspended the rank\n",
               served, suspended);
}

void rank_finished(threads::ult* u) {
  const rank_state& r = *static_cast<rank_state*>(u->arg);
  g_waits_served.fetch_add(r.waits_served, std::memory_order_relaxed);
  g_waits_suspended.fetch_add(r.waits_suspended, std::memory_order_relaxed);
  domain_rank_ended(*static_cast<rank_state*>(u->arg));
  static_cast<rank_state*>(u->arg)->ended.store(true, std::memory_order_relaxed);
  if (g_running.fetch_sub(1, std::memory_order_acq_rel) == 1)
    process_finished(g_exit_code.load(std::memory_order_acquire));
}

// One line per rank of this process: what it waits in, or that it runs
// (or is ready), or that its main returned. For --weft:timeout's dump,
// from the watchdog's thread: atomics read, write(2) only.
void dump_ranks(int fd) {
  static const char head[] = "  MPI ranks of this process (what each waits in):\n";
  ssize_t w = ::write(fd, head, sizeof head - 1);
  char line[256];
  for (auto& r : g_world.ranks) {
    if (r == nullptr) continue;
    const char* call = r->call.load(std::memory_order_relaxed);
    const int peer = r->peer.load(std::memory_order_relaxed);
    const int tag = r->tag.load(std::memory_order_relaxed);
    int n = std::snprintf(line, sizeof line, "  rank %d (PE %d): ", r->rank, rank_pe(r->rank));
    if (call == nullptr) {
      n += std::snprintf(line + n, sizeof line - std::size_t(n), "%s\n",
                         r->ended.load(std::memory_order_relaxed)
                             ? "its main returned"
                             : "runs, or is ready to (waits in no MPI call)");
    } else {
      n += std::snprintf(line + n, sizeof line - std::size_t(n), "%s", call);
      if (peer == MPI_ANY_SOURCE)
        n += std::snprintf(line + n, sizeof line - std::size_t(n), " from any source");
      else if (peer >= 0)
        n += std::snprintf(line + n, sizeof line - std::size_t(n), " peer %d", peer);
      if (tag == MPI_ANY_TAG)
        n += std::snprintf(line + n, sizeof line - std::size_t(n), ", any tag\n");
      else
        n += std::snprintf(line + n, sizeof line - std::size_t(n), ", tag %d\n", tag);
    }
    w = ::write(fd, line, std::strlen(line));
  }
  (void)w;
}

// The world as this process sees it. Every process computes the same map
// from the same options (on_start checks that they were the same).
void make_world() {
  if (g_world.main_fn == nullptr) return;  // not started by weft_mpi_run
  const runtime_config& cfg = weft::config();
  const int job_pes = weft::num_pes(), per = weft::node_size();
  const int first = weft::my_node() * per;
  const int n = cfg.mpi_vp > 0 ? cfg.mpi_vp : job_pes;
  g_world.size = n;
  g_rank_map_rr = cfg.mpi_rank_map_rr;
  // A rank's stack: an MPI process's main runs on the process's stack, so
  // a rank gets the C library's default thread stack (`ulimit -s`, 8 MiB
  // as a rule), at least 4 MiB; its pages are reserved, not committed,
  // until used.
  // --weft:ult-stack sets it.
  std::size_t stack = std::size_t(4) << 20;
  pthread_attr_t attr;
  if (cfg.ult_stack_kib != 0) {
    stack = cfg.ult_stack_kib << 10;
  } else if (pthread_attr_init(&attr) == 0) {
    std::size_t thread_default = 0;
    if (pthread_attr_getstacksize(&attr, &thread_default) == 0 && thread_default > stack)
      stack = thread_default;
    pthread_attr_destroy(&attr);
  }
  g_world.pes.resize(std::size_t(n));
  g_world.ranks.resize(std::size_t(n));
  set_predefined_attributes(n);
  int mine = 0;
  for (int i = 0; i < n; ++i) {
    const int pe = g_rank_map_rr ? i % job_pes : int(std::int64_t(i) * job_pes / n);
    g_world.pes[std::size_t(i)] = pe;
    if (pe < first || pe >= first + per) continue;
    ++mine;
    auto r = std::make_unique<rank_state>();
    r->rank = i;
    r->pe = pe - first;
    r->args.assign(g_argv, g_argv + g_argc);
    for (std::string& a : r->args) r->argv.push_back(a.data());
    r->argv.push_back(nullptr);
    r->u.body = &rank_body;
    r->u.finished = &rank_finished;
    r->u.arg = r.get();
    r->u.family = r.get();  // a family of its own: ranks share their PE's thread
    r->u.stack_bytes = stack;
    r->u.private_tls = cfg.mpi_rank_tls_private;
    r->u.label = "MPI rank";
    r->u.label_id = i;
    make_predefined_comms(*r, n);
    g_world.ranks[std::size_t(i)] = std::move(r);
  }
  g_running.store(mine, std::memory_order_relaxed);
  std::vector<int> homed(std::size_t(per), 0);
  for (auto& r : g_world.ranks)
    if (r != nullptr) ++homed[std::size_t(r->pe)];
  domains_start(per, homed);
  // Serving as it waits spins the rank's CPU: not where PEs share CPUs, and
  // not where ranks move between PEs.
  g_wait_serve = cfg.mpi_rank_wait_serve && !cfg.oversubscribed && !g_domain_node;
  weft::on_timeout_dump(&dump_ranks);
}

// Made once per process, by whichever of its PEs starts first; the others
// wait for it in their own pe_start, so no handler ever finds it unmade.
void pe_start() {
  std::call_once(g_made, &make_world);
}

// What PE 0 of the job tells every PE as the ranks start: the world it
// made, which every process must have made alike.
struct start_body {
  int size;
  int rank_map_rr;
};

// On each PE: starts its ranks (each runs until it first waits or ends).
void on_start(message_ptr m) {
  start_body b;
  std::memcpy(&b, m->data(), sizeof b);
  if (b.size != g_world.size || (b.rank_map_rr != 0) != g_rank_map_rr)
    base::usage_error(
        "process %d has %d MPI ranks mapped %s (--weft:vp, --weft:rank-map), but process 0 has "
        "%d mapped %s: give every process of the job the same options",
        weft::my_node(), g_world.size, g_rank_map_rr ? "rr" : "block", b.size,
        b.rank_map_rr != 0 ? "rr" : "block");
  const int pe = threads::current_pe();
  // A process with no rank of its own has nothing to wait for.
  if (pe == 0 && g_running.load(std::memory_order_relaxed) == 0) process_finished(0);
  for (auto& r : g_world.ranks)
    if (r != nullptr && r->pe == pe && threads::claim(&r->u)) threads::start_here(&r->u);
}

// On PE 0 of the job.
void start_world() {
  weft::on_quiescence(&report_deadlock);
  const start_body b{g_world.size, g_rank_map_rr ? 1 : 0};
  for (int pe = 0; pe < weft::num_pes(); ++pe) weft::send(pe, make_message_with(h_start, b));
}

const bool registered = [] {
  h_start = register_handler("mpi.start_ranks", &on_start);
  weft::detail::register_layer(
      {"mpi", nullptr, &pe_start, nullptr, nullptr, nullptr, nullptr, &print_stats});
  return true;
}();

}  // namespace

world_state& world() {
  return g_world;
}

namespace {

// The rank logical thread `u` is or acts for (a collective's helper), or
// null.
rank_state* rank_of(threads::ult* u) noexcept {
  if (u == nullptr) return nullptr;
  if (u->body == &rank_body) return static_cast<rank_state*>(u->arg);
  if (u->body == &collective_helper) return static_cast<rank_state*>(u->local);
  return nullptr;
}

}  // namespace

rank_state* current_rank() noexcept {
  return rank_of(threads::current());
}

// One thread-local lookup (threads::current) per call: every send,
// receive and wait makes one.
rank_state& self(const char* call) {
  threads::ult* u = threads::current();
  rank_state* me = rank_of(u);
  if (me == nullptr)
    base::fatal(
        "%s: called off an MPI rank: link the program with weft-mpicc or weft-mpicxx (they "
        "run its main as the ranks: -Wl,--wrap=main and libweft-mpi-main.a), and call MPI "
        "from the rank's own thread (docs/mpi.md)",
        call);
  if (u->host != nullptr)
    base::fatal("not implemented: %s on a rank that runs on a carrier thread", call);
  return *me;
}

namespace {

[[noreturn]] void fail_v(int rank, const char* call, int error_class, const char* fmt, va_list ap) {
  char what[512];
  std::vsnprintf(what, sizeof what, fmt, ap);
  base::fatal("%s on rank %d: %s (error class %d; MPI_ERRORS_ARE_FATAL)", call, rank, what,
              error_class);
}

}  // namespace

void fail(const char* call, int error_class, const char* fmt, ...) {
  raised e{call, error_class, {}};
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(e.what, sizeof e.what, fmt, ap);
  va_end(ap);
  throw e;
}

void fail_on(int rank, const char* call, int error_class, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fail_v(rank, call, error_class, fmt, ap);
}

std::size_t type_bytes(const char* call, MPI_Datatype type) {
  switch (type) {
    case MPI_CHAR:
    case MPI_SIGNED_CHAR:
    case MPI_UNSIGNED_CHAR:
    case MPI_BYTE:
    case MPI_INT8_T:
    case MPI_UINT8_T:
    case MPI_C_BOOL:
      return 1;
    case MPI_SHORT:
    case MPI_UNSIGNED_SHORT:
    case MPI_INT16_T:
    case MPI_UINT16_T:
      return 2;
    case MPI_INT:
    case MPI_UNSIGNED:
    case MPI_FLOAT:
    case MPI_INT32_T:
    case MPI_UINT32_T:
    case MPI_WCHAR:
      return 4;
    case MPI_LONG:
    case MPI_UNSIGNED_LONG:
    case MPI_LONG_LONG_INT:
    case MPI_UNSIGNED_LONG_LONG:
    case MPI_DOUBLE:
    case MPI_INT64_T:
    case MPI_UINT64_T:
    case MPI_AINT:
    case MPI_COUNT:
      return 8;
    case MPI_LONG_DOUBLE:
      return sizeof(long double);
    case MPI_FLOAT_INT:
      return sizeof(value_int<float>);
    case MPI_DOUBLE_INT:
      return sizeof(value_int<double>);
    case MPI_LONG_INT:
      return sizeof(value_int<long>);
    case MPI_2INT:
      return sizeof(value_int<int>);
    case MPI_SHORT_INT:
      return sizeof(value_int<short>);
    case MPI_LONG_DOUBLE_INT:
      return sizeof(value_int<long double>);
    case MPI_PACKED:
    case MPI_CXX_BOOL:  // sizeof(bool) on every ABI weft builds for
      return 1;
    case MPI_C_FLOAT_COMPLEX:
    case MPI_CXX_FLOAT_COMPLEX:
      return 2 * sizeof(float);
    case MPI_C_DOUBLE_COMPLEX:
    case MPI_CXX_DOUBLE_COMPLEX:
      return 2 * sizeof(double);
    case MPI_C_LONG_DOUBLE_COMPLEX:
    case MPI_CXX_LONG_DOUBLE_COMPLEX:
      return 2 * sizeof(long double);
    default:
      fail(call, MPI_ERR_TYPE, "datatype %d is not a predefined datatype (1..%d)", type,
           kLastPredefined);
  }
}

}  // namespace weft::mpi

extern "C" WEFT_API int weft_mpi_run(int argc, char** argv, char** envp,
                                     int (*main_fn)(int, char**, char**)) {
  using namespace weft::mpi;
  const weft::runtime_config cfg = weft::parse_options(argc, argv);
  g_world.main_fn = main_fn;
  g_world.envp = envp;
  g_argc = argc;
  g_argv = argv;
  const int code = weft::run(cfg, argc, argv, [](weft::args) { start_world(); });
  if (g_running.load(std::memory_order_acquire) != 0) {
    // Ranks of this process wait for good (the deadlock report ended the
    // job): their stacks are still theirs, so the process ends here, before
    // the program's static destructors, as no MPI process would go on.
    std::fflush(nullptr);
    std::_Exit(code);
  }
  return code;
}

// The destructors of the program's C++ thread_local objects: one built by a
// rank (in its own copy of the program's thread-locals, --weft:rank-tls=
// private) is destroyed as the rank ends, on its copy; any other goes to
// the C library, to run at its OS thread's exit. libstdc++ registers them
// here: libweft-mpi.so comes before libc.so in a program's search order.
extern "C" WEFT_API int __cxa_thread_atexit_impl(void (*fn)(void*), void* object, void* dso) {
  if (weft::threads::fiber::take_thread_local_destructor(fn, object)) return 0;
  using impl = int (*)(void (*)(void*), void*, void*);
  static const impl next = reinterpret_cast<impl>(dlsym(RTLD_NEXT, "__cxa_thread_atexit_impl"));
  if (next == nullptr)
    weft::base::fatal("weft-mpi: the C library has no __cxa_thread_atexit_impl: %s", dlerror());
  return next(fn, object, dso);
}
