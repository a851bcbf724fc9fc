// Explicit tasks: GOMP_task (deferred or undeferred, with dependences and
// detach), taskwait (also with depend), taskgroup, taskyield, taskloop.
// Where queued tasks wait: task_queue.cpp; task reductions:
// task_reduction.cpp.
//
// A deferred task goes on its creator's deque (task_queue.cpp); any thread
// of the team runs queued tasks whenever it waits (barriers, taskwait, the
// other waits of wait_step), its own newest first, else stolen from another
// member, so tasks spread over the team's PEs. A task runs to its end on
// the thread that took it (its waits inside run other tasks nested), so a
// task never moves, as an untied task may not need to.
//
// Dependences: a parent keeps, per address its children named, the last
// writer and the readers (or inoutset tasks) since it (dep_slot); a new
// sibling becomes a successor of the ones it must follow and is queued only
// when the last of them completes. mutexinoutset is ordered as inout (the
// tasks then never overlap, in creation order: compliant, less parallel).
// An undeferred task with dependences waits for its predecessors first and
// is not recorded: it completes before its parent goes on. The parent's
// table is touched by the parent's thread only (it links its children; a
// completed child stays listed until the table next looks at its address,
// sweeps or is cleared, see task_node::graph_holds); an edge is made and
// taken under the predecessor's own lock. No lock is the team's, so the
// thread making tasks and those completing them do not take turns on one
// line per task; tasks without dependences take none. A task whose last predecessor completes runs
// next on the completing thread (others released with it go on its deque): a chain stays on one
// warm thread and passes through no queue.
//
// detach: the task completes -- its successors released, its parent,
// taskgroup and team told -- when both its body has returned and its event
// was fulfilled, by whichever of the two threads comes last.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>
#include "base/op_count.hpp"
#include "omp/gomp_abi.hpp"
#include "omp/omp_internal.hpp"
#include "weft/base/cache.hpp"
#include "weft/base/error.hpp"

extern "C" {
void GOMP_taskgroup_start();
void GOMP_taskgroup_end();
void GOMP_taskgroup_reduction_register(std::uintptr_t* data);
}

