// libweft-omp's internals: teams, OpenMP threads, work shares, tasks
// (docs/omp.md has the design; the entry points are in the .cpp files of
// this folder).
//
// An OpenMP thread is a thread_state. Thread 0 of a team is the thread that
// met the parallel construct, on its own stack; threads 1..n-1 are logical
// threads of layer threads (ULTs, weft/threads/ult.hpp): each runs as a
// fiber on the OS thread of its PE when no other OpenMP thread lives there,
// else on a carrier thread of that PE, so that every OpenMP thread has
// thread-local storage of its own (threadprivate, errno, libraries') and
// threads that spin waiting for each other are time-sliced by the OS
// (lesson 14). Every wait (barriers, ordered, locks, taskwait) gives the PE
// back: a ULT suspends (a barrier resumes it) or yields, and thread 0,
// which cannot leave its stack, serves its PE's messages while it waits --
// which is how other teams' members keep running. So no wait blocks a PE's
// scheduler (lesson 11), and two teams waiting for each other's PEs cannot
// deadlock.
#pragma once
#include <sched.h>
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "omp/work_share.hpp"
#include "threads/ult_tls.hpp"
#include "weft/base/cache.hpp"
#include "weft/base/chase_lev.hpp"
#include "weft/threads/fiber.hpp"
#include "weft/threads/ult.hpp"

