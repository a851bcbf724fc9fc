// Intrusive multi-producer / single-consumer queue. The PE message queue of
// DESIGN.md: any thread pushes, only the owning PE pops.
//
// Design: producers push onto a lock-free stack (one compare-and-swap on
// one line, retried only when another producer got in between); the
// consumer takes the whole stack with one exchange and reverses it into a
// list of its own, which it pops with plain loads until it is empty.
//
// Why this design: the cost of a message that finds its PE idle is the
// cache lines that cross between the cores. Here a message crosses on
// three: the stack's top (the producer's swap takes it, the consumer's
// poll reads it back and its exchange takes it), and the message itself.
// The node-based Vyukov queue used before (exchange on the producers' end,
// a stub node re-inserted by the consumer whenever it took the last
// element) moved the producers' end, the stub's line and the message line
// back and forth about eight times for such a message: an SMP ping-pong
// between two PEs of one process took 330 ns one way on the reference VM,
// six cache-line transfers (bench/pingpong, 55 ns floor), more than two
// processes over the shm transport. The Charm++ SMP paper (seed 000) found
// locked producer queues a bottleneck and per-pair queues costly to poll;
// both alternatives exist here (spsc_pairs) so they can be measured.
//
// The element embeds a queue_link; it must stay alive until popped.
// FIFO per producer; between producers, in order of their swaps.
#pragma once

#include <atomic>
#include <cstddef>

#include "weft/base/cache.hpp"

namespace weft::base {

struct queue_link {
  std::atomic<queue_link*> next{nullptr};
};

class mpsc_queue {
 public:
  mpsc_queue() = default;
  mpsc_queue(const mpsc_queue&) = delete;
  mpsc_queue& operator=(const mpsc_queue&) = delete;

  // Any thread; lock-free. Full barrier (the compare-and-swap, seq_cst),
  // which the wake-up protocol of core relies on: a producer then reads the
  // consumer's sleep flag (Dekker-style). The first try guesses an empty
  // stack, the common case of a PE that is waiting for its next message:
  // then the swap is the only access to the line.
  void push(queue_link* n) noexcept {
    queue_link* top = nullptr;
    n->next.store(nullptr, std::memory_order_relaxed);
    while (!top_.compare_exchange_weak(top, n, std::memory_order_seq_cst,
                                       std::memory_order_relaxed))
      n->next.store(top, std::memory_order_relaxed);
  }

  // Consumer only (one thread at a time; a new consumer must be ordered
  // after the last, as core's transport holders are by comm_busy). Returns
  // nullptr when empty.
  queue_link* pop() noexcept {
    queue_link* m = mine_.load(std::memory_order_relaxed);
    if (m == nullptr) {
      if (top_.load(std::memory_order_relaxed) == nullptr) return nullptr;
      // Acquire: the producers' links and messages, written before their
      // swaps, are visible from here on.
      queue_link* l = top_.exchange(nullptr, std::memory_order_acquire);
      // Newest first: reverse into arrival order. A single element (the
      // common case) is not written: its link is already null.
      while (l != nullptr) {
        queue_link* older = l->next.load(std::memory_order_relaxed);
        if (older != m) l->next.store(m, std::memory_order_relaxed);
        m = l;
        l = older;
      }
    }
    mine_.store(m->next.load(std::memory_order_relaxed), std::memory_order_relaxed);
    return m;
  }

  // Consumer, or any thread as a hint. An element is never half pushed, so
  // a consumer that finds the queue empty may sleep (core's wake-up
  // protocol: the producer's swap comes before its read of the sleep flag).
  bool empty() const noexcept {
    return mine_.load(std::memory_order_relaxed) == nullptr &&
           top_.load(std::memory_order_acquire) == nullptr;
  }

  // Approximate length for diagnostics (the watchdog's dump); walks at most
  // `cap` links. Consumer, or any thread when the consumer is stalled.
  std::size_t approx_size(std::size_t cap = 1u << 20) const noexcept {
    std::size_t n = 0;
    for (const std::atomic<queue_link*>* list : {&mine_, &top_})
      for (queue_link* p = list->load(std::memory_order_acquire); p != nullptr && n < cap;
           p = p->next.load(std::memory_order_acquire))
        ++n;
    return n;
  }

 private:
  // Written by every producer (and emptied by the consumer's exchange).
  alignas(cache_line) std::atomic<queue_link*> top_{nullptr};
  // Owned by the consumer: what it took and has not popped yet, oldest
  // first (atomic only so that the hints of other threads are race-free;
  // relaxed accesses cost nothing more than plain ones).
  alignas(cache_line) std::atomic<queue_link*> mine_{nullptr};
};

}  // namespace weft::base