namespace weft::omp {

using base::count;
using base::op;

void task_node::drop_deps() {
  clear_deps(this);
  delete deps;
  deps = nullptr;
}

namespace {

// GOMP_task's and GOMP_taskloop's flags (libgomp's GOMP_TASK_FLAG_*).
constexpr unsigned flag_final = 1u << 1;
constexpr unsigned flag_depend = 1u << 3;
constexpr unsigned flag_up = 1u << 8;         // taskloop over unsigned: counting up
constexpr unsigned flag_grainsize = 1u << 9;  // taskloop: num_tasks is the grain size
constexpr unsigned flag_if = 1u << 10;        // taskloop: the if clause holds (or is absent)
constexpr unsigned flag_nogroup = 1u << 11;
constexpr unsigned flag_reduction = 1u << 12;
constexpr unsigned flag_detach = 1u << 13;
constexpr unsigned flag_strict = 1u << 14;  // taskloop: grainsize(strict: g)

// Released successors one run_one_task runs in a row (see there).
constexpr int chain_max = 16;

// ---- cancellation --------------------------------------------------------------------

// No new task starts in a cancelled region or taskgroup (OMP_CANCELLATION).
inline bool creation_cancelled(const thread_state& me) {
  if (!globals().cancellation) return false;
  if (me.t != nullptr && me.t->cancelled.load(std::memory_order_relaxed)) return true;
  return taskgroup_cancelled(me.group);
}

// A queued task of a cancelled region or taskgroup is discarded when its
// turn comes: it completes without running its body.
bool discarded(const task_node* node) {
  if (!globals().cancellation || node->copy_constructed) return false;
  if (node->owner != nullptr && node->owner->cancelled.load(std::memory_order_relaxed)) return true;
  return taskgroup_cancelled(node->group);
}

// ---- dependences ---------------------------------------------------------------------

// Dependence types of an omp_depend_t (GCC's GOMP_DEPEND_*).
constexpr std::uintptr_t depend_in = 1, depend_out = 2, depend_inout = 3, depend_mutexinoutset = 4,
                         depend_inoutset = 5;

enum dep_kind : int { dep_out = 0, dep_in = 1, dep_inoutset = 2 };

struct dep_item {
  void* addr;  // null with dep_out: omp_all_memory
  int kind;
};

// GOMP_task's depend array, writers first, each address once (the first
// clause naming it wins: a writer over a reader). Two layouts:
//   depend[0] = n != 0: depend[1] writers (out, inout), then n addresses,
//     writers first;
//   depend[0] = 0: depend[1] = n, depend[2] out/inout, depend[3]
//     mutexinoutset, depend[4] in, then those addresses in that order, then
//     pointers to omp_depend_t objects ({address, type}) for the rest.
// Both are read writers first (a depobj object's writer before the other
// addresses, its reader after them), so the items come out writers first
// in one vector: one allocation per task.
using dep_items = absl::InlinedVector<dep_item, 4>;

dep_items parse_depend(void** depend) {
  dep_items items;
  auto add = [&](void* addr, int kind) {
    for (const dep_item& d : items)
      if (d.addr == addr) return;
    items.push_back(dep_item{addr, kind});
  };
  const auto word = [&](std::size_t i) { return reinterpret_cast<std::uintptr_t>(depend[i]); };
  if (word(0) != 0) {
    const std::size_t n = word(0), nout = word(1);
    items.reserve(n);
    for (std::size_t i = 0; i < n; ++i) add(depend[2 + i], i < nout ? dep_out : dep_in);
  } else {
    const std::size_t n = word(1), nout = word(2), nmutex = word(3), nin = word(4);
    const std::size_t normal = nout + nmutex + nin;
    if (normal > n)
      base::fatal("libweft-omp: a depend array with %zu addresses but %zu of known type", n,
                  normal);
    items.reserve(n);
    std::vector<std::pair<void*, std::uintptr_t>> objects;
    for (std::size_t i = normal; i < n; ++i) {
      void** obj = static_cast<void**>(depend[5 + i]);
      objects.emplace_back(obj[0], reinterpret_cast<std::uintptr_t>(obj[1]));
    }
    for (auto& [addr, type] : objects) {
      if (type == depend_out || type == depend_inout || type == depend_mutexinoutset)
        add(addr, dep_out);
      else if (type != depend_in && type != depend_inoutset)
        base::fatal(
            "libweft-omp: a depend(depobj: ...) object of unknown dependence type %lu "
            "(a depobj used before '#pragma omp depobj(...) depend(...)' initialised it?)",
            static_cast<unsigned long>(type));
    }
    for (std::size_t i = 0; i < normal; ++i)
      add(depend[5 + i], i < nout + nmutex ? dep_out : dep_in);
    for (auto& [addr, type] : objects) {
      if (type == depend_in) add(addr, dep_in);
      if (type == depend_inoutset) add(addr, dep_inoutset);
    }
  }
  return items;
}

// Drops one of a listed task's holds (task_node::graph_holds).
void drop_hold(task_node* node) {
  if (node->graph_holds.fetch_sub(1, std::memory_order_acq_rel) == 1) delete node;
}

void drop_holds(task_list& v) {
  for (task_node* node : v) drop_hold(node);
  v.clear();
}

// Unlists the completed tasks of `v`.
void prune(task_list& v) {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    task_node* node = v[i];
    if (node->completed.load(std::memory_order_acquire))
      drop_hold(node);
    else
      v[kept++] = node;
  }
  v.resize(kept);
}

// Unlists every completed task and forgets the addresses left with none.
void sweep(dep_table& table) {
  for (auto it = table.slots.begin(); it != table.slots.end();) {
    prune(it->second.prev);
    prune(it->second.set);
    if (it->second.prev.empty() && it->second.set.empty())
      table.slots.erase(it++);
    else
      ++it;
  }
  table.sweep_at = std::max<std::size_t>(64, 2 * table.slots.size());
}

// Makes `self` wait for `pred`, unless pred completed. Under pred's lock,
// which its completion takes to close its list of successors: an edge is
// either in the list its completion takes, or not made.
void add_pred(task_node* self, task_node* pred) {
  if (pred == self || pred->completed.load(std::memory_order_acquire)) return;
  count(op::shared_rmw);
  std::lock_guard<short_lock> lock(pred->graph_lock);
  if (pred->completed.load(std::memory_order_relaxed)) return;
  // One edge per pair: the clauses of one task are linked one after the
  // other by one thread, so a repeat is the predecessor's last successor.
  if (!pred->successors.empty() && pred->successors.back() == self) return;
  pred->successors.push_back(self);
  self->unmet.fetch_add(1, std::memory_order_relaxed);
}

void add_preds(task_node* self, const task_list& preds) {
  for (task_node* p : preds) add_pred(self, p);
}

// Links `self`, a child of `parent`, after the siblings its dependences
// name; on the parent's thread. `record`: a deferred task, which later
// siblings must find in the table; otherwise a waiter that only learns its
// predecessors. The caller holds one count of self->unmet while this
// runs, so that a predecessor completing meanwhile cannot release self
// before the last edge is made.
void link_deps(task_node* parent, task_node* self, const dep_items& items, bool record) {
  if (parent->all_memory != nullptr) {
    if (parent->all_memory->completed.load(std::memory_order_acquire)) {
      drop_hold(parent->all_memory);
      parent->all_memory = nullptr;
    } else {
      add_pred(self, parent->all_memory);
    }
  }
  const bool all_memory = std::any_of(items.begin(), items.end(), [](const dep_item& d) {
    return d.kind == dep_out && d.addr == nullptr;
  });
  dep_table* table = parent->deps;
  if (all_memory) {
    // depend(inout: omp_all_memory): after every sibling with dependences,
    // and every later one with dependences after it.
    if (table != nullptr)
      for (auto& entry : table->slots) {
        add_preds(self, entry.second.prev);
        add_preds(self, entry.second.set);
      }
    if (record) {
      if (table != nullptr) {
        for (auto& entry : table->slots) {
          drop_holds(entry.second.prev);
          drop_holds(entry.second.set);
        }
        table->slots.clear();
      }
      if (parent->all_memory != nullptr) drop_hold(parent->all_memory);
      self->graph_holds.store(2, std::memory_order_relaxed);
      parent->all_memory = self;
      self->in_graph = true;
    }
    return;
  }
  if (table == nullptr) {
    if (!record) return;
    table = parent->deps = new dep_table;
  }
  if (record) {
    if (table->slots.size() >= table->sweep_at) sweep(*table);
    // Its references, and one listing per address (each item lists it
    // once, below).
    self->graph_holds.store(1 + int(items.size()), std::memory_order_relaxed);
  }
  for (const dep_item& d : items) {
    dep_slot* slot = nullptr;
    if (record) {
      slot = &table->slots[d.addr];
    } else {
      auto it = table->slots.find(d.addr);
      if (it == table->slots.end()) continue;
      slot = &it->second;
    }
    prune(slot->prev);
    prune(slot->set);
    if (d.kind == dep_out) {
      // A writer follows the readers since the last writer, or that writer.
      add_preds(self, slot->set.empty() ? slot->prev : slot->set);
      if (record) {
        drop_holds(slot->prev);
        drop_holds(slot->set);
        slot->prev.push_back(self);
        slot->set_kind = dep_out;
      }
    } else if (!slot->set.empty() && slot->set_kind == d.kind) {
      // Another reader (or inoutset task): beside the current ones.
      add_preds(self, slot->prev);
      if (record) slot->set.push_back(self);
    } else if (!slot->set.empty()) {
      // in after inoutset tasks, or the reverse: after all of them.
      add_preds(self, slot->set);
      if (record) {
        drop_holds(slot->prev);
        slot->prev.swap(slot->set);
        slot->set.push_back(self);
        slot->set_kind = d.kind;
      }
    } else {
      add_preds(self, slot->prev);
      if (record) {
        slot->set.push_back(self);
        slot->set_kind = d.kind;
      }
    }
  }
  if (record) self->in_graph = true;
}

}  // namespace

