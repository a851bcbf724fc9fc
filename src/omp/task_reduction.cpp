// Task reductions: taskgroup task_reduction + in_reduction, taskloop
// reduction (through GOMP_taskgroup_reduction_register), and
// reduction(task, ...) on work-sharing constructs and parallel.
//
// GCC fills an array describing the variables, and the runtime provides
// zeroed memory for every thread's copies and maps an original address to
// the calling thread's copy (GOMP_task_reduction_remap); GCC's code
// initialises and combines the copies.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <utility>
#include <vector>
#include "omp/gomp_abi.hpp"
#include "omp/omp_internal.hpp"
#include "weft/base/error.hpp"

extern "C" {
void GOMP_taskgroup_start();
void GOMP_taskgroup_end();
}

namespace weft::omp {

namespace {

// The array (one per construct, possibly chained by next pointers):
//   d[0] number of variables, d[1] bytes of one thread's copies, d[2] their
//   alignment (the runtime replaces it by the base of every thread's
//   copies), d[3] allocator, d[4] next array, d[5] and d[6] the runtime's
//   (here: the registration, and the end of the copies), then per variable
//   {original address, offset in a thread's chunk, the runtime's word}.
// Registrations nest: each keeps the enclosing one (taskgroup inside
// taskgroup), and a lookup goes outwards.

struct reduction_registration {
  std::vector<std::uintptr_t*> arrays;
  // original address -> (its array, its offset in a thread's chunk)
  std::unordered_map<std::uintptr_t, std::pair<std::uintptr_t*, std::uintptr_t>> items;
  std::uintptr_t* outer = nullptr;
};

reduction_registration* registration_of(const std::uintptr_t* data) {
  return reinterpret_cast<reduction_registration*>(data[5]);
}

// Registers `data` for `nthreads` threads inside `outer`; `first` (a work
// share's first thread's array): share its memory instead of allocating.
void register_reductions(std::uintptr_t* data, std::uintptr_t* outer, std::uintptr_t* first,
                         int nthreads) {
  auto* reg = new reduction_registration;
  reg->outer = outer;
  std::uintptr_t* d = data;
  for (;;) {
    reg->arrays.push_back(d);
    if (first != nullptr) {
      d[2] = first[2];
      d[6] = first[6];
      first = reinterpret_cast<std::uintptr_t*>(first[4]);
    } else {
      const std::size_t bytes = d[1] * std::size_t(nthreads);
      std::size_t align = std::max<std::size_t>(d[2], alignof(void*));
      if ((align & (align - 1)) != 0)
        base::fatal("libweft-omp: task reduction alignment %zu is not a power of two", align);
      const std::size_t alloc = std::max<std::size_t>(align, (bytes + align - 1) & ~(align - 1));
      void* mem = std::aligned_alloc(align, alloc);
      if (mem == nullptr)
        base::fatal("libweft-omp: out of memory for task reductions (%zu bytes)", alloc);
      std::memset(mem, 0, alloc);
      d[2] = reinterpret_cast<std::uintptr_t>(mem);
      d[6] = d[2] + bytes;
    }
    d[5] = 0;
    for (std::uintptr_t j = 0; j < d[0]; ++j) {
      std::uintptr_t* item = d + 7 + 3 * j;
      item[2] = reinterpret_cast<std::uintptr_t>(d);
      reg->items.emplace(item[0], std::make_pair(d, item[1]));
    }
    if (d[4] == 0) {
      d[4] = reinterpret_cast<std::uintptr_t>(outer);
      break;
    }
    d = reinterpret_cast<std::uintptr_t*>(d[4]);
  }
  data[5] = reinterpret_cast<std::uintptr_t>(reg);
}

void unregister_reductions(std::uintptr_t* data, bool free_memory) {
  reduction_registration* reg = registration_of(data);
  if (reg == nullptr)
    base::fatal("libweft-omp: task reductions unregistered that were not registered");
  if (free_memory)
    for (std::uintptr_t* d : reg->arrays) std::free(reinterpret_cast<void*>(d[2]));
  data[5] = 0;
  delete reg;
}

// The calling thread's copy of `p`, which is an original list item or
// (a task inside a task) a copy already; `orig` gets the original.
bool remap_one(std::uintptr_t* data, std::uintptr_t id, std::uintptr_t p, std::uintptr_t& copy,
               std::uintptr_t& orig) {
  for (std::uintptr_t* h = data; h != nullptr; h = registration_of(h)->outer) {
    const reduction_registration* reg = registration_of(h);
    auto it = reg->items.find(p);
    if (it == reg->items.end()) continue;
    const std::uintptr_t* d = it->second.first;
    copy = d[2] + id * d[1] + it->second.second;
    orig = p;
    return true;
  }
  for (std::uintptr_t* h = data; h != nullptr; h = registration_of(h)->outer) {
    for (const std::uintptr_t* d : registration_of(h)->arrays) {
      if (p < d[2] || p >= d[6] || d[1] == 0) continue;
      const std::uintptr_t off = (p - d[2]) % d[1];
      copy = d[2] + id * d[1] + off;
      orig = 0;
      for (std::uintptr_t j = 0; j < d[0]; ++j)
        if (d[7 + 3 * j + 1] == off) orig = d[7 + 3 * j];
      return true;
    }
  }
  return false;
}

}  // namespace

void workshare_taskgroup_start(thread_state& me) {
  GOMP_taskgroup_start();
  me.group->workshare = true;
}

void workshare_reductions_register(thread_state& me, std::uintptr_t* data, std::uintptr_t* first) {
  register_reductions(data, me.group->reductions, first, me.t != nullptr ? me.t->size : 1);
  me.group->reductions = data;
}

taskgroup* parallel_reductions_group(std::uintptr_t* data, int nthreads) {
  auto* g = new taskgroup;
  register_reductions(data, nullptr, nullptr, nthreads);
  g->reductions = data;
  return g;
}

}  // namespace weft::omp

