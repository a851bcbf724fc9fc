// Asymmetric fences for the PE wake-up protocol (core/scheduler.cpp): the
// side that runs often (a PE handing a message to another PE's ring) pays a
// compiler barrier, and the side that runs rarely (a PE about to sleep) pays
// for both with membarrier(2), which makes every running thread of the
// process execute a full barrier before it returns.
//
// Why: a producer's seq_cst fence between its ring store and its read of
// the consumer's sleep word waits until that store has left the core, i.e.
// for the slot's cache line to arrive from the polling consumer. Measured
// (kNeighbor, 2 PEs, 16 B, 12 interleaved rounds): 0.580 us per iteration
// with full fences, 0.542 with these. A PE goes to sleep only after its
// idle spin and yield budgets (hundreds of microseconds), so a few
// microseconds of membarrier there cost nothing that matters.
//
// Correct pairing (Dekker, store then load on both sides):
//   producer: publish; light_fence(); read sleep word
//   consumer: write sleep word; heavy_fence(); look for work
// membarrier orders every other thread's accesses around the instant it
// runs, so either the producer's publication is visible to the consumer's
// look, or the producer's read sees the sleep word.
#pragma once

#include <atomic>

#include "weft/base/cache.hpp"
#include "weft/base/export.hpp"

namespace weft::base {

namespace detail {
// Set by enable_asymmetric_fences before the threads that use the fences
// start; read with relaxed loads.
inline std::atomic<bool> asymmetric_fences{false};
}  // namespace detail

// Registers the process for membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED).
// Returns "" on success, else why it is not available (kernel too old,
// blocked by seccomp, ...). On success light_fence() becomes a compiler
// barrier and heavy_fence() a membarrier call; until then, and after
// disable_asymmetric_fences(), both are full fences. Call it while no thread
// uses the fences.
WEFT_API const char* enable_asymmetric_fences();
WEFT_API void disable_asymmetric_fences();
inline bool asymmetric_fences_enabled() {
  return detail::asymmetric_fences.load(std::memory_order_relaxed);
}

// The frequent side.
inline void light_fence() {
  if (detail::asymmetric_fences.load(std::memory_order_relaxed))
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler keeps the order
  else
    full_fence();
}

// The rare side: a full barrier in every running thread of the process.
WEFT_API void heavy_fence();

// The same between processes (the shm transport's doorbells): each process
// of a job registers; then global_heavy_fence() runs a full barrier in every
// running thread of every registered process
// (MEMBARRIER_CMD_GLOBAL_EXPEDITED), and a registered process may ring
// another's doorbell after a compiler barrier if that other sleeps after
// global_heavy_fence(). Returns "" on success, else why not.
WEFT_API const char* register_global_membarrier();
WEFT_API void global_heavy_fence();

}  // namespace weft::base
