// The lock word of critical sections, GOMP_atomic_start and omp_lock_t: a
// 32-bit word, 0 free, 1 taken. Taking it is one compare-exchange; waiting
// goes through wait_step, so a waiter gives its PE to whatever holds the
// lock (a fiber suspended on the same PE must be able to run to release it).
#pragma once
#include <atomic>
#include <cstdint>
#include "omp/omp_internal.hpp"
#include "weft/base/cache.hpp"

namespace weft::omp {

using spin_word = std::atomic<std::uint32_t>;
static_assert(sizeof(spin_word) == 4 && std::atomic<std::uint32_t>::is_always_lock_free);

inline bool try_lock(spin_word& w) {
  std::uint32_t expected = 0;
  return w.load(std::memory_order_relaxed) == 0 &&
         w.compare_exchange_strong(expected, 1, std::memory_order_acquire);
}

inline void lock(spin_word& w, thread_state& me) {
  int spins = 0;
  while (!try_lock(w)) {
    if (++spins < 128) {
      base::cpu_relax();
      continue;
    }
    wait_step(me, false, nullptr, nullptr, nullptr, nullptr);
  }
}

inline void unlock(spin_word& w) {
  w.store(0, std::memory_order_release);
}

}  // namespace weft::omp