namespace weft::omp {

// The data-environment ICVs a thread carries (OpenMP 5.0, 2.4).
struct icvs {
  int nthreads = 1;               // nthreads-var
  int run_sched = sched_dynamic;  // run-sched-var
  long run_chunk = 1;
  // OMP_SCHEDULE=weft_idle|weft_history[,part]: run-sched-var is static,
  // run under this scheme, with parts of at least run_part iterations.
  int run_scheme = scheme_option;
  long run_part = 1;
  bool dynamic = false;  // dyn-var
  int bind = 0;  // bind-var (omp_proc_bind_t: false 0, true 1, primary 2, close 3, spread 4)
  // thread-limit-var: a task's, since a teams or target construct's
  // thread_limit clause sets it for what runs inside (OMP_THREAD_LIMIT
  // initially).
  int thread_limit = 1 << 20;
  int max_active_levels = 1;  // max-active-levels-var, also a task's (OpenMP 5.0)
  // def-allocator-var (an omp_allocator_handle_t; allocator.cpp): per
  // thread, as libgomp keeps it, inherited by a region's threads.
  std::uintptr_t def_allocator = 1;  // omp_default_mem_alloc
};

// allocator.cpp: OMP_ALLOCATOR's value (a predefined allocator's name,
// as libgomp accepts it; else a warning and omp_default_mem_alloc), and
// a predefined allocator's name (OMP_DISPLAY_ENV).
std::uintptr_t parse_allocator(const char* var, const char* value);
const char* allocator_name(std::uintptr_t allocator);

// The process-wide ones, read from the environment once.
struct global_icvs {
  icvs initial;  // what the initial thread starts with
  // nteams-var and teams-thread-limit-var (OMP_NUM_TEAMS,
  // OMP_TEAMS_THREAD_LIMIT, omp_set_num_teams, omp_set_teams_thread_limit;
  // 0: not set), and OMP_TARGET_OFFLOAD=mandatory (target.cpp).
  std::atomic<int> num_teams{0};
  std::atomic<int> teams_thread_limit{0};
  // Threads of the contention group alive beyond the initial one, counted
  // only while a region starts under a thread limit (OMP_THREAD_LIMIT,
  // thread_limit clauses): the limit is on all of them, nested teams too.
  std::atomic<int> limited_threads{0};
  bool offload_mandatory = false;
  std::size_t stack_bytes = std::size_t(4) << 20;  // OMP_STACKSIZE, else the C library's default
  bool cancellation = false;                       // cancel-var (OMP_CANCELLATION)
  // Places exist (OMP_PLACES, OMP_PROC_BIND) or OMP_DISPLAY_AFFINITY is on:
  // regions then go through affinity.cpp; read-only after the environment.
  bool affinity = false;
};
// The process-wide ICVs, the environment read at the first call: on every
// task's and loop's path, so the check that it was read is inline.
extern global_icvs g_globals;
extern std::atomic<bool> g_globals_read;
global_icvs& read_globals();
inline global_icvs& globals() {
  if (g_globals_read.load(std::memory_order_acquire)) [[likely]]
    return g_globals;
  return read_globals();
}

struct team;
struct task_node;
struct taskgroup;

// One OpenMP thread (its implicit task).
struct thread_state {
  team* t = nullptr;  // null: the initial thread (no team)
  int id = 0;         // omp_get_thread_num
  int level = 0;      // nesting level of its team's region
  int active_level = 0;
  thread_state* parent = nullptr;  // the thread that met the region
  icvs icv;
  // The league of a host teams construct it runs in (teams.cpp): its team's
  // number and the number of teams; 0 of 1 outside one. A parallel region
  // inside a team passes them on to its threads.
  unsigned team_num = 0, num_teams = 1;
  // Work shares: the number of the next one this thread meets, and the one
  // it is in.
  unsigned ws_next = 0;
  struct ws_slot* ws = nullptr;
  // Loops: this thread's static chunk counter, and the ordered sequence
  // number of the chunk it runs (-1: none).
  long static_trip = 0;
  long ordered_seq = -1;
  // Doacross loops (doacross.cpp): the entry of the loop's owner table this
  // thread last claimed (~0: none yet in this loop).
  unsigned long long doacross_claimed = ~0ull;
  // Tasks: the task this thread runs now (its implicit one when none).
  task_node* task = nullptr;
  taskgroup* group = nullptr;
  // Whether `task` is final (a final task or one inside one): kept here
  // too, so that a task's creation reads no field of the running task.
  bool in_final = false;
  // Where it runs: on a logical thread (its own, or, for thread 0 of a
  // nested region, that of the member that met it) of PE `pe` (node-local
  // rank), or -- ult null -- on its PE's own stack.
  threads::ult* ult = nullptr;
  int pe = -1;
  // The place partition of the team's parent thread (affinity.cpp derives
  // this thread's own from it, the team's policy and its number).
  int part_off = 0, part_len = 0;
  // Stealing (task_queue.cpp), this thread's own: the member it last took
  // a task from (-1: none) and the state of its victim choice.
  int steal_from = -1;
  unsigned steal_seed = 0;
  // Asleep at a barrier that opened: the list of the sleepers it was woken
  // from and its place there, set by its waker before the resume; it wakes
  // the four after it in the list's tree (barrier.cpp), then clears it.
  std::vector<thread_state*>* wake_list = nullptr;
  int wake_pos = 0;
};

// The OpenMP thread the calling OS thread runs now: on a member's logical
// thread, the one it runs as (the member, or thread 0 of a region it met,
// kept with the ULT); else the one set_current made it, else the OS
// thread's initial thread (made on first use). Inline: every entry point
// asks.
namespace detail {
extern constinit thread_local thread_state* t_current WEFT_TLS_FAST;
}  // namespace detail
thread_state& initial_thread();
inline thread_state& current() {
  if (threads::ult* u = threads::detail::t_ult) return *static_cast<thread_state*>(u->local);
  if (detail::t_current != nullptr) return *detail::t_current;
  return initial_thread();
}
void set_current(thread_state* t) noexcept;
// Makes t the OpenMP thread the caller runs as, and returns the one it ran
// as before in the form set_current takes back (null: the OS thread's or
// PE's initial thread).
thread_state* swap_current(thread_state* t) noexcept;

// A lock for short critical sections inside which no ULT switches: the
// team's shared queue, and each task's list of successors. (It first
// guarded the team's whole task graph.) A contended std::mutex sent the
// waiter's whole PE to sleep in the kernel and cost a futex wake-up per
// hand-over: in a dependence wavefront at 2 threads, where the creating
// thread links each new task while the other unlinks each finished one,
// that was most of the time per task (perf: the futex wake and the task
// switch, 27% of the run). This one spins a little, then yields the CPU (a
// holder preempted on an oversubscribed machine gets it back), never
// sleeps: 2 threads, quiet VM, one interleaved run of 5, microseconds per
// task against libgomp's, chain 0.44 -> 0.34 (libgomp 0.36), wavefront
// 1.19 -> 0.65 (libgomp 0.41); 256 spins instead of 32 measured alike.
class short_lock {
 public:
  void lock() noexcept {
    for (int spins = 0;; ++spins) {
      if (word_.load(std::memory_order_relaxed) == 0 &&
          word_.exchange(1, std::memory_order_acquire) == 0)
        return;
      if (spins < 32)
        base::cpu_relax();
      else
        sched_yield();
    }
  }
  void unlock() noexcept { word_.store(0, std::memory_order_release); }