void clear_deps(task_node* parent) {
  if (parent->all_memory != nullptr) {
    drop_hold(parent->all_memory);
    parent->all_memory = nullptr;
  }
  if (parent->deps == nullptr) return;
  for (auto& entry : parent->deps->slots) {
    drop_holds(entry.second.prev);
    drop_holds(entry.second.set);
  }
  parent->deps->slots.clear();
  parent->deps->sweep_at = 64;
}

namespace {

// ---- running and completing ----------------------------------------------------------

void release(task_node* node) {
  if (node->refs.fetch_sub(1, std::memory_order_acq_rel) == 1 && node->heap) {
    if (node->in_graph)
      drop_hold(node);
    else
      delete node;
  }
}

// A deferred task completed (its body returned and, if detachable, its
// event was fulfilled): queues its released successors -- on the deque of
// `me`, the completing thread, when it is a member of the task's team,
// else (null: omp_fulfill_event, from any thread) on the shared queue --
// then accounts its end: its group, its own reference, its parent's (the
// last access to the parent), and last the team's count (the team's
// barrier waits for it, so the implicit tasks a parent may be outlive
// every access above). With `next`, the last released successor is not
// queued but returned there, for `me` to run at once (see run_one_task).
void complete(thread_state* me, task_node* node, task_node** next = nullptr) {
  team* t = node->owner;
  if (node->in_graph) {
    absl::InlinedVector<task_node*, 3> ready;
    count(op::shared_rmw);
    {
      std::lock_guard<short_lock> lock(node->graph_lock);
      node->completed.store(true, std::memory_order_release);
      ready.swap(node->successors);
    }
    // The successors whose last predecessor this was. A waiter is read
    // before the decrement: the one that reaches 0 lets its thread go on
    // and its stand-in (on that thread's stack) go.
    std::size_t n = 0;
    for (task_node* succ : ready) {
      const bool waiter = succ->waiter;
      if (succ->unmet.fetch_sub(1, std::memory_order_acq_rel) == 1 && !waiter) ready[n++] = succ;
    }
    ready.resize(n);
    if (next != nullptr && !ready.empty()) {
      *next = ready.back();
      ready.pop_back();
    }
    for (task_node* succ : ready) enqueue_task(me, *t, succ);
    if (!ready.empty()) wake_for_tasks(*t);
  }
  if (node->group != nullptr) {
    count(op::shared_rmw);
    node->group->pending.fetch_sub(1, std::memory_order_acq_rel);
  }
  task_node* parent = node->parent;
  release(node);
  if (parent != nullptr) {
    count(op::shared_rmw);
    release(parent);
  }
  count(op::shared_rmw);
  t->tasks_pending.fetch_sub(1, std::memory_order_acq_rel);
}

// Runs `node` as the current task of `me`.
// A task of a cancelled region or taskgroup is discarded: its body does not
// run. A discarded detachable task still completes when its event is
// fulfilled -- its creator holds the event and may fulfil it any time, which
// must not find the task gone (libgomp completes it at once).
// Returns a successor it released for `me` to run next, when `chain`
// (else those go on me's deque), or null.
task_node* run_task(thread_state& me, task_node* node, bool chain) {
  if (!discarded(node)) {
    task_node* outer = me.task;
    taskgroup* outer_group = me.group;
    const bool outer_final = me.in_final;
    const icvs outer_icv = me.icv;
    me.task = node;
    me.group = node->group;
    me.in_final = node->final;
    me.icv = node->icv.v;
    node->fn(node->arg);
    me.task = outer;
    me.group = outer_group;
    me.in_final = outer_final;
    me.icv = outer_icv;
  }
  task_node* next = nullptr;
  if (node->holds.fetch_sub(1, std::memory_order_acq_rel) == 1)
    complete(&me, node, chain ? &next : nullptr);
  return next;
}

template <class Pred>
void wait_tasks(thread_state& me, Pred done) {
  int spins = 0;
  while (!done()) {
    if (run_one_task(me)) {
      spins = 0;
      continue;
    }
    if (++spins < 64) {
      base::cpu_relax();
      continue;
    }
    wait_step(me, false, nullptr, nullptr, nullptr, nullptr);
  }
}

bool no_children(const task_node* task) {
  return task->refs.load(std::memory_order_acquire) == 1;
}

// Waits until the siblings that `depend` names as predecessors of a task
// created now have completed (an undeferred task, or taskwait depend).
void wait_for_deps(thread_state& me, void** depend) {
  team* t = me.t;
  task_node* parent = me.task;
  // Without a team no sibling was deferred.
  if (t == nullptr || parent == nullptr) return;
  const dep_items items = parse_depend(depend);
  task_node waiter;
  waiter.waiter = true;
  if (parent->deps == nullptr && parent->all_memory == nullptr) return;
  waiter.unmet.store(1, std::memory_order_relaxed);
  link_deps(parent, &waiter, items, false);
  // The last predecessor's decrement is its last access to the waiter.
  if (waiter.unmet.fetch_sub(1, std::memory_order_acq_rel) == 1) return;
  wait_tasks(me, [&] { return waiter.unmet.load(std::memory_order_acquire) == 0; });
}

// A deferred task with its own copy of the arguments (cpyfn, or the bytes).
// A detachable one's event (the task) is stored where GCC asks, and in the
// first word of the arguments before they are copied, as libgomp does.
task_node* make_task(thread_state& me, void (*fn)(void*), void* data, void (*cpyfn)(void*, void*),
                     long arg_size, long arg_align, void* detach = nullptr) {
  auto* node = new task_node;
  node->heap = true;
  node->fn = fn;
  const std::uintptr_t align = arg_align > 0 ? std::uintptr_t(arg_align) : 1;
  if (std::size_t(arg_size) <= task_node::inline_bytes && align <= task_node::inline_align) {
    node->arg = node->inline_args;
  } else {
    node->storage.resize(std::size_t(arg_size) + align);
    auto p = reinterpret_cast<std::uintptr_t>(node->storage.data());
    node->arg = reinterpret_cast<void*>((p + align - 1) & ~(align - 1));
  }
  if (detach != nullptr) {
    node->detached = true;
    node->holds.store(2, std::memory_order_relaxed);
    *static_cast<void**>(detach) = node;
    if (data != nullptr) *static_cast<void**>(data) = node;
  }
  if (cpyfn != nullptr) {
    cpyfn(node->arg, data);
    node->copy_constructed = true;
  } else if (arg_size > 0)
    std::memcpy(node->arg, data, std::size_t(arg_size));
  node->parent = me.task;
  node->group = me.group;
  node->owner = me.t;
  node->icv.v = me.icv;
  return node;
}

// Queues a task made by make_task on me's deque -- once the siblings its
// dependences name have completed -- and wakes the team's threads asleep
// at a barrier, if any, so that they help. tasks_pending rises first, with
// seq_cst: wake_for_tasks says why.
void submit(thread_state& me, task_node* node, const dep_items* deps = nullptr) {
  team* t = me.t;
  if (node->parent != nullptr) {
    count(op::shared_rmw);
    node->parent->refs.fetch_add(1, std::memory_order_relaxed);
  }
  if (node->group != nullptr) {
    count(op::shared_rmw);
    node->group->pending.fetch_add(1, std::memory_order_relaxed);
  }
  count(op::shared_rmw);
  t->tasks_pending.fetch_add(1, std::memory_order_seq_cst);
  if (deps != nullptr && !deps->empty() && node->parent != nullptr) {
    node->unmet.store(1, std::memory_order_relaxed);
    link_deps(node->parent, node, *deps, true);
    // Not ready: its last predecessor's completion queues it.
    if (node->unmet.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  }
  enqueue_task(&me, *t, node);
  wake_for_tasks(*t);
}

// Runs a task made by make_task at once, as an included task (its
// arguments already copied).
void run_now(thread_state& me, task_node* node) {
  task_node* outer = me.task;
  const bool outer_final = me.in_final;
  const icvs outer_icv = me.icv;
  me.task = node;
  me.in_final = node->final;
  node->fn(node->arg);
  me.task = outer;
  me.in_final = outer_final;
  me.icv = outer_icv;
  wait_tasks(me, [&] { return no_children(node); });
  delete node;
}

// ---- taskloop ------------------------------------------------------------------------

template <class T>
void taskloop(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long arg_size,
              long arg_align, unsigned flags, unsigned long num_tasks, T start, T end, T step,
              bool up) {
  thread_state& me = current();
  const bool nogroup = (flags & flag_nogroup) != 0;
  const bool reduction = (flags & flag_reduction) != 0 && !nogroup;
  // GCC's arguments start with the bounds and, with a reduction, the array.
  struct data_head {
    T first, last;
    std::uintptr_t* reductions;
  };
  // GCC's code skips combining and unregistering when nothing was
  // registered (array word 2 is 0).
  const auto skip = [&] {
    if (reduction) static_cast<data_head*>(data)->reductions[2] = 0;
  };
  if (globals().cancellation && me.t != nullptr &&
      me.t->cancelled.load(std::memory_order_relaxed)) {
    skip();
    return;
  }
  // Iterations, counted from 0 (no bound or step can overflow).
  unsigned long long trips = 0;
  using U = unsigned long long;
  if (up && end > start) trips = (U(end) - U(start) + U(step) - 1) / U(step);
  if (!up && start > end) trips = (U(start) - U(end) + (U(0) - U(step)) - 1) / (U(0) - U(step));
  if (trips == 0) {
    skip();
    return;
  }
  const bool strict = (flags & flag_grainsize) != 0 && (flags & flag_strict) != 0;
  const U grain = std::max<U>(1, num_tasks);
  unsigned long long tasks = 0;
  if (strict)
    tasks = (trips + grain - 1) / grain;  // grain iterations each, the last the rest
  else if ((flags & flag_grainsize) != 0)
    tasks = std::max<U>(1, trips / grain);
  else
    tasks = num_tasks != 0 ? num_tasks : U(me.t != nullptr ? me.t->size : 1);
  tasks = std::min<U>(tasks, trips);
  if (!nogroup) {
    GOMP_taskgroup_start();
    if (reduction) GOMP_taskgroup_reduction_register(static_cast<data_head*>(data)->reductions);
  } else if (creation_cancelled(me)) {
    return;
  }
  const bool final = (flags & flag_final) != 0 || me.in_final;
  const bool deferred = (flags & flag_if) != 0 && !final && me.t != nullptr && me.t->size > 1;
  const U q = trips / tasks, r = trips % tasks;
  U lo = 0;
  for (U k = 0; k < tasks; ++k) {
    const U hi = strict ? std::min(trips, lo + grain) : lo + q + (k < r ? 1 : 0);
    task_node* node = make_task(me, fn, data, cpyfn, arg_size, arg_align);
    node->final = final;
    // The outlined body reads its range from the first two fields.
    T* range = static_cast<T*>(node->arg);
    range[0] = T(U(start) + lo * U(step));
    range[1] = T(U(start) + hi * U(step));
    if (deferred)
      submit(me, node);
    else
      run_now(me, node);
    lo = hi;
  }
  if (!nogroup) GOMP_taskgroup_end();
}

}  // namespace

void end_implicit_task(thread_state& me) {
  task_node* task = me.task;
  if (task == nullptr || (task->deps == nullptr && task->all_memory == nullptr)) return;
  wait_tasks(me, [&] { return no_children(task); });
  clear_deps(task);
}

bool run_one_task(thread_state& me) {
  team* t = me.t;
  if (t == nullptr || t->tasks_pending.load(std::memory_order_acquire) == 0) return false;
  task_node* node = take_task(me);
  if (node == nullptr) return false;
  // A successor that a task's completion released runs next, right here:
  // a chain passes from task to task with no queue between them, and the
  // thieves' probes of this deque find lines nobody writes. A few at a
  // time, so that the wait that called returns to check what it waits for.
  for (int k = 1; node != nullptr; ++k) node = run_task(me, node, k < chain_max);
  return true;
}

}  // namespace weft::omp

