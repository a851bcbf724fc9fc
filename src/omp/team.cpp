// Parallel regions: teams of OpenMP threads on the PEs of a node, barriers
// that give the PE back, the waits every other construct uses, the OpenMP
// thread a caller runs as, and the node a plain OpenMP program gets at its
// first region (see omp_internal.hpp for the model; environment.cpp reads
// the ICVs).
//
// A region of n threads on PE p of a node of P PEs: thread 0 runs fn(data)
// right there, on p's stack (claiming it: no logical thread starts on p's
// thread meanwhile); member i is logical thread (ULT) i of the team, placed
// in slot i / P of PE (p + i) mod P. Slot 0 is that PE's own thread: a start
// message goes there, and the PE's handler runs the member as a fiber on its
// thread if no other OpenMP thread lives on it, else on one of its carrier
// threads (a nested team's member, whose PE's thread runs an outer member,
// goes to a carrier at once). Slots 1.. are carriers: more threads than
// PEs. Members start each other down a tree of fan-out 4 (start_subtree),
// so that thread 0 starts 4 of them, not n - 1. The same member of a
// same-sized region lands on the same OS thread each time, so threadprivate
// data persists between regions as OpenMP promises. A member whose start
// message waits behind a PE that stays inside one handler
// (--weft:ult-rescue-us) is started on a carrier by thread 0 while it waits
// (the seeds' "busy cores will not pick up statically assigned work"), and
// starts its subtree there. The region ends when every member's ULT has
// ended (they arrive on a combining tree, barrier.cpp); the last reference
// frees the team.
#include <pthread.h>
#include <sched.h>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_set>
#include "base/op_count.hpp"
#include "omp/omp_internal.hpp"
#include "weft/base/error.hpp"
#include "weft/base/timer.hpp"
#include "weft/base/topology.hpp"
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

thread_local thread_state* t_initial = nullptr;

handler_id h_start = 0;

// ---- the node -------------------------------------------------------------------

// Makes sure a node runs and the caller is one of its PEs, starting an
// attached node for a plain OpenMP program at its first region. False: a
// node runs but the caller is a thread of the program's own, which then
// runs its regions alone.
bool ensure_on_pe() {
  // A PE's own thread, or a carrier (a member's ULT met a nested region).
  if (threads::current_pe() >= 0) return true;
  // Two threads of the program may meet their first regions at once: one
  // starts the node, the other then finds it running.
  static std::mutex starting;
  std::lock_guard<std::mutex> lock(starting);
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
  // Places and a binding policy put the PEs where OpenMP would put a team
  // of as many threads, unless weft's own binding is asked for.
  if (std::getenv("WEFT_BIND") == nullptr) {
    const char* pes = std::getenv("WEFT_THREADS");
    const int n = pes != nullptr && std::atoi(pes) > 0 ? std::atoi(pes)
                  : globals().initial.nthreads > 0     ? globals().initial.nthreads
                                                       : base::topology::get().allowed_cores();
    if (std::string b = places_bind(n); !b.empty()) words.push_back("--weft:bind=" + b);
  }
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
// Never destroyed: at exit a node that thread 0 of the program did not
// stop (its first region met on another thread) may still hold teams, and
// they stay reachable from here.
std::unordered_set<team*>& teams_registry() {  // guarded by g_teams_mutex
  static auto* registry = new std::unordered_set<team*>;
  return *registry;
}
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
      t->arrivals.reset();
      t->small_arrived.store(0, std::memory_order_relaxed);
      t->cancelled.store(false, std::memory_order_relaxed);
      std::lock_guard<std::mutex> lock(t->sleep_mutex);
      t->sleepers.clear();
    }
    if (t->ws_cancelled.load(std::memory_order_relaxed))
      t->ws_cancelled.store(false, std::memory_order_relaxed);
    t->refs.store(1, std::memory_order_relaxed);
    // The members are reset by whoever starts each (start_member): the
    // master touches none of the n - 1 beyond its own children.
    return t;
  }
  auto* t = new team(n);
  std::lock_guard<std::mutex> lock(g_teams_mutex);
  teams_registry().insert(t);
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
    teams_registry().erase(t);
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
  for (team* t : teams_registry()) delete t;
  teams_registry().clear();
}

// ---- members: logical threads -------------------------------------------------

void member_main(threads::ult* u);

// Runs on the OS thread that ran the member, after its ULT ended: the
// member arrives at the region's end, its last access to the team (the
// master, which holds the team, waits for the last arrival).
void member_finished(threads::ult* u) {
  member* m = static_cast<member*>(u->arg);
  team* t = m->thr.t;
  const unsigned seq = t->seq;
  if (t->join.arrive(m->thr.id - 1)) t->ended.store(seq, std::memory_order_release);
}