 private:
  std::atomic<std::uint32_t> word_{0};
};

// A task made by GOMP_task and deferred.
// References: the task itself until it finished, plus each deferred child
// until that child finished (so `refs == 1` while it runs means "no child
// pending", which is what taskwait waits for). A deferred task (on the
// heap) is freed by whoever drops its last reference; implicit and
// undeferred tasks live in a team or on a stack and wait for refs == 1
// before they go.
struct dep_table;
struct task_node;

// The few tasks a dependence names or releases live inside the task or
// table entry that lists them: a task of a wavefront names 3 addresses and
// releases about 2 successors, and a heap vector for each list was an
// allocation (and its free) inside the task graph's lock per list.
using task_list = absl::InlinedVector<task_node*, 2>;

struct task_node {
  void (*fn)(void*) = nullptr;
  void* arg = nullptr;  // into `inline_args` or `storage`
  // The arguments' copy: inline when they fit (GCC's argument blocks of
  // most tasks are a few pointers and firstprivates), which spares a task
  // a second allocation; else on the heap.
  static constexpr std::size_t inline_bytes = 64, inline_align = 16;
  alignas(inline_align) unsigned char inline_args[inline_bytes];
  std::vector<unsigned char> storage;
  task_node* parent = nullptr;
  taskgroup* group = nullptr;
  team* owner = nullptr;  // the team it is queued in (deferred tasks)
  std::atomic<long> refs{1};
  bool heap = false;
  bool final = false;  // final clause, or a descendant of a final task
  // An included task (undeferred, run at once on its creator's stack): the
  // ICVs it runs with are its creator's, in place; the first change inside
  // saves them in `icv` (icv_saved), and its end puts them back.
  bool included = false;
  bool icv_saved = false;
  // Its arguments were copied by the compiler's copy function (C++
  // firstprivate objects): only its body destroys them, so it runs even
  // when its region or taskgroup is cancelled (as in libgomp).
  bool copy_constructed = false;
  // The data-environment ICVs it starts with: its creator's (OpenMP 5.0,
  // 2.4.1), restored on the thread that runs it once it returns, so that
  // omp_set_num_threads in a task changes neither a sibling nor the thread.
  // Set by make_task only: the constructor leaves them unwritten, since an
  // included task (one per `if(0)` task, on the stack) never reads them.
  union deferred_icvs {
    deferred_icvs() {}
    icvs v;
  } icv;
  // detach: the task completes when its body has returned and its event was
  // fulfilled, whichever comes last (holds counts the two).
  bool detached = false;
  std::atomic<int> holds{1};
  std::atomic<bool> fulfilled{false};

  // Dependences (task.cpp). Only the thread running a parent links its
  // children, so the parent's table (`deps`, `all_memory`) is that
  // thread's alone; the edges between siblings are each predecessor's, under
  // its `graph_lock`. No lock is the team's: in a wavefront the thread
  // making tasks and the one finishing them touched one lock per task each.
  //
  // As a sibling: whether it is listed in its parent's table, the tasks
  // waiting for it (guarded by graph_lock, like the setting of
  // `completed`), and how many of its predecessors have not completed (it
  // is queued when that reaches 0).
  bool in_graph = false;  // written before the task is published
  bool waiter = false;    // a stand-in of an undeferred task or taskwait depend: never queued
  std::atomic<bool> completed{false};
  short_lock graph_lock;
  absl::InlinedVector<task_node*, 3> successors;
  std::atomic<int> unmet{0};
  // A task listed in its parent's table may complete and drop its last
  // reference while still listed: the table unlists completed tasks when it
  // next looks at their address (or sweeps, or is cleared), not at their
  // completion, which would take the table from the parent's thread. So a
  // listed task is freed when both its references and its listings are
  // gone: one hold for the references reaching 0, one per listing.
  std::atomic<int> graph_holds{0};
  // As a parent: per address its children named, the last writers and
  // readers not known to have completed; and the child with
  // depend(inout: omp_all_memory), if one may not have completed.
  dep_table* deps = nullptr;
  task_node* all_memory = nullptr;

