// The shared state of work-sharing constructs (omp_internal.hpp has the
// model): schedule kinds, a team's ring of work-share slots, and what loop
// schemes (loop_schemes.cpp) and doacross loops (doacross.cpp) keep there.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>
#include "absl/container/inlined_vector.h"
#include "weft/base/cache.hpp"

namespace weft::omp {

// OpenMP schedule kinds as libgomp numbers them (GOMP_loop_start's `sched`,
// omp_sched_t): static 1, dynamic 2, guided 3, auto 4; the monotonic flag
// is bit 31.
enum sched_kind : int { sched_static = 1, sched_dynamic = 2, sched_guided = 3, sched_auto = 4 };
inline constexpr int sched_monotonic = int(0x80000000u);

// How a loop scheduled static without a chunk at run time is shared
// (loop_schemes.cpp): as static blocks, or by the seed's idle-counter or
// history scheme. scheme_option: as --weft:omp-scheme says.
enum loop_scheme : int {
  scheme_option = 0,
  scheme_static = 1,
  scheme_idle = 2,
  scheme_history = 3
};

// A thread's static block of a loop run under a scheme (loop_schemes.cpp),
// in iteration numbers: [lo, mid) is its owner's, [mid, hi) is offered to
// the other threads of the team as `parts` equal parts, which thieves take
// from the top and the owner takes back from the bottom. Guarded by `lock`
// (spin_lock.hpp); `parts` and `started` are also read without it, to skip
// blocks with nothing to take.
struct alignas(base::cache_line) scheme_block {
  std::atomic<std::uint32_t> lock{0};
  unsigned long long lo = 0, mid = 0, hi = 0;
  unsigned long long look = 1;      // idle: the owner's piece between two looks
  unsigned long long reserved = 0;  // history: what the owner kept at its start
  int offered = 0, stolen = 0, returned = 0;
  bool done = false;  // the owner found its block empty (and turned thief)
  std::atomic<int> parts{0};
  std::atomic<bool> started{false};  // its owner has taken a piece
};
struct history_entry;

// A loop's scheme state, in its work-sharing slot. kind 0: the loop runs
// its schedule's own path.
struct scheme_loop {
  int kind = 0;
  int size = 0;  // team size: blocks in use
  unsigned long long part_min = 1;
  std::unique_ptr<scheme_block[]> blocks;
  int capacity = 0;
  history_entry* history = nullptr;
  // Iterations not yet handed to any thread, and the threads looking for
  // a part to steal (idle: their own block is empty, they run no part).
  alignas(base::cache_line) std::atomic<unsigned long long> unclaimed{0};
  std::atomic<int> hungry{0};
  // The loop's iterations; its last one is in no block: the first thread
  // to leave takes it (last_taker), and then nothing more (GCC's
  // lastprivate copies out on the thread whose last chunk ended at the
  // loop's end).
  unsigned long long trips = 0;
  std::atomic<bool> final_taken{false};
  std::atomic<int> last_taker{-1};
};

// A doacross loop's state (ordered(n) with depend(sink/source);
// doacross.cpp has the design), in its work-sharing slot. Written by the
// loop's first thread under the slot's mutex before the others join, then
// only read but for the atomics of `progress` and `owners`.
struct doacross_loop {
  // One thread's progress: a line of its own (a waiter polls it while its
  // owner posts; a neighbour's posts must not invalidate it).
  struct alignas(base::cache_line) line {
    std::atomic<unsigned long long> word[base::cache_line / sizeof(unsigned long long)];
  };
  // Posts and waits are tracked: a team of 2+ over a non-empty space.
  bool active = false;
  // Every iteration's vector packs into one word (see doacross.cpp).
  bool flattened = true;
  // How the thread that runs an outer iteration is found: by the static
  // block formula, by the static chunk's round robin, or in `owners`.
  enum finder : int { by_block, by_round_robin, by_table } find = by_block;
  int threads = 1;
  unsigned stride = 1;  // lines of `progress` per thread
  // by_block: q iterations a thread, r threads with one more. by_round_robin:
  // `unit` iterations a chunk. by_table: `unit` outer iterations an entry.
  unsigned long long q = 0, r = 0, unit = 1;
  absl::InlinedVector<unsigned long long, 4> counts;
  absl::InlinedVector<unsigned, 4> shifts;  // flattened: each dimension's place
  std::unique_ptr<line[]> progress;
  std::unique_ptr<std::atomic<unsigned>[]> owners;  // thread + 1, 0: not claimed

  // At the loop's end (its last thread leaving): a large owner table is
  // not kept for the team's next loops.
  void release() noexcept {
    active = false;
    progress.reset();
    owners.reset();
  }
};

// A work-sharing construct's shared state. A team keeps a ring of them; the
// k-th construct a thread meets is slot k % ring, first come initialises.
struct alignas(base::cache_line) ws_slot {
  std::mutex mutex;
  unsigned id = ~0u;  // the construct it holds (guarded)
  int joined = 0;     // threads that entered it (guarded)
  int left = 0;       // threads that left it (guarded)
  bool busy = false;  // holds a construct not every thread has left (guarded)
  // Loops (signed or unsigned iteration space, as GCC lowers them).
  alignas(base::cache_line) std::atomic<long> next{0};
  long end = 0, incr = 1, chunk = 1;
  std::atomic<unsigned long long> next_ull{0};
  unsigned long long end_ull = 0, incr_ull = 1, chunk_ull = 1;
  bool up = true;             // ull: counting up
  int sched = sched_dynamic;  // of this loop
  long start = 0;
  unsigned long long start_ull = 0;
  // ordered: the sequence number of the chunk whose ordered regions may run.
  alignas(base::cache_line) std::atomic<long> ordered_turn{0};
  std::atomic<long> chunk_counter{0};  // dynamic ordered: chunks handed out
  // sections
  std::atomic<unsigned> section{1};
  unsigned sections = 0;
  // single copyprivate
  std::atomic<void*> copy_data{nullptr};
  std::atomic<bool> copy_ready{false};
  // Task reductions of the construct (reduction(task, ...)): the first
  // thread's registration, which the others share; and the memory GCC asks
  // for (lastprivate(conditional:), GOMP_loop_start's `mem`), zeroed.
  std::uintptr_t* task_reductions = nullptr;
  std::vector<long long> mem;
  // cancel for / cancel sections (only with OMP_CANCELLATION).
  std::atomic<bool> cancelled{false};
  // A loop run under the idle-counter or history scheme.
  scheme_loop scheme;
  // A doacross loop: its posts' state.
  alignas(base::cache_line) doacross_loop doacross;
};

inline constexpr unsigned ws_ring = 16;

}  // namespace weft::omp
