// Explicit tasks (GOMP_task, taskwait, taskgroup, taskyield): untied and
// without dependences. A deferred task goes on its team's queue; any thread
// of the team runs queued tasks whenever it waits (barriers, taskwait, the
// other waits of wait_step), so tasks spread over the team's PEs. A task
// runs to its end on the thread that took it (its waits inside run other
// tasks nested), so a task never moves, as an untied task may not need to.
//
// Not provided (a clear error at run time, not a wrong result): depend
// clauses, detach, and task reductions; final/mergeable only run the task
// at once.
#include <algorithm>
#include <cstring>
#include <memory>
#include "omp/gomp_abi.hpp"
#include "omp/omp_internal.hpp"
#include "weft/base/cache.hpp"

extern "C" {
void GOMP_taskgroup_start();
void GOMP_taskgroup_end();
}

namespace weft::omp {

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

void release(task_node* node) {
  if (node->refs.fetch_sub(1, std::memory_order_acq_rel) == 1 && node->heap) delete node;
}

// Runs `node` as the current task of `me`, then accounts its end: its
// group, its own reference, its parent's (the last access to the parent),
// and last the team's count (the team's barrier waits for it, so the
// implicit tasks a parent may be outlive every access above).
void run_task(thread_state& me, task_node* node) {
  task_node* outer = me.task;
  taskgroup* outer_group = me.group;
  me.task = node;
  me.group = node->group;
  node->fn(node->arg);
  me.task = outer;
  me.group = outer_group;
  if (node->group != nullptr) node->group->pending.fetch_sub(1, std::memory_order_acq_rel);
  task_node* parent = node->parent;
  team* t = me.t;
  release(node);
  if (parent != nullptr) release(parent);
  if (t != nullptr) t->tasks_pending.fetch_sub(1, std::memory_order_acq_rel);
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

// A deferred task with its own copy of the arguments (cpyfn, or the bytes).
task_node* make_task(thread_state& me, void (*fn)(void*), void* data,
                     void (*cpyfn)(void*, void*), long arg_size, long arg_align) {
  auto* node = new task_node;
  node->heap = true;
  node->fn = fn;
  const std::uintptr_t align = arg_align > 0 ? std::uintptr_t(arg_align) : 1;
  node->storage.resize(std::size_t(arg_size) + align);
  auto p = reinterpret_cast<std::uintptr_t>(node->storage.data());
  node->arg = reinterpret_cast<void*>((p + align - 1) & ~(align - 1));
  if (cpyfn != nullptr)
    cpyfn(node->arg, data);
  else if (arg_size > 0)
    std::memcpy(node->arg, data, std::size_t(arg_size));
  node->parent = me.task;
  node->group = me.group;
  return node;
}

// Queues a task made by make_task on the team, and wakes the team's
// threads asleep at a barrier so that they help.
void submit(thread_state& me, task_node* node) {
  team* t = me.t;
  if (node->parent != nullptr) node->parent->refs.fetch_add(1, std::memory_order_relaxed);
  if (node->group != nullptr) node->group->pending.fetch_add(1, std::memory_order_relaxed);
  t->tasks_pending.fetch_add(1, std::memory_order_acq_rel);
  {
    std::lock_guard<std::mutex> lock(t->task_mutex);
    t->tasks.push_back(node);
  }
  wake_all(t->sleep_mutex, t->sleepers);
}

// Runs a task made by make_task at once, as an included task (its
// arguments already copied).
void run_now(thread_state& me, task_node* node) {
  task_node* outer = me.task;
  me.task = node;
  node->fn(node->arg);
  me.task = outer;
  wait_tasks(me, [&] { return no_children(node); });
  delete node;
}

template <class T>
void taskloop(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*), long arg_size,
              long arg_align, unsigned flags, unsigned long num_tasks, T start, T end, T step,
              bool up) {
  if ((flags & flag_reduction) != 0)
    not_implemented("task reductions (the reduction clause of taskloop)");
  thread_state& me = current();
  // Iterations, counted from 0 (no bound or step can overflow).
  unsigned long long trips = 0;
  using U = unsigned long long;
  if (up && end > start) trips = (U(end) - U(start) + U(step) - 1) / U(step);
  if (!up && start > end) trips = (U(start) - U(end) + (U(0) - U(step)) - 1) / (U(0) - U(step));
  if (trips == 0) return;
  unsigned long long tasks = 0;
  if ((flags & flag_grainsize) != 0)
    tasks = std::max<U>(1, trips / std::max<U>(1, num_tasks));
  else
    tasks = num_tasks != 0 ? num_tasks : U(me.t != nullptr ? me.t->size : 1);
  tasks = std::min<U>(tasks, trips);
  const bool nogroup = (flags & flag_nogroup) != 0;
  if (!nogroup) GOMP_taskgroup_start();
  const bool final = (flags & flag_final) != 0 || (me.task != nullptr && me.task->final);
  const bool deferred =
      (flags & flag_if) != 0 && !final && me.t != nullptr && me.t->size > 1;
  const U q = trips / tasks, r = trips % tasks;
  U lo = 0;
  for (U k = 0; k < tasks; ++k) {
    const U hi = lo + q + (k < r ? 1 : 0);
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

bool run_one_task(thread_state& me) {
  team* t = me.t;
  if (t == nullptr || t->tasks_pending.load(std::memory_order_acquire) == 0) return false;
  task_node* node = nullptr;
  {
    std::lock_guard<std::mutex> lock(t->task_mutex);
    if (t->tasks.empty()) return false;
    node = t->tasks.front();
    t->tasks.pop_front();
  }
  run_task(me, node);
  return true;
}

}  // namespace weft::omp

using namespace weft::omp;

extern "C" {

WEFT_GOMP void GOMP_task(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*),
                         long arg_size, long arg_align, bool if_clause, unsigned flags,
                         void** depend, int priority, void* detach) {
  (void)priority;  // a hint; tasks run in creation order
  if ((flags & flag_depend) != 0 || depend != nullptr)
    not_implemented("task dependences (the depend clause)");
  if ((flags & flag_detach) != 0 || detach != nullptr)
    not_implemented("detachable tasks (the detach clause)");
  thread_state& me = current();
  team* t = me.t;
  // A final task, and every task made inside one, is included: it runs now.
  const bool final = (flags & flag_final) != 0 || (me.task != nullptr && me.task->final);
  const bool deferred = if_clause && !final && t != nullptr && t->size > 1;
  if (!deferred) {
    // Undeferred: runs now, as its own task (a taskwait inside waits for its
    // own children only).
    task_node node;
    node.parent = nullptr;
    node.group = me.group;
    node.final = final;
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
    me.task = &node;
    fn(arg);
    me.task = outer;
    wait_tasks(me, [&] { return no_children(&node); });
    return;
  }
  submit(me, make_task(me, fn, data, cpyfn, arg_size, arg_align));
}

WEFT_GOMP void GOMP_taskloop(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*),
                             long arg_size, long arg_align, unsigned flags,
                             unsigned long num_tasks, int priority, long start, long end,
                             long step) {
  (void)priority;
  taskloop<long>(fn, data, cpyfn, arg_size, arg_align, flags, num_tasks, start, end, step,
                 step > 0);
}

WEFT_GOMP void GOMP_taskloop_ull(void (*fn)(void*), void* data, void (*cpyfn)(void*, void*),
                                 long arg_size, long arg_align, unsigned flags,
                                 unsigned long num_tasks, int priority, unsigned long long start,
                                 unsigned long long end, unsigned long long step) {
  (void)priority;
  taskloop<unsigned long long>(fn, data, cpyfn, arg_size, arg_align, flags, num_tasks, start,
                               end, step, (flags & flag_up) != 0);
}

WEFT_GOMP void GOMP_taskwait() {
  thread_state& me = current();
  task_node* task = me.task;
  if (task == nullptr) return;
  wait_tasks(me, [&] { return no_children(task); });
}

WEFT_GOMP void GOMP_taskyield() {
  run_one_task(current());
}

WEFT_GOMP void GOMP_taskgroup_start() {
  thread_state& me = current();
  auto* g = new taskgroup;
  g->outer = me.group;
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