  task_node() = default;
  task_node(const task_node&) = delete;
  task_node& operator=(const task_node&) = delete;
  // Inline: an included task's node lives on the stack of each `if(0)`
  // task, and most never had dependences.
  ~task_node() {
    if (deps != nullptr || all_memory != nullptr) [[unlikely]]
      drop_deps();
  }
  void drop_deps();
};

// The ICVs to change (omp_set_num_threads & co.): the thread's, after
// saving them for the included task that runs, if any (task_node::included).
inline icvs& icv_for_write(thread_state& me) {
  task_node* t = me.task;
  if (t != nullptr && t->included && !t->icv_saved) [[unlikely]] {
    t->icv.v = me.icv;
    t->icv_saved = true;
  }
  return me.icv;
}

// The sibling tasks that named one address, in creation order: `prev` are
// the ones a new writer (no readers since) or a new member of the current
// set depends on; `set` the readers (in) or inoutset tasks since then.
struct dep_slot {
  task_list prev;
  task_list set;
  int set_kind = 0;
};

// A parent's dependence table. A flat table: an entry is no allocation of
// its own (a node-based map allocated one per address).
struct dep_table {
  absl::flat_hash_map<void*, dep_slot> slots;
  // Completed tasks are unlisted as their address is looked at; addresses
  // no later task names are swept when the table has doubled since the
  // last sweep (amortised O(1) per listing).
  std::size_t sweep_at = 64;
};

// Unlists every task of `parent`'s table: the parent knows its children
// completed (taskwait, the end of its region, its own end).
void clear_deps(task_node* parent);

// The end of an implicit task's body (the region's end, on its thread):
// once its children with dependences completed, clears its table, so that
// a recycled team's member does not keep them (or their memory) listed
// until its next region.
void end_implicit_task(thread_state& me);

struct taskgroup {
  taskgroup* outer = nullptr;
  std::atomic<long> pending{0};
  // cancel taskgroup (only with OMP_CANCELLATION): its tasks not yet
  // started are discarded.
  std::atomic<bool> cancelled{false};
  // Task reductions in scope (the innermost registration; GCC's array,
  // task.cpp): inherited from the enclosing taskgroup.
  std::uintptr_t* reductions = nullptr;
  bool workshare = false;  // made by a work-sharing construct with task reductions
};

// cancel taskgroup reached `g`: it was cancelled, or -- a work-sharing
// construct's own taskgroup, which the program did not write -- the one
// around it was (as libgomp does).
inline bool taskgroup_cancelled(const taskgroup* g) {
  if (g == nullptr) return false;
  if (g->cancelled.load(std::memory_order_acquire)) return true;
  return g->workshare && g->outer != nullptr && g->outer->cancelled.load(std::memory_order_acquire);
}

// A combining tree of arrival counters (Yew, Tzeng and Lawrie, 1987): the
// participants arrive in groups of `fan_in` on counters of their own cache
// line; the last of a group arrives one level up, and the last at the
// root knows that every participant arrived. No line takes more than
// fan_in read-modify-writes per round, where one counter for the team
// takes them all, one after another (the last arriver waits for P - 1
// hand-overs of the line); the last arriver's path is log_fan_in(n) of
// them. Fan-in 4: few enough writers per line that its hand-overs stay
// cheap, and 16 threads climb two levels. (Not measured on 16 cores: no
// such machine was at hand; the counts are tested, docs/omp.md.)
struct arrival_tree {
  static constexpr int fan_in = 4;
  struct alignas(base::cache_line) node {
    std::atomic<int> arrived{0};
    int expected = 0;
    int parent = -1;  // -1: the root
  };
  std::vector<node> nodes;  // the leaves first, then each level above