struct start_payload {
  team* t;
  int index;
};

// A start message: the member starts here, unless thread 0 rescued it
// meanwhile -- then the rescue took a reference for this message, which
// goes now. (A started member's end may free the team before
// start_here returns: the team is not touched after it.)
void on_start(message_ptr msg) {
  const start_payload p = msg->as<start_payload>();
  member& m = p.t->members[std::size_t(p.index)];
  if (threads::claim(&m.u))
    threads::start_here(&m.u);
  else
    release_team(p.t);
}

// The fork tree: member i starts members 4i + 1 .. 4i + 4 before it runs
// the region's body, so thread 0 starts at most 4 members, whatever the
// team's size, and the last member starts log4(n) hops after the region
// began, where a master that starts every member sends n - 1 messages
// (each possibly waking a sleeping PE: a system call) before its own body
// runs. libgomp's master also wakes its team alone (one futex word, every
// thread woken). Why 4 and not 2 (a binomial tree, log2(n) starts by the
// master): a hop -- a message taken, a fiber started -- costs several
// sends, and where the PEs sleep, a wake-up (13-24 us on the reference
// machine); 16 threads start 2 hops deep after at most 8 sends, against 4
// hops, or 1 hop after 15 sends for the linear start.
constexpr int fork_fan_out = 4;
void start_member(team* t, int i);
void start_subtree(team* t, int i) {
  const int first = fork_fan_out * i + 1;
  const int end = std::min(first + fork_fan_out, t->size);
  for (int c = first; c < end; ++c) start_member(t, c);
}

// Member i to its place: a start message to its PE's own thread (slot 0),
// or a carrier (slots 1..: more threads than PEs; or, in a nested region,
// a PE whose thread has a logical thread already: that PE may run the other
// one for long). Its state is reset here, for the region, by its starter
// only: nobody else touches an unarmed member.
void start_member(team* t, int i) {
  member& m = t->members[std::size_t(i)];
  base::count(base::op::peer_visit);
  m.u.reset();
  m.u.family = t->family;
  const int pes = t->pes, pe = (t->master_pe + i) % pes, slot = i / pes;
  const bool message = i < pes && !(t->nested && threads::pe_thread_taken(pe));
  m.sent_to = message ? pe : -1;
  m.armed.store(t->seq, std::memory_order_release);
  if (message) {
    weft::send(threads::job_pe(pe), make_message_with(h_start, start_payload{t, i}));
    return;
  }
  threads::claim(&m.u);
  threads::start_on_carrier(
      &m.u, pe, slot > 0 ? slot : 1,
      slot > 0 ? threads::placement::beyond_pes : threads::placement::pe_taken);
}

// Thread 0 waiting for its team: members whose start message waits behind
// a PE that stays inside one handler start on a carrier of thread 0's PE
// (whose CPU waits anyway).
bool rescue_held_up_members(thread_state& me) {
  team* t = me.t;
  if (t == nullptr || me.id != 0) return false;
  const std::uint64_t now = base::wall_ns();
  if (now - t->start_ns < start_grace_ns) return false;
  // One poll of the members: a scan that runs only once the region is
  // start_grace_ns old, a wait, not the region's path.
  base::count(base::op::poll);
  bool started = false;
  // Skip the prefix of members known started. A member not armed yet
  // waits for its starter, an earlier member, which the scan looks at
  // first: a held-up member is rescued with its subtree (it starts that
  // itself), and nobody's start is lost.
  while (t->first_unstarted < t->size) {
    const member& m = t->members[std::size_t(t->first_unstarted)];
    if (m.armed.load(std::memory_order_acquire) != t->seq) break;
    if (m.sent_to >= 0 && m.u.state.load(std::memory_order_relaxed) == threads::ult::unstarted)
      break;
    ++t->first_unstarted;
  }
  for (int i = t->first_unstarted; i < t->size; ++i) {
    member& m = t->members[std::size_t(i)];
    if (m.armed.load(std::memory_order_acquire) != t->seq || m.sent_to < 0 ||
        m.u.state.load(std::memory_order_relaxed) != threads::ult::unstarted)
      continue;
    if (!threads::held_up(&m.u, m.sent_to, now)) continue;
    // The reference of the start message, which finds its member taken:
    // before the claim, which on_start may see at once.
    base::count(base::op::shared_rmw);
    t->refs.fetch_add(1, std::memory_order_relaxed);
    if (threads::claim(&m.u)) {
      threads::start_on_carrier(&m.u, threads::current_pe(), 1, threads::placement::rescued);
      started = true;
    } else {
      t->refs.fetch_sub(1, std::memory_order_relaxed);  // the master holds one
    }
  }
  return started;
}

}  // namespace