using namespace weft::omp;

extern "C" {

// taskgroup task_reduction(...) (and taskloop reduction, through
// GOMP_taskloop): memory for every thread's copies, for the team's threads.
WEFT_GOMP void GOMP_taskgroup_reduction_register(std::uintptr_t* data) {
  thread_state& me = current();
  if (me.group == nullptr)
    weft::base::fatal("libweft-omp: GOMP_taskgroup_reduction_register outside a taskgroup");
  register_reductions(data, me.group->reductions, nullptr, me.t != nullptr ? me.t->size : 1);
  me.group->reductions = data;
}

WEFT_GOMP void GOMP_taskgroup_reduction_unregister(std::uintptr_t* data) {
  unregister_reductions(data, true);
}

// in_reduction: ptrs[i] (an original list item, or a copy a task already
// got) becomes the calling thread's copy; for i < cntorig, ptrs[cnt + i] the
// original.
WEFT_GOMP void GOMP_task_reduction_remap(std::size_t cnt, std::size_t cntorig, void** ptrs) {
  thread_state& me = current();
  std::uintptr_t* data = me.group != nullptr ? me.group->reductions : nullptr;
  for (std::size_t i = 0; i < cnt; ++i) {
    const auto p = reinterpret_cast<std::uintptr_t>(ptrs[i]);
    std::uintptr_t copy = 0, orig = 0;
    if (data == nullptr || !remap_one(data, std::uintptr_t(me.id), p, copy, orig))
      weft::base::fatal(
          "libweft-omp: in_reduction of %p, which no enclosing taskgroup task_reduction or "
          "reduction(task, ...) names",
          ptrs[i]);
    ptrs[i] = reinterpret_cast<void*>(copy);
    if (i < cntorig) ptrs[cnt + i] = reinterpret_cast<void*>(orig);
  }
}

// The end of a work-sharing construct with reduction(task, ...): its tasks
// done, the team past the construct (unless cancelled), thread 0 frees the
// copies every thread shared.
WEFT_GOMP void GOMP_workshare_task_reduction_unregister(bool cancelled) {
  thread_state& me = current();
  std::uintptr_t* data = me.group != nullptr ? me.group->reductions : nullptr;
  if (data == nullptr || !me.group->workshare)
    weft::base::fatal(
        "libweft-omp: GOMP_workshare_task_reduction_unregister outside a work share "
        "with task reductions");
  GOMP_taskgroup_end();
  if (!cancelled) barrier(me);
  unregister_reductions(data, me.id == 0);
}

}  // extern "C"