  explicit arrival_tree(int participants);
  // Participant `who` arrives: true for the last one, when every
  // participant has arrived. The counters on its way are reset for the
  // next round (nobody else arrives at them in this one).
  bool arrive(int who) noexcept;
  // Every counter to 0 (a round left half-arrived: a cancelled region).
  void reset() noexcept;
};

// A member of a team: its OpenMP thread and the logical thread it runs on
// (members 1..n-1; thread 0's stays unused, claimed from the start).
// Members start each other (team.cpp, the fork tree): whoever starts member
// i resets its ULT, sets sent_to, then `armed` to the region's number;
// until then thread 0's rescue leaves it alone (its ULT holds the last
// region's state).
struct member {
  threads::ult u;
  int sent_to = -1;  // the PE its start message went to (-1: none)
  std::atomic<unsigned> armed{0};
  thread_state thr;
  task_node implicit;
  // The deferred tasks this member made or released (task_queue.cpp). Its
  // owner is the member's OpenMP thread -- whichever OS thread runs it: a
  // ULT never changes OS threads, and a recycled team's next owner is
  // ordered after the last one by the region's end and start -- the
  // other members steal from it.
  base::chase_lev<task_node*> tasks;
};

// Fibers asleep at a team's barrier. The list is guarded by the mutex
// beside it; its length is kept in an atomic too, so that the task path,
// which makes work for them, looks without taking the mutex (the
// protocol: wait_step and wake_for_tasks).
class sleeper_list {
 public:
  void push_back(thread_state* t) {
    list_.push_back(t);
    size_.store(list_.size(), std::memory_order_seq_cst);
  }
  void pop_back() {
    list_.pop_back();
    size_.store(list_.size(), std::memory_order_seq_cst);
  }
  void clear() {
    list_.clear();
    size_.store(0, std::memory_order_seq_cst);
  }
  // Takes the list (into an empty `out`).
  void swap(std::vector<thread_state*>& out) {
    list_.swap(out);
    size_.store(list_.size(), std::memory_order_seq_cst);
  }
  bool empty() const noexcept { return list_.empty(); }
  // Without the mutex: whether anyone may be asleep.
  bool any() const noexcept { return size_.load(std::memory_order_seq_cst) != 0; }

 private:
  std::vector<thread_state*> list_;
  std::atomic<std::size_t> size_{0};
};

struct team {
  int size = 1;
  // Threads this region holds of thread-limit-var's budget (its members
  // beyond thread 0), given back at its end; 0 while no limit is set.
  int limited = 0;
  void (*fn)(void*) = nullptr;
  void* data = nullptr;
  std::uint64_t start_ns = 0;
  // The region's number (teams are recycled): what `armed` and `ended`
  // are compared with. Written by the master before it starts anyone.
  unsigned seq = 0;
  // Thread 0's rescue scan starts here: members below it have started (a
  // started member never goes back), so the scan costs O(1) amortised per
  // wait instead of O(team size). Thread 0 only.
  int first_unstarted = 1;
  int master_pe = -1;
  int pes = 1;          // of the node, when the region began
  bool nested = false;  // met on a member (members go to carriers where a PE's thread is taken)
  thread_state* outer = nullptr;  // what the meeting thread ran as before (restored at the end)
  // What every member's OpenMP thread starts as (each member copies it
  // when it starts, so that the master does not write n of them): set by
  // the master, adjusted by a region's `prepare`, then only read.
  thread_state proto;
  std::vector<member> members;  // sized at creation, never resized

  // References: the master, plus each start message whose member thread 0
  // rescued (taken by the rescue, dropped by the message, which finds its
  // member started). The last one frees the team. A started member needs
  // none: the master waits at the region's end for its last access.
  std::atomic<int> refs{1};