namespace detail {
constinit thread_local thread_state* t_current WEFT_TLS_FAST = nullptr;
}  // namespace detail

namespace {
// Frees an OS thread's initial OpenMP thread with its thread-locals.
// Destructors of the program's own globals run after those at exit and may
// still ask (omp_get_thread_num in a global object's destructor): they get
// a new one, never freed.
thread_local bool t_initial_freed = false;
struct initial_holder {
  thread_state* state = nullptr;
  ~initial_holder() {
    delete state;
    t_initial = nullptr;
    t_initial_freed = true;
  }
};
}  // namespace

thread_state& initial_thread() {
  if (t_initial == nullptr) {
    // One per OS thread, for its whole life (regions may start there at any
    // time).
    auto* state = new thread_state;
    state->icv = globals().initial;
    if (!t_initial_freed) {
      static thread_local initial_holder holder;
      holder.state = state;
    }
    t_initial = state;
  }
  return *t_initial;
}

void set_current(thread_state* t) noexcept {
  if (threads::ult* u = threads::current())
    u->local = t;
  else
    detail::t_current = t;
}

namespace {
// What current() would answer, null for a PE stack's initial thread.
thread_state* current_or_null() noexcept {
  if (threads::ult* u = threads::current()) return static_cast<thread_state*>(u->local);
  return detail::t_current;
}
}  // namespace

thread_state* swap_current(thread_state* t) noexcept {
  thread_state* before = current_or_null();
  set_current(t);
  return before;
}

namespace {

// errno is the OpenMP thread's: what a wait runs meanwhile on its OS thread
// (handlers, tasks, futex waits that time out) must not change it.
struct keep_errno {
  int saved = errno;
  ~keep_errno() { errno = saved; }
};
}  // namespace

// ---- waiting -------------------------------------------------------------------------

bool run_one_task(thread_state& me);

