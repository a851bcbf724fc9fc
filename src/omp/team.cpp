// Parallel regions: teams of OpenMP threads on the PEs of a node, barriers
// that give the PE back, the waits every other construct uses, the ICVs,
// and the node a plain OpenMP program gets at its first region (see
// omp_internal.hpp for the model).
//
// A region of n threads on PE p of a node of P PEs: thread 0 runs fn(data)
// right there, on p's stack (claiming it: no logical thread starts on p's
// thread meanwhile); member i is logical thread (ULT) i of the team, placed
// in slot i / P of PE (p + i) mod P. Slot 0 is that PE's own thread: a start
// message goes there, and the PE's handler runs the member as a fiber on its
// thread if no other OpenMP thread lives on it, else on one of its carrier
// threads (a nested team's member, whose PE's thread runs an outer member,
// goes to a carrier at once). Slots 1.. are carriers, started at once: more
// threads than PEs. The same member of a same-sized region lands on the
// same OS thread each time, so threadprivate data persists between regions
// as OpenMP promises. A member whose start message waits behind a PE that
// stays inside one handler (--weft:ult-rescue-us) is started on a carrier
// by thread 0 while it waits (the seeds' "busy cores will not pick up
// statically assigned work"). The region ends when every member's ULT has
// ended; the last reference frees the team.
#include <sched.h>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <unordered_set>
#include "omp/omp_internal.hpp"
#include "weft/base/error.hpp"
#include "weft/base/timer.hpp"
#include "weft/core/handler.hpp"
#include "weft/core/pe.hpp"
#include "weft/core/run.hpp"
#include "weft/core/send.hpp"
#include "weft/trace/trace.hpp"