  // The region's end: members 1..size-1 arrive on `join` as their fiber is
  // gone; the last stores the region's number in `ended`, which the master
  // waits for.
  arrival_tree join;
  alignas(base::cache_line) std::atomic<unsigned> ended{0};

  // Barrier: every thread arrives on `arrivals`; the last flips `round`,
  // which the others wait on, and wakes the fibers asleep at it (woken by a
  // message to their PE): those it took from `sleepers` into `waking` wake
  // each other, four each (barrier.cpp).
  arrival_tree arrivals;
  // `round` shares its line with the mutex, which the last arriver takes
  // as it flips it (open_barrier), and -- teams of up to fan_in threads,
  // whose tree is one counter -- with the counter they arrive on instead:
  // at 2 threads one line changes hands per barrier, not two.
  alignas(base::cache_line) std::atomic<unsigned> round{0};
  std::atomic<int> small_arrived{0};
  std::mutex sleep_mutex;
  sleeper_list sleepers;  // guarded by sleep_mutex
  // The last round's sleepers: read by them until the next round can open.
  std::vector<thread_state*> waking;

  ws_slot ring[ws_ring];

  // Deferred tasks of the team not yet complete (waiting for their
  // dependences, queued or running): one read-modify-write per task at its
  // submission and one at its end; waiting threads read it.
  alignas(base::cache_line) std::atomic<long> tasks_pending{0};
  // The dependence graph of the team's tasks, and the shared queue: tasks
  // queued by a thread that owns none of the team's deques (a successor
  // released by omp_fulfill_event), which any member takes
  // (task_queue.cpp); tasks_shared is its length, read without the mutex.
  alignas(base::cache_line) short_lock task_mutex;
  std::deque<task_node*> tasks;  // guarded by task_mutex
  std::atomic<long> tasks_shared{0};

  // cancel parallel (only with OMP_CANCELLATION): its tasks not yet started
  // are discarded.
  std::atomic<bool> cancelled{false};
  // cancel for of a loop that has no work share: one GCC schedules inline
  // (schedule(static) without a chunk), whose threads have no `ws`. Cleared
  // when a barrier opens: a cancelled loop has no nowait, so its threads
  // all meet the barrier at its end before any of them starts another
  // construct (libgomp's work_share_cancelled, for these loops only).
  std::atomic<bool> ws_cancelled{false};

  // The members' ULTs know what to run (set at the team's first region).
  bool members_bound = false;
  // Its OpenMP threads' family (layer threads): the outermost team of the
  // region's nest, whose threads never share an OS thread; null with
  // --weft:ult-isolate=all (no OpenMP thread shares with any).
  const void* family = nullptr;
  // Placement (affinity.cpp), at the end: written at a region's start only
  // where places exist, and kept off the lines the region's start and
  // barriers share.
  int bind = 0;                 // the region's placement policy (bind-var, or its proc_bind clause)
  long placement_checked = -1;  // the placement last compared with OpenMP's

