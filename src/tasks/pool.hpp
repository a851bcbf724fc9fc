// Descriptor pools: where the tasks layer's loop and task descriptors come
// from and go back to (private to src/tasks).
//
// Descriptors come from pools: a PE-private free list, refilled from and
// spilled to a node-wide list in batches under a mutex, so that the PE that
// creates tasks and the thieves that free them meet on the lock once per
// batch, and steady state does no malloc. A descriptor is never returned to
// the system while the node runs: the slabs own every one ever made, which
// also frees what a run that ended mid-loop left behind.
//
// Templates over the descriptor type, in a header, because take and give are
// on every task's path (expose, run_task) and must inline there.
#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace weft::tasks::internal {

template <class T>
struct shared_pool {
  std::mutex mutex;
  T* head = nullptr;                        // guarded by mutex
  std::size_t count = 0;                    // guarded by mutex
  std::vector<std::unique_ptr<T[]>> slabs;  // guarded by mutex; every T ever made
};

template <class T>
struct local_pool {
  T* head = nullptr;
  std::size_t count = 0;
};

constexpr std::size_t pool_batch = 64;  // moved per lock
constexpr std::size_t pool_keep = 512;  // a PE keeps at most this many free

// Moves up to `n` descriptors from the front of one free list to the front
// of another, keeping both counts.
template <class T, class Count>
void move_free(T*& from, Count& from_count, T*& to, Count& to_count, std::size_t n) {
  for (std::size_t k = 0; k < n && from != nullptr; ++k) {
    T* x = from;
    from = x->next_free;
    --from_count;
    x->next_free = to;
    to = x;
    ++to_count;
  }
}

template <class T>
T* take(local_pool<T>& lp, shared_pool<T>& sp) {
  if (lp.head == nullptr) {
    std::lock_guard<std::mutex> lock(sp.mutex);
    move_free(sp.head, sp.count, lp.head, lp.count, pool_batch);
    if (lp.head == nullptr) {
      sp.slabs.push_back(std::make_unique<T[]>(pool_batch));
      T* slab = sp.slabs.back().get();
      for (std::size_t k = 0; k < pool_batch; ++k) {
        slab[k].next_free = lp.head;
        lp.head = &slab[k];
      }
      lp.count += pool_batch;
    }
  }
  T* x = lp.head;
  lp.head = x->next_free;
  --lp.count;
  return x;
}

template <class T>
void give(local_pool<T>& lp, shared_pool<T>& sp, T* x) {
  x->next_free = lp.head;
  lp.head = x;
  if (++lp.count <= pool_keep) return;
  std::lock_guard<std::mutex> lock(sp.mutex);
  move_free(lp.head, lp.count, sp.head, sp.count, pool_keep / 2);
}

}  // namespace weft::tasks::internal