namespace weft::omp {

namespace {

// Thread 0 looks at members nobody started only this long after the region
// began (longer than a sleeping PE takes to wake up, 13-24 us on the
// reference machine): then whether their PE stays inside one handler.
constexpr std::uint64_t start_grace_ns = 50'000;
// Spins of a waiting thread before it gives its PE back.
constexpr int wait_spins = 64;

thread_local thread_state* t_current = nullptr;
thread_local thread_state* t_initial = nullptr;

handler_id h_start = 0;

// ---- ICVs from the environment ---------------------------------------------------

// A bad value is what libgomp makes of it: a warning, and the variable is
// ignored (its default stays). A plain OpenMP program must not die under
// libweft-omp where it runs under libgomp.
void bad_env(const char* var, const char* value, const char* accepted) {
  base::warn("invalid value for environment variable %s=%s (%s); ignored, as libgomp does", var,
             value, accepted);
}

// An unsigned integer, the whole value (spaces around it allowed); for a list
// ("4,2": OMP_NUM_THREADS per nesting level) the first item.
std::optional<long> parse_count(const char* var, const char* v, bool allow_zero,
                                bool list = false) {
  const char* p = v;
  while (std::isspace(static_cast<unsigned char>(*p))) ++p;
  char* end = nullptr;
  errno = 0;
  const long n = std::isdigit(static_cast<unsigned char>(*p)) ? std::strtol(p, &end, 10) : -1;
  if (n >= 0 && errno == 0) {
    while (std::isspace(static_cast<unsigned char>(*end))) ++end;
    if ((*end == '\0' || (list && *end == ',')) && (allow_zero || n > 0)) return n;
  }
  bad_env(var, v, allow_zero ? "expected a non-negative integer" : "expected a positive integer");
  return std::nullopt;
}

void parse_schedule(const char* v, int& kind, long& chunk) {
  std::string s(v);
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (s.rfind("monotonic:", 0) == 0) s = s.substr(10);
  if (s.rfind("nonmonotonic:", 0) == 0) s = s.substr(13);
  const std::size_t comma = s.find(',');
  const std::string k = s.substr(0, comma);
  int new_kind;
  if (k == "static")
    new_kind = sched_static;
  else if (k == "dynamic")
    new_kind = sched_dynamic;
  else if (k == "guided")
    new_kind = sched_guided;
  else if (k == "auto")
    new_kind = sched_auto;
  else {
    bad_env("OMP_SCHEDULE", v,
            "expected [monotonic:|nonmonotonic:]static|dynamic|guided|auto[,chunk]");
    return;
  }
  long new_chunk = new_kind == sched_static ? 0 : 1;
  if (comma != std::string::npos) {
    const std::optional<long> c = parse_count("OMP_SCHEDULE", s.c_str() + comma + 1, false);
    if (!c) return;
    new_chunk = *c;
  }
  kind = new_kind;
  chunk = new_chunk;
}

std::optional<std::size_t> parse_stacksize(const char* var, const char* v) {
  char* end = nullptr;
  const double n = std::strtod(v, &end);
  const char* accepted = "expected a size such as 4M, 512K or 65536";
  if (end == v || n <= 0) {
    bad_env(var, v, accepted);
    return std::nullopt;
  }
  double unit = 1024;  // OpenMP: a bare number is in kilobytes
  switch (*end) {
    case 'b':
    case 'B':
      unit = 1;
      ++end;
      break;
    case 'k':
    case 'K':
      unit = 1024;
      ++end;
      break;
    case 'm':
    case 'M':
      unit = 1024.0 * 1024;
      ++end;
      break;
    case 'g':
    case 'G':
      unit = 1024.0 * 1024 * 1024;
      ++end;
      break;
    default:
      break;
  }
  while (std::isspace(static_cast<unsigned char>(*end))) ++end;
  if (*end != '\0') {
    bad_env(var, v, accepted);
    return std::nullopt;
  }
  return std::size_t(n * unit);
}

std::optional<bool> parse_bool(const char* var, const char* v) {
  std::string s(v);
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  if (s == "true" || s == "1" || s == "yes") return true;
  if (s == "false" || s == "0" || s == "no") return false;
  bad_env(var, v, "expected true or false");
  return std::nullopt;
}

void read_environment(global_icvs& g) {
  g.initial.nthreads = 0;  // 0: the PEs of the node (decided when it runs)
  auto get = [](const char* var) -> const char* {
    const char* v = std::getenv(var);
    return v != nullptr && *v != '\0' ? v : nullptr;
  };
  if (const char* v = get("OMP_NUM_THREADS")) {
    // A list gives the first level's count first; nested levels run inactive.
    if (auto n = parse_count("OMP_NUM_THREADS", v, false, true)) g.initial.nthreads = int(*n);
  }
  if (const char* v = get("OMP_SCHEDULE"))
    parse_schedule(v, g.initial.run_sched, g.initial.run_chunk);
  if (const char* v = get("OMP_DYNAMIC"))
    if (auto b = parse_bool("OMP_DYNAMIC", v)) g.initial.dynamic = *b;
  if (const char* v = get("OMP_MAX_ACTIVE_LEVELS")) {
    if (auto n = parse_count("OMP_MAX_ACTIVE_LEVELS", v, true)) g.max_active_levels = int(*n);
  } else if (const char* n = get("OMP_NESTED")) {
    if (auto b = parse_bool("OMP_NESTED", n)) g.max_active_levels = *b ? 1 << 20 : 1;
  }
  if (const char* v = get("OMP_THREAD_LIMIT"))
    if (auto n = parse_count("OMP_THREAD_LIMIT", v, false)) g.thread_limit = int(*n);
  if (const char* v = get("OMP_CANCELLATION"))
    if (auto b = parse_bool("OMP_CANCELLATION", v)) g.cancellation = *b;
  if (const char* v = get("OMP_STACKSIZE")) {
    if (auto n = parse_stacksize("OMP_STACKSIZE", v)) g.stack_bytes = *n;
  } else if (const char* w = get("GOMP_STACKSIZE")) {
    if (auto n = parse_stacksize("GOMP_STACKSIZE", w)) g.stack_bytes = *n;
  }
}

// ---- the node -------------------------------------------------------------------

// Makes sure a node runs and the caller is one of its PEs, starting an
// attached node for a plain OpenMP program at its first region. False: a
// node runs but the caller is a thread of the program's own, which then
// runs its regions alone.
bool ensure_on_pe() {
  // A PE's own thread, or a carrier (a member's ULT met a nested region).
  if (threads::current_pe() >= 0) return true;
  if (weft::detail::node_runs()) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      base::warn(
          "an OpenMP parallel region on a thread that is not a PE of the running weft node "
          "runs with one thread (call it from a handler, an entry method or the main function)");
    return false;
  }
  // The node's PEs: WEFT_THREADS, else OMP_NUM_THREADS, else the cores.
  std::vector<std::string> words = {"libweft-omp"};
  if (std::getenv("WEFT_THREADS") == nullptr && globals().initial.nthreads > 0)
    words.push_back("--weft:threads=" + std::to_string(globals().initial.nthreads));
  if (std::getenv("WEFT_QUIET") == nullptr) words.push_back("--weft:quiet");
  // Under a launcher (mpirun of a hybrid MPI + OpenMP program), each process
  // runs its OpenMP on a node of its own, on its slice of the host's CPUs;
  // WEFT_TRANSPORT joins them into one weft job instead.
  if (std::getenv("WEFT_TRANSPORT") == nullptr) words.push_back("--weft:transport=local");
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  int argc = int(words.size());
  char** av = argv.data();
  const runtime_config cfg = weft::parse_options(argc, av);
  weft::detail::start_attached_node(cfg);
  // At exit, on this thread (the node's PE 0); another thread calling exit
  // leaves the node to the end of the process.
  static const int registered = std::atexit([] {
    if (weft::detail::attached_node_runs() && weft::my_rank() == 0 && !threads::on_carrier())
      weft::detail::stop_attached_node();
  });
  (void)registered;
  return true;
}

// ---- teams --------------------------------------------------------------------------

// Teams are recycled: a region's start would otherwise allocate and clear
// a few kilobytes (the work-share ring) and the end free them, a good part
// of an empty region's cost. A team whose last reference is dropped goes to
// the dropping thread's free list (at most keep_teams); every team ever
// made is in the registry, so that the layer's node_stop frees them all --
// also those a start message still held when the node stopped (its member
// was run by thread 0, and the message is freed without running). Free
// lists carry the registry's generation: one from before a node stop is
// stale and dropped.
constexpr std::size_t keep_teams = 8;
std::mutex g_teams_mutex;
std::unordered_set<team*> g_teams;  // guarded by g_teams_mutex
std::atomic<unsigned> g_teams_generation{0};

struct free_teams {
  unsigned generation = 0;
  std::vector<team*> list;
};
thread_local free_teams t_free_teams;

team* new_team(int n) {
  free_teams& f = t_free_teams;
  const unsigned gen = g_teams_generation.load(std::memory_order_acquire);
  if (f.generation != gen) {
    f.list.clear();
    f.generation = gen;
  }
  for (std::size_t i = f.list.size(); i-- > 0;) {
    team* t = f.list[i];
    if (t->size != n) continue;
    f.list[i] = f.list.back();
    f.list.pop_back();
    // A combined parallel loop's first work share is ready for every thread
    // (prepare_loop), but a body that schedules a static loop itself (GCC's
    // GOMP_parallel_loop_static) never leaves it: the slots start free.
    // (A slot's cancel flag is reset when the slot is set up for a
    // construct.)
    for (ws_slot& slot : t->ring) slot.busy = false;
    // A cancelled region leaves its barrier half-arrived (threads that
    // arrived before the cancel left it counted) and its flags set; the
    // empty region's path does not pay for checking more than the flags.
    if (t->cancelled.load(std::memory_order_relaxed)) {
      t->arrived.store(0, std::memory_order_relaxed);
      t->cancelled.store(false, std::memory_order_relaxed);
      std::lock_guard<std::mutex> lock(t->sleep_mutex);
      t->sleepers.clear();
    }
    if (t->ws_cancelled.load(std::memory_order_relaxed))
      t->ws_cancelled.store(false, std::memory_order_relaxed);
    t->refs.store(1, std::memory_order_relaxed);
    t->finished.store(0, std::memory_order_relaxed);
    for (member& m : t->members) {
      m.u.reset();
      m.sent_to = -1;
      m.thr = thread_state{};
      m.implicit.refs.store(1, std::memory_order_relaxed);
    }
    return t;
  }
  auto* t = new team(n);
  std::lock_guard<std::mutex> lock(g_teams_mutex);
  g_teams.insert(t);
  return t;
}

void release_team(team* t) {
  if (t->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  free_teams& f = t_free_teams;
  const unsigned gen = g_teams_generation.load(std::memory_order_acquire);
  if (f.generation != gen) {
    f.list.clear();
    f.generation = gen;
  }
  if (f.list.size() < keep_teams) {
    f.list.push_back(t);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(g_teams_mutex);
    g_teams.erase(t);
  }
  delete t;
}

void free_left_teams() {
  // A member that ended on a carrier may still be dropping its reference
  // (member_finished): every carrier stops first, whichever layer's
  // node_stop runs first.
  threads::stop_carriers();
  std::lock_guard<std::mutex> lock(g_teams_mutex);
  g_teams_generation.fetch_add(1, std::memory_order_acq_rel);
  for (team* t : g_teams) delete t;
  g_teams.clear();
}

// ---- members: logical threads -------------------------------------------------

void member_main(threads::ult* u);

// Runs on the OS thread that ran the member, after its ULT ended: the team
// hears of it, and the member's reference goes.
void member_finished(threads::ult* u) {
  member* m = static_cast<member*>(u->arg);
  team* t = m->thr.t;
  t->finished.fetch_add(1, std::memory_order_acq_rel);
  // Last access to the team by this member.
  release_team(t);
}

// Each started member holds a reference to its team until its ULT ended.
void start_member_here(team* t, member& m) {
  t->refs.fetch_add(1, std::memory_order_relaxed);
  threads::start_here(&m.u);
}

void start_member_on_carrier(team* t, member& m, int pe, int slot, threads::placement why) {
  t->refs.fetch_add(1, std::memory_order_relaxed);
  threads::start_on_carrier(&m.u, pe, slot, why);
}

struct start_payload {
  team* t;
  int index;
};

void on_start(message_ptr msg) {
  const start_payload p = msg->as<start_payload>();
  member& m = p.t->members[std::size_t(p.index)];
  if (threads::claim(&m.u)) start_member_here(p.t, m);
  release_team(p.t);
}

// Resumes a ULT asleep at a barrier (on its PE's thread or its carrier).
void send_resume(thread_state* thr) {
  threads::resume(thr->ult);
}

// Thread 0 waiting for its team: members whose start message waits behind
// a PE that stays inside one handler start on a carrier of thread 0's PE
// (whose CPU waits anyway).
bool rescue_held_up_members(thread_state& me) {
  team* t = me.t;
  if (t == nullptr || me.id != 0) return false;
  const std::uint64_t now = base::wall_ns();
  if (now - t->start_ns < start_grace_ns) return false;
  bool started = false;
  // Skip the prefix of members known started.
  while (t->first_unstarted < t->size) {
    const member& m = t->members[std::size_t(t->first_unstarted)];
    if (m.sent_to >= 0 && m.u.state.load(std::memory_order_relaxed) == threads::ult::unstarted)
      break;
    ++t->first_unstarted;
  }
  for (int i = t->first_unstarted; i < t->size; ++i) {
    member& m = t->members[std::size_t(i)];
    if (m.sent_to < 0 || m.u.state.load(std::memory_order_relaxed) != threads::ult::unstarted)
      continue;
    if (threads::held_up(&m.u, m.sent_to, now) && threads::claim(&m.u)) {
      start_member_on_carrier(t, m, threads::current_pe(), 1, threads::placement::rescued);
      started = true;
    }
  }
  return started;
}

}  // namespace

global_icvs& globals() {
  static global_icvs g;
  static const bool read = [] {
    read_environment(g);
    return true;
  }();
  (void)read;
  return g;
}

thread_state& current() {
  // On a member's logical thread: the OpenMP thread it runs as now (the
  // member, or thread 0 of a region it met), kept with the ULT.
  if (threads::ult* u = threads::current()) return *static_cast<thread_state*>(u->local);
  if (t_current != nullptr) return *t_current;
  if (t_initial == nullptr) {
    // One per OS thread, for its whole life (regions may start there at any
    // time); freed at thread exit.
    static thread_local std::unique_ptr<thread_state> initial;
    initial = std::make_unique<thread_state>();
    initial->icv = globals().initial;
    t_initial = initial.get();
  }
  return *t_initial;
}

void set_current(thread_state* t) noexcept {
  if (threads::ult* u = threads::current())
    u->local = t;
  else
    t_current = t;
}

namespace {
// What current() would answer, null for a PE stack's initial thread.
thread_state* current_or_null() noexcept {
  if (threads::ult* u = threads::current()) return static_cast<thread_state*>(u->local);
  return t_current;
}

// errno is the OpenMP thread's: what a wait runs meanwhile on its OS thread
// (handlers, tasks, futex waits that time out) must not change it.
struct keep_errno {
  int saved = errno;
  ~keep_errno() { errno = saved; }
};
}  // namespace

// ---- waiting -------------------------------------------------------------------------

bool run_one_task(thread_state& me);

void wait_step(thread_state& me, bool may_sleep, std::mutex* m,
               std::vector<thread_state*>* sleepers, bool (*recheck)(void*), void* ctx) {
  const keep_errno keep;
  if (run_one_task(me)) return;
  if (me.ult != nullptr) {
    // Thread 0 of a nested region is a member's ULT: its own members may
    // wait behind a busy PE too.
    if (rescue_held_up_members(me)) return;
    if (may_sleep && sleepers != nullptr) {
      {
        std::lock_guard<std::mutex> lock(*m);
        if (recheck(ctx)) return;
        sleepers->push_back(&me);
      }
      threads::suspend();
      return;
    }
    threads::yield();
    return;
  }
  const int pe = threads::current_pe();
  if (pe >= 0) {
    if (rescue_held_up_members(me)) return;
    // Handlers served here are not part of this region: they see the PE's
    // initial OpenMP thread.
    thread_state* saved = t_current;
    t_current = nullptr;
    const int n = weft::detail::serve_messages(16);
    t_current = saved;
    if (n != 0) return;
    // Nothing to run: spin a little, unless the PEs share CPUs or a carrier
    // needs this PE's CPU, where the thread we wait for may need this one.
    if (!weft::config().oversubscribed && !weft::detail::pe_has_guests(pe)) {
      for (int i = 0; i < 32; ++i) base::cpu_relax();
      return;
    }
  }
  sched_yield();
}

// ---- barriers ------------------------------------------------------------------------

namespace {

struct barrier_ctx {
  team* t;
  unsigned round;
  bool cancellable;
};
// The round is over (every thread arrived), or -- a cancellable barrier --
// the region was cancelled.
bool barrier_released(void* p) {
  auto* c = static_cast<barrier_ctx*>(p);
  return c->t->round.load(std::memory_order_acquire) != c->round ||
         (c->cancellable && c->t->cancelled.load(std::memory_order_acquire));
}

// The barrier opens: a `cancel for` of a construct without a slot (see
// team::ws_cancelled) ends with it.
void clear_ws_cancelled(team* t) {
  if (t->ws_cancelled.load(std::memory_order_relaxed))
    t->ws_cancelled.store(false, std::memory_order_relaxed);
}

// Both barriers. A cancellable one (only with OMP_CANCELLATION) is left at
// once, or as soon as it is seen, when the region is cancelled: true. A
// thread that left it so stays counted in `arrived`, which nobody resets:
// after the cancel, a conforming program's threads meet only cancellable
// barriers (GCC makes every barrier of a region that may be cancelled one)
// and go to the region's end, which counts members, not arrivals; new_team
// resets it for the next region. (A plain barrier met after the cancel --
// an orphaned construct's -- waits for the thread that cancelled, forever,
// as in libgomp.)
bool barrier_wait(thread_state& me, bool cancellable) {
  team* t = me.t;
  if (t == nullptr) return false;
  if (cancellable && t->cancelled.load(std::memory_order_acquire)) return true;
  if (t->size == 1) {
    // Still a task scheduling point: the team's tasks finish here.
    while (t->tasks_pending.load(std::memory_order_acquire) != 0)
      if (!run_one_task(me)) sched_yield();
    clear_ws_cancelled(t);
    return false;
  }
  barrier_ctx c{t, t->round.load(std::memory_order_acquire), cancellable};
  if (t->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == t->size) {
    // Last to arrive: the team's tasks end before anyone passes. (Every
    // thread arrived, so none cancelled the region: a cancelling thread goes
    // to the region's end.)
    int spins = 0;
    while (t->tasks_pending.load(std::memory_order_acquire) != 0)
      if (!run_one_task(me) && ++spins > wait_spins)
        wait_step(me, false, nullptr, nullptr, nullptr, nullptr);
    clear_ws_cancelled(t);
    t->arrived.store(0, std::memory_order_relaxed);
    t->round.store(c.round + 1, std::memory_order_release);
    wake_all(t->sleep_mutex, t->sleepers);
    return false;
  }
  int spins = 0;
  while (!barrier_released(&c)) {
    if (++spins < wait_spins) {
      base::cpu_relax();
      continue;
    }
    // Sleep only while no task is pending: a waiter helps with the tasks.
    // (cancel_region wakes the sleepers after setting the flag, which the
    // recheck reads under the same mutex: no wake-up is lost.)
    const bool may_sleep = t->tasks_pending.load(std::memory_order_acquire) == 0;
    wait_step(me, may_sleep, &t->sleep_mutex, &t->sleepers, &barrier_released, &c);
  }
  return t->round.load(std::memory_order_acquire) == c.round;
}

}  // namespace

void wake_all(std::mutex& m, std::vector<thread_state*>& sleepers) {
  std::vector<thread_state*> woken;
  {
    std::lock_guard<std::mutex> lock(m);
    woken.swap(sleepers);
  }
  for (thread_state* thr : woken) send_resume(thr);
}

void barrier(thread_state& me) {
  barrier_wait(me, false);
}

bool barrier_cancel(thread_state& me) {
  return barrier_wait(me, globals().cancellation);
}

void cancel_region(team& t) {
  t.cancelled.store(true, std::memory_order_release);
  // Fibers asleep at a cancellable barrier see the flag when they wake
  // (those at a plain barrier go back to sleep).
  wake_all(t.sleep_mutex, t.sleepers);
}

// ---- regions -------------------------------------------------------------------------

namespace {

// The region's end needs no barrier among the members: a member whose body
// returned helps with the team's queued tasks and ends; thread 0 waits for
// every member to have ended and every task to be done (end_region), which
// spares each member a wake-up message at every region's end.
void member_main(threads::ult* u) {
  auto* thr = &static_cast<member*>(u->arg)->thr;
  thr->ult = u;
  thr->pe = u->pe;
  team* t = thr->t;
  try {
    t->fn(t->data);
  } catch (const std::exception& e) {
    base::fatal("an exception escaped an OpenMP parallel region (thread %d): %s", thr->id,
                e.what());
  } catch (...) {
    base::fatal(
        "an exception not derived from std::exception escaped an OpenMP parallel region "
        "(thread %d)",
        thr->id);
  }
  while (t->tasks_pending.load(std::memory_order_acquire) != 0 && run_one_task(*thr)) {
  }
}

}  // namespace

int team_size_for(thread_state& me, unsigned num_threads) {
  if (me.active_level >= globals().max_active_levels || num_threads == 1) return 1;
  if (!ensure_on_pe()) return 1;
  int n = num_threads != 0 ? int(num_threads) : me.icv.nthreads;
  // No count asked for: one thread per PE. More threads than PEs run on
  // carriers (thread i in slot i / PEs of PE (p + i) mod PEs).
  if (n <= 0) n = threads::node_pes();
  return std::max(1, std::min(n, globals().thread_limit));
}

// The name of a parallel region on the trace (interned on first use).
const weft::trace::event_name& omp_region_name() {
  static const weft::trace::event_name name{"omp parallel"};
  return name;
}

team* begin_region(void (*fn)(void*), void* data, int n, void (*prepare)(team&, void*),
                   void* prepare_ctx) {
  thread_state& me = current();
  team* t = new_team(n);
  t->fn = fn;
  t->data = data;
  t->start_ns = base::wall_ns();
  t->first_unstarted = 1;
  t->master_pe = threads::current_pe();
  const bool active = n > 1;
  for (int i = 0; i < n; ++i) {
    thread_state& thr = t->members[std::size_t(i)].thr;
    thr.t = t;
    thr.id = i;
    thr.level = me.level + 1;
    thr.active_level = me.active_level + (active ? 1 : 0);
    thr.parent = &me;
    thr.icv = me.icv;
    thr.task = &t->members[std::size_t(i)].implicit;
    thr.group = nullptr;
  }
  if (prepare != nullptr) prepare(*t, prepare_ctx);
  member& master = t->members[0];
  master.u.state.store(threads::ult::started, std::memory_order_relaxed);
  master.thr.pe = t->master_pe;
  // A region met on a member's ULT (a nested active region): its thread 0
  // is that ULT, and waits as ULTs do.
  master.thr.ult = threads::current();
  // The family: a region met outside any team starts one; a nested region
  // joins its encloser's.
  t->family = me.t != nullptr          ? me.t->family
              : threads::isolate_all() ? nullptr
                                       : static_cast<const void*>(t);
  // Thread 0 on its PE's own stack makes the PE's thread the family's: no
  // other member of the family starts there until the region ends.
  threads::claim_pe_stack(t->family);
  if (n > 1) {
    if (!t->members_bound) {
      // What a member's logical thread runs: the same for every region of
      // this team (teams are recycled), so set once.
      for (int i = 1; i < n; ++i) {
        member& m = t->members[std::size_t(i)];
        m.u.body = &member_main;
        m.u.finished = &member_finished;
        m.u.arg = &m;
        m.u.local = &m.thr;
        m.u.stack_bytes = globals().stack_bytes;
      }
      t->members_bound = true;
    }
    const int pes = threads::node_pes(), p = t->master_pe;
    // Where each member goes: a start message to its PE's own thread (slot
    // 0), or a carrier. A member of a nested region finds its PE's thread
    // running an outer member as a rule: where the PE's thread has any
    // logical thread, it goes to a carrier at once (that PE may run the
    // other one for long).
    const bool nested = me.t != nullptr || master.thr.ult != nullptr;
    int messages = 0;
    for (int i = 1; i < n; ++i) {
      member& m = t->members[std::size_t(i)];
      m.u.family = t->family;
      const int pe = (p + i) % pes;
      if (i < pes && !(nested && threads::pe_thread_taken(pe))) {
        m.sent_to = pe;
        ++messages;
      }
    }
    // Each start message holds a reference to the team.
    t->refs.fetch_add(messages, std::memory_order_relaxed);
    for (int i = 1; i < n; ++i) {
      member& m = t->members[std::size_t(i)];
      const int pe = (p + i) % pes, slot = i / pes;
      if (m.sent_to >= 0) {
        weft::send(threads::job_pe(pe), make_message_with(h_start, start_payload{t, i}));
      } else {
        threads::claim(&m.u);
        start_member_on_carrier(
            t, m, pe, slot > 0 ? slot : 1,
            slot > 0 ? threads::placement::beyond_pes : threads::placement::pe_taken);
      }
    }
  }
  t->outer = current_or_null();
  set_current(&master.thr);
  // On the trace, thread 0's part of the region is a slice of its PE's
  // track; not for a thread 0 that is a ULT, which may suspend inside the
  // region while its PE's track goes on with other handlers.
  if (trace::on() && master.thr.ult == nullptr) [[unlikely]]
    trace::detail::emit(trace::kind::region_begin, omp_region_name().id(), 0, 0, 0);
  return t;
}

void end_region(team* t) {
  member& master = t->members[0];
  // The implicit barrier at the region's end: every member ended (its ULT
  // gone: it holds the team until then) and every task of the team done.
  const int n = t->size;
  int spins = 0;
  while (t->finished.load(std::memory_order_acquire) != n - 1 ||
         t->tasks_pending.load(std::memory_order_acquire) != 0) {
    if (++spins < 64) {
      base::cpu_relax();
      continue;
    }
    wait_step(master.thr, false, nullptr, nullptr, nullptr, nullptr);
  }
  set_current(t->outer);
  threads::release_pe_stack(t->family);
  if (trace::on() && master.thr.ult == nullptr) [[unlikely]]
    trace::detail::emit(trace::kind::region_end, omp_region_name().id(), 0, 0, 0);
  release_team(t);
}

void run_region(void (*fn)(void*), void* data, int n, void (*prepare)(team&, void*),
                void* prepare_ctx) {
  team* t = begin_region(fn, data, n, prepare, prepare_ctx);
  try {
    fn(data);
  } catch (const std::exception& e) {
    base::fatal("an exception escaped an OpenMP parallel region: %s", e.what());
  } catch (...) {
    base::fatal("an exception not derived from std::exception escaped an OpenMP parallel region");
  }
  end_region(t);
}

namespace {

const bool registered = [] {
  h_start = register_handler("omp.start_member", &on_start);
  weft::detail::register_layer({"omp", nullptr, nullptr, nullptr, &free_left_teams});
  return true;
}();

}  // namespace

}  // namespace weft::omp