using namespace weft::omp;

extern "C" {

WEFT_GOMP void GOMP_task(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long arg_size,
                         long arg_align, bool if_clause, unsigned flags, void** depend,
                         int priority, void* detach) {
  (void)priority;  // a hint, ignored (task_queue.cpp)
  thread_state& me = current();
  if (creation_cancelled(me)) return;
  team* t = me.t;
  const bool has_depend = (flags & flag_depend) != 0 && depend != nullptr;
  if ((flags & flag_detach) == 0) detach = nullptr;
  // A final task, and every task made inside one, is included: it runs now.
  const bool final = (flags & flag_final) != 0 || me.in_final;
  // A team of one thread runs a task at once, unless the task may complete
  // later than its body returns (detach) or must wait for a sibling that
  // may (depend): then it is queued like any deferred task, and runs at
  // the thread's next wait -- a detachable task's fulfiller may be created
  // after it.
  // And a task without dependences or detach runs at once while the team
  // has more than 64 tasks per thread outstanding (as libgomp does: a task
  // scheduling point may switch to the new task): a flood of small tasks
  // then costs about a call each instead of a queue far ahead of its
  // consumers.
  // (The team's count, a line every member writes, is read last.)
  const bool deferred = if_clause && !final && t != nullptr &&
                        (t->size > 1 || detach != nullptr || has_depend) &&
                        !(detach == nullptr && !has_depend &&
                          t->tasks_pending.load(std::memory_order_relaxed) > 64L * t->size);
  if (!deferred) {
    // Undeferred: after the siblings it depends on, runs now, as its own
    // task (a taskwait inside waits for its own children only); with
    // detach, its creator goes on once the event is fulfilled too.
    if (has_depend) wait_for_deps(me, depend);
    task_node node;
    node.parent = nullptr;
    node.group = me.group;
    node.final = final;
    node.included = true;
    if (detach != nullptr) {
      node.detached = true;
      *static_cast<void**>(detach) = &node;
      if (data != nullptr) *static_cast<void**>(data) = &node;
    }
    std::unique_ptr<unsigned char[]> copy;
    void* arg = data;
    if (cpyfn != nullptr) {
      copy.reset(new unsigned char[std::size_t(arg_size) + std::size_t(arg_align)]);
      auto p = reinterpret_cast<std::uintptr_t>(copy.get());
      arg = reinterpret_cast<void*>((p + std::uintptr_t(arg_align) - 1) &
                                    ~(std::uintptr_t(arg_align) - 1));
      cpyfn(arg, data);
    }
    task_node* outer = me.task;
    const bool outer_final = me.in_final;
    me.task = &node;
    me.in_final = final;
    fn(arg);
    me.task = outer;
    me.in_final = outer_final;
    if (node.icv_saved) [[unlikely]]
      me.icv = node.icv.v;
    wait_tasks(me, [&] { return no_children(&node); });
    if (detach != nullptr)
      wait_tasks(me, [&] { return node.fulfilled.load(std::memory_order_acquire); });
    return;
  }
  task_node* node = make_task(me, fn, data, cpyfn, arg_size, arg_align, detach);
  if (has_depend) {
    const dep_items items = parse_depend(depend);
    submit(me, node, &items);
  } else {
    submit(me, node);
  }
}

WEFT_GOMP void GOMP_taskwait_depend(void** depend) {
  thread_state& me = current();
  if (depend != nullptr) wait_for_deps(me, depend);
}

// omp_event_handle_t is an enum of uintptr_t's size in GCC's omp.h.
WEFT_GOMP void omp_fulfill_event(std::uintptr_t event) {
  auto* node = reinterpret_cast<task_node*>(event);
  if (node == nullptr) weft::base::fatal("omp_fulfill_event: a null event handle");
  const bool deferred = node->heap;
  if (!node->detached)
    weft::base::fatal("omp_fulfill_event: %p is not the event of a detachable task",
                      static_cast<void*>(node));
  if (node->fulfilled.exchange(true, std::memory_order_acq_rel))
    weft::base::fatal("omp_fulfill_event: the event %p was fulfilled twice",
                      static_cast<void*>(node));
  // An undeferred task's creator waits for `fulfilled` (set above, the last
  // access to it); a deferred one completes when its body returned too.
  if (!deferred) return;
  if (node->holds.fetch_sub(1, std::memory_order_acq_rel) == 1) complete(nullptr, node);
}

WEFT_GOMP void GOMP_taskloop(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*),
                             long arg_size, long arg_align, unsigned flags, unsigned long num_tasks,
                             int priority, long start, long end, long step) {
  (void)priority;
  taskloop<long>(fn, data, cpyfn, arg_size, arg_align, flags, num_tasks, start, end, step,
                 step > 0);
}