  explicit team(int n) : size(n), members(std::size_t(n)), join(std::max(n - 1, 0)), arrivals(n) {}
};

// ---- the parts the entry points share (team.cpp) ---------------------------

// One pause of a waiting OpenMP thread, giving the PE back (see the top of
// this file): runs a queued task of its team, or -- a fiber -- suspends on
// `sleepers` (when may_sleep, which says no task of the team was pending;
// recheck(ctx) and tasks_pending are tested under `m` once it is on the
// list, so a wake-up is never lost) or yields, or -- thread 0 on its PE's
// stack -- starts members nobody started, serves the PE's messages, or
// yields.
void wait_step(thread_state& me, bool may_sleep, std::mutex* m, sleeper_list* sleepers,
               bool (*recheck)(void*), void* ctx);

// Waits until done(): a few pauses, then a wait_step per look (the PE is
// given back: a queued task, a yield, the PE's messages). The waits of
// loops, ordered regions, copyprivate and doacross loops.
template <class Done>
void wait_until(thread_state& me, Done done) {
  int spins = 0;
  while (!done()) {
    if (++spins < 64) {
      base::cpu_relax();
      continue;
    }
    wait_step(me, false, nullptr, nullptr, nullptr, nullptr);
  }
}

void barrier(thread_state& me);
// Runs one queued task of the team; false if none was found (its own
// deque, a few other members' and the shared queue were empty).
bool run_one_task(thread_state& me);
// Wakes fibers asleep on `sleepers` (sends each a resume message).
void wake_all(std::mutex& m, sleeper_list& sleepers);

// ---- the queues of deferred tasks (task_queue.cpp) -------------------------

// Queues a ready task of `t`: on the deque of `me` when `me` is a member of
// `t` (its owner), else (`me` null, or of another team) on the shared
// queue. Does not wake anyone: wake_for_tasks does, once per batch.
void enqueue_task(thread_state* me, team& t, task_node* node);
// A queued task of me's team for `me` to run, or null: its own deque's
// newest, else the oldest of a few other members' (a bounded number of
// probes, not all of them), else the shared queue's oldest.
task_node* take_task(thread_state& me);
// Wakes the team's fibers asleep at its barrier, if there are any, after
// tasks_pending was raised (seq_cst) and the tasks queued.
void wake_for_tasks(team& t);

// The team size a parallel region gets (num_threads clause, 0: none).
int team_size_for(thread_state& me, unsigned num_threads);
// Runs fn(data) as a parallel region of `n` threads; `prepare` (may be
// null) initialises the team's first work share before any thread runs.
// `flags` are GOMP_parallel's: the low 3 bits, the proc_bind clause.
void run_region(void (*fn)(void*), void* data, int n, void (*prepare)(team&, void*) = nullptr,
                void* prepare_ctx = nullptr, unsigned flags = 0);
// The same in two halves (GOMP_parallel_start / GOMP_parallel_end, where
// the caller runs fn itself as thread 0 in between).
team* begin_region(void (*fn)(void*), void* data, int n, void (*prepare)(team&, void*) = nullptr,
                   void* prepare_ctx = nullptr, unsigned flags = 0);
void end_region(team* t);

// Placement (affinity.cpp): OMP_PROC_BIND, OMP_PLACES, OMP_DISPLAY_ENV,
// OMP_DISPLAY_AFFINITY and OMP_AFFINITY_FORMAT into `g` (called once, from
// the environment's reading).
void read_affinity_environment(global_icvs& g);
// The region's policy (`me`'s bind-var, or the proc_bind clause in flags
// where bind-var is not false), and the bind-var of its threads (the next
// item of an OMP_PROC_BIND list).
int region_bind(const thread_state& me, unsigned flags, int& child_bind);
// With g.affinity: sets the team's partition, says once if weft's
// placement differs from what OpenMP's rules ask, displays thread 0's
// affinity. Thread 0, before any member starts.
void affinity_begin(team& t, thread_state& me);
// With g.affinity: a member starting (OMP_DISPLAY_AFFINITY).
void affinity_member(member& m);
// places.cpp: OMP_PROC_BIND's list (omp_proc_bind_t values; nullopt:
// malformed) and its name in OMP_DISPLAY_ENV; OMP_PLACES's (and
// GOMP_CPU_AFFINITY's) places, each the OS numbers of its CPUs in the
// process's set, ascending (nullopt: malformed), and their text ("{0:2},{4}"); a variable's value,
// lower case, without the spaces around it.
enum bind_kind : int {
  bind_false = 0,
  bind_true = 1,
  bind_primary = 2,
  bind_close = 3,
  bind_spread = 4
};
std::optional<std::vector<int>> parse_proc_bind(const char* value);
const char* proc_bind_name(int bind);
std::optional<std::vector<std::vector<int>>> parse_places(const char* value);
std::optional<std::vector<std::vector<int>>> parse_cpu_affinity(const char* value);
std::string places_text(const std::vector<std::vector<int>>& places);
std::string env_word(std::string value);
// A --weft:bind list that puts an attached node of `pes` PEs where OpenMP
// would put a team of that many threads ("" when there are no places).
std::string places_bind(int pes);

// Task reductions of work-sharing constructs (task.cpp; reduction(task,
// ...) on for, sections, parallel). A thread entering such a construct
// opens a taskgroup of its own; the first to arrive registers GCC's array
// (memory for every thread's copies), the others share that memory.
void workshare_taskgroup_start(thread_state& me);
void workshare_reductions_register(thread_state& me, std::uintptr_t* data, std::uintptr_t* first);
// GOMP_parallel_reductions: the taskgroup every implicit task of the region
// belongs to, with `data` registered for `nthreads` threads.
taskgroup* parallel_reductions_group(std::uintptr_t* data, int nthreads);

// Cancellation (OpenMP 5.0, 2.18.1; only with OMP_CANCELLATION, else these
// are the plain constructs).
// A cancellable barrier (GOMP_barrier_cancel, and the ends of loops and
// sections in a region that may be cancelled): true when the region was
// cancelled (cancel parallel), at once or as soon as a waiting thread sees
// it; false when every thread arrived.
bool barrier_cancel(thread_state& me);
// cancel parallel: sets t.cancelled and wakes the fibers asleep at t's
// barrier.
void cancel_region(team& t);

// Loop schemes (loop_schemes.cpp; docs/omp.md, "Loop schemes").
// The scheme a loop gets, its schedule resolved: `requested` the schedule
// GCC passed (0: runtime), `sched` and `chunk` what it resolved to; 0 when
// the loop keeps its schedule's own path. `part_min` is set with it.
int loop_scheme_of(int requested, int sched, long chunk, bool ordered, const thread_state& me,
                   unsigned long long& part_min);
// Sets up slot `s` for a loop of `trips` iterations in a team of `n`
// threads (the first thread to arrive; kind 0 or n < 2: no scheme).
// `site` names the loop's call site (history's key).
void scheme_init(ws_slot& s, int n, unsigned long long trips, int kind, unsigned long long part_min,
                 const void* site);
// The calling thread's next piece [lo, hi) of iteration numbers; false
// when the loop has none left for it.
bool scheme_next(thread_state& me, ws_slot& s, unsigned long long& lo, unsigned long long& hi);
// The layer's node start (reads --weft:omp-scheme) and --weft:stats lines.
void schemes_node_start();
void schemes_stats(std::FILE* out);

// Doacross loops (doacross.cpp). A thread starts one as loop.cpp starts a
// loop of `trips` iterations 0..trips-1 (`sched` as GCC passes it, 0:
// runtime; never under a loop scheme: a thread's iterations must stay in
// order), with task `reductions` and `mem` as GOMP_loop_start's; the first
// thread to arrive runs init(me, slot, ctx) under the slot's lock once the
// loop, its schedule resolved, is in the slot. Hands out the first chunk
// as GOMP_loop_*_start does.
using doacross_init = void (*)(thread_state& me, ws_slot& s, void* ctx);
bool doacross_loop_start(int sched, long chunk, long trips, long* istart, long* iend,
                         std::uintptr_t* reductions, void** mem, doacross_init init, void* ctx);
bool doacross_loop_start_ull(int sched, unsigned long long chunk, unsigned long long trips,
                             unsigned long long* istart, unsigned long long* iend,
                             std::uintptr_t* reductions, void** mem, doacross_init init, void* ctx);

// For tests (tests/omp/test_loop_schemes.cpp), which link the static
// library. Events are counted while --weft:stats is on or after
// count_scheme_events(true).
struct scheme_counts {
  std::uint64_t idle_loops = 0, history_loops = 0;
  std::uint64_t offered = 0, stolen = 0, returned = 0, taken_unstarted = 0;
};
void count_scheme_events(bool on);
scheme_counts scheme_counts_now();
// History: the moving average (of the share of what a thread offered
// that was stolen) of `thread` at each call site known, in no order.
std::vector<std::pair<const void*, std::vector<float>>> history_shares();
// The calling thread's view of its current scheme loop: the team's
// idle threads, the parts of its block still offered, and what it kept
// for itself at its start (history).
struct scheme_view {
  int hungry = 0, parts = 0;
  unsigned long long reserved = 0;
};
scheme_view scheme_view_now();

}  // namespace weft::omp