void wait_step(thread_state& me, bool may_sleep, std::mutex* m, sleeper_list* sleepers,
               bool (*recheck)(void*), void* ctx) {
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
        // may_sleep: no task was pending. One submitted since then is seen
        // here, or its producer sees this fiber on the list and wakes it
        // (the protocol: wake_for_tasks, task_queue.cpp).
        if (me.t != nullptr && me.t->tasks_pending.load(std::memory_order_seq_cst) != 0) {
          sleepers->pop_back();
          return;
        }
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
    thread_state* saved = detail::t_current;
    detail::t_current = nullptr;
    const int n = weft::detail::serve_messages(16);
    detail::t_current = saved;
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

// ---- regions -------------------------------------------------------------------------

namespace {

// The region's end needs no barrier among the members: a member whose body
// returned helps with the team's queued tasks and ends; thread 0 waits for
// every member to have ended and every task to be done (end_region), which
// spares each member a wake-up message at every region's end.
void member_main(threads::ult* u) {
  auto* m = static_cast<member*>(u->arg);
  auto* thr = &m->thr;
  // The OpenMP thread it runs as: the team's prototype, made its own.
  team* t = thr->t;
  *thr = t->proto;
  thr->id = int(m - t->members.data());
  thr->task = &m->implicit;
  m->implicit.refs.store(1, std::memory_order_relaxed);
  thr->ult = u;
  thr->pe = u->pe;
  if (globals().affinity) [[unlikely]]
    affinity_member(*m);
  start_subtree(t, thr->id);
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
  end_implicit_task(*thr);
  while (t->tasks_pending.load(std::memory_order_acquire) != 0 && run_one_task(*thr)) {
  }
}

}  // namespace

int team_size_for(thread_state& me, unsigned num_threads) {
  if (me.active_level >= me.icv.max_active_levels || num_threads == 1) return 1;
  if (!ensure_on_pe()) return 1;
  int n = num_threads != 0 ? int(num_threads) : me.icv.nthreads;
  // No count asked for: one thread per PE. More threads than PEs run on
  // carriers (thread i in slot i / PEs of PE (p + i) mod PEs).
  if (n <= 0) n = threads::node_pes();
  return std::max(1, std::min(n, me.icv.thread_limit));
}

namespace {
// Under a thread limit, a team of n takes n - 1 threads from the limit's
// budget: those the group's live teams have not taken (libgomp the same);
// fewer if fewer are left. No limit set: no shared count at all.
int take_limited_threads(const thread_state& me, int n) {
  const int limit = me.icv.thread_limit;
  if (limit >= icvs{}.thread_limit || n <= 1) return 0;
  std::atomic<int>& used = globals().limited_threads;
  int now = used.load(std::memory_order_relaxed);
  for (;;) {
    const int take = std::max(0, std::min(n - 1, limit - 1 - now));
    if (take == 0) return 0;
    if (used.compare_exchange_weak(now, now + take, std::memory_order_relaxed)) return take;
  }
}
}  // namespace

// The name of a parallel region on the trace (interned on first use).
const weft::trace::event_name& omp_region_name() {
  static const weft::trace::event_name name{"omp parallel"};
  return name;
}

team* begin_region(void (*fn)(void*), void* data, int n, void (*prepare)(team&, void*),
                   void* prepare_ctx, unsigned flags) {
  thread_state& me = current();
  int limited = 0;
  if (me.icv.thread_limit < icvs{}.thread_limit && n > 1) [[unlikely]] {
    limited = take_limited_threads(me, n);
    n = limited + 1;
  }
  team* t = new_team(n);
  t->limited = limited;
  t->fn = fn;
  t->data = data;
  t->start_ns = base::wall_ns();
  t->seq += 1;
  t->first_unstarted = 1;
  t->master_pe = threads::current_pe();
  const bool active = n > 1;
  // What each thread starts as; each member copies it as it starts.
  thread_state& proto = t->proto;
  proto = thread_state{};
  proto.t = t;
  proto.level = me.level + 1;
  proto.active_level = me.active_level + (active ? 1 : 0);
  proto.parent = &me;
  proto.icv = me.icv;
  proto.team_num = me.team_num;
  proto.num_teams = me.num_teams;
  const bool affinity = globals().affinity;
  if (affinity) [[unlikely]] {
    t->bind = region_bind(me, flags, proto.icv.bind);
    affinity_begin(*t, me);
  }
  if (prepare != nullptr) prepare(*t, prepare_ctx);
  member& master = t->members[0];
  master.thr = proto;
  master.thr.task = &master.implicit;
  master.implicit.refs.store(1, std::memory_order_relaxed);
  master.u.state.store(threads::ult::started, std::memory_order_relaxed);
  master.thr.pe = t->master_pe;
  // A region met on a member's ULT (a nested active region): its thread 0
  // is that ULT, and waits as ULTs do.
  master.thr.ult = threads::current();
  if (affinity) [[unlikely]]
    affinity_member(master);
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
        m.thr.t = t;
      }
      t->members_bound = true;
    }
    t->pes = threads::node_pes();
    // A member of a nested region finds its PE's thread running an outer
    // member as a rule (start_member).
    t->nested = me.t != nullptr || master.thr.ult != nullptr;
    start_subtree(t, 0);
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
  // The implicit barrier at the region's end: every member ended (its
  // fiber gone; the last to arrive stores the region's number) and every
  // task of the team done.
  int spins = 0;
  while ((t->size > 1 && t->ended.load(std::memory_order_acquire) != t->seq) ||
         t->tasks_pending.load(std::memory_order_acquire) != 0) {
    if (++spins < 64) {
      base::cpu_relax();
      continue;
    }
    wait_step(master.thr, false, nullptr, nullptr, nullptr, nullptr);
  }
  // Every task of the team is done.
  if (master.implicit.deps != nullptr || master.implicit.all_memory != nullptr)
    clear_deps(&master.implicit);
  set_current(t->outer);
  threads::release_pe_stack(t->family);
  if (t->limited != 0) [[unlikely]]
    globals().limited_threads.fetch_sub(t->limited, std::memory_order_relaxed);
  if (trace::on() && master.thr.ult == nullptr) [[unlikely]]
    trace::detail::emit(trace::kind::region_end, omp_region_name().id(), 0, 0, 0);
  base::count(base::op::shared_rmw);
  release_team(t);
}

void run_region(void (*fn)(void*), void* data, int n, void (*prepare)(team&, void*),
                void* prepare_ctx, unsigned flags) {
  team* t = begin_region(fn, data, n, prepare, prepare_ctx, flags);
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
  weft::detail::layer_hooks hooks{"omp", &schemes_node_start, nullptr, nullptr, &free_left_teams};
  hooks.stats = &schemes_stats;
  weft::detail::register_layer(hooks);
  return true;
}();

}  // namespace

}  // namespace weft::omp
