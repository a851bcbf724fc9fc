// Carriers: OS threads of a node that run logical threads (ULTs) in a PE's
// place, one at a time, bound to the PE's CPUs (weft/threads/ult.hpp has
// the model). Library-private.
//
// A carrier waits on a token count (std::atomic<int>::wait, a futex): one
// token when it is given a ULT to start, one for each resume of a ULT that
// suspended on it. It runs the ULT as a fiber, so that suspend() is the same
// switch everywhere. While it is not asleep it counts as a guest of its PE
// (core's idle back-off, and OpenMP's thread 0 waiting on the PE, then
// yield the CPU instead of spinning on it): the thread that wakes it counts
// it, not the carrier once it runs -- a carrier woken on a CPU that its PE
// spins on would otherwise wait for the scheduler's time slice to end.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#include "weft/base/cache.hpp"
#include "weft/threads/ult.hpp"
#include "weft/trace/hooks.hpp"

namespace weft::threads {

class carrier_pool;

class carrier {
 public:
  // Starts the OS thread; `cpu` < 0: it keeps the creator's CPU set.
  carrier(carrier_pool& pool, int pe, int slot, int cpu);
  // Stops the thread and joins it (a ULT still suspended on it stays so).
  ~carrier();
  carrier(const carrier&) = delete;
  carrier& operator=(const carrier&) = delete;

  int pe() const noexcept { return pe_; }
  int slot() const noexcept { return slot_; }

  // Runs `u` (claimed, its host and pe set) on this carrier, which the
  // caller reserved from its pool. Returns at once. Any thread.
  void start(ult* u) noexcept;
  // One token: the ULT suspended on this carrier goes on (at once if it has
  // not finished suspending yet). Any thread.
  void post() noexcept;

  // The carrier the calling thread is, or null.
  static carrier* current() noexcept;

 private:
  void main(int cpu);
  void run(ult* u);
  // Takes a token, sleeping until one comes; false once the carrier stops.
  bool take_token() noexcept;

  carrier_pool& pool_;
  const int pe_;
  const int slot_;
  // Futex word: tokens not yet taken. Written by any thread (post), taken
  // by the carrier.
  alignas(base::cache_line) std::atomic<int> tokens_{0};
  // True while the carrier sleeps on tokens_ (or is about to): whoever
  // turns it false counts the carrier as its PE's guest again.
  std::atomic<bool> asleep_{false};
  std::atomic<ult*> job_{nullptr};  // set by start, taken by the carrier
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The carriers of one PE, by slot (1, 2, ...). Reserving one is a short
// critical section (and, the first time a slot is needed, a thread start).
class carrier_pool {
 public:
  // A free carrier of PE `pe`: slot `slot` if it is free (slot >= 1), else
  // the lowest free one, else a new one. `created` tells whether it is new.
  carrier* acquire(int pe, int slot, int cpu, bool& created);
  // The carrier is free again (called on its own thread, after its ULT).
  void release(carrier* c) noexcept;
  // Stops and joins every carrier (the node ends).
  void stop_all() noexcept;

 private:
  std::mutex mutex_;
  std::vector<std::unique_ptr<carrier>> slots_;  // index = slot; [0] unused (guarded)
  std::vector<char> busy_;                       // guarded
};

namespace detail {
// ult.cpp's side of a carrier: which ULT its thread runs (current()), and
// the fiber entry every ULT starts in.
void set_current(ult* u) noexcept;
void ult_entry(void* arg);
void trace_switch(trace::kind k, ult* u);
}  // namespace detail

}  // namespace weft::threads