WEFT_GOMP void GOMP_taskloop_ull(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*),
                                 long arg_size, long arg_align, unsigned flags,
                                 unsigned long num_tasks, int priority, unsigned long long start,
                                 unsigned long long end, unsigned long long step) {
  (void)priority;
  taskloop<unsigned long long>(fn, data, cpyfn, arg_size, arg_align, flags, num_tasks, start, end,
                               step, (flags & flag_up) != 0);
}

WEFT_GOMP void GOMP_taskwait() {
  thread_state& me = current();
  task_node* task = me.task;
  if (task == nullptr) return;
  wait_tasks(me, [&] { return no_children(task); });
  // Every child completed: none of its table's listings is needed.
  if (task->deps != nullptr || task->all_memory != nullptr) clear_deps(task);
}

WEFT_GOMP void GOMP_taskyield() {
  run_one_task(current());
}

WEFT_GOMP void GOMP_taskgroup_start() {
  thread_state& me = current();
  auto* g = new taskgroup;
  g->outer = me.group;
  if (g->outer != nullptr) g->reductions = g->outer->reductions;
  me.group = g;
}

WEFT_GOMP void GOMP_taskgroup_end() {
  thread_state& me = current();
  taskgroup* g = me.group;
  if (g == nullptr) return;
  wait_tasks(me, [&] { return g->pending.load(std::memory_order_acquire) == 0; });
  me.group = g->outer;
  delete g;
}

}  // extern "C"
