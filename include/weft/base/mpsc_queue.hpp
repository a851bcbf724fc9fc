// Intrusive multi-producer / single-consumer queue (D. Vyukov's node-based
// design). The PE message queue of DESIGN.md: any thread pushes, only the
// owning PE pops.
//
// Why this design: a producer does one atomic exchange and one store, so
// producers are wait-free and never contend on more than one line; the
// consumer reads plain links and needs an atomic read-modify-write only when
// it takes the last element (it re-inserts the stub node). The Charm++ SMP
// paper (seed 000) found locked producer queues a bottleneck and per-pair
// queues costly to poll; both alternatives exist here so they can be measured.
//
// The element embeds a queue_link; it must stay alive until popped.
// FIFO per producer; between producers, in order of their exchanges.
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
  mpsc_queue() : head_(&stub_), tail_(&stub_) {}
  mpsc_queue(const mpsc_queue&) = delete;
  mpsc_queue& operator=(const mpsc_queue&) = delete;

  // Any thread; wait-free. Full barrier (the exchange), which the wake-up
  // protocol of core relies on.
  void push(queue_link* n) noexcept {
    n->next.store(nullptr, std::memory_order_relaxed);
    // seq_cst: a producer then reads the consumer's sleep flag (Dekker-style
    // wake-up protocol in core); on x86 it is the same xchg instruction.
    queue_link* prev = head_.exchange(n, std::memory_order_seq_cst);
    prev->next.store(n, std::memory_order_release);
  }

  // Consumer only. Returns nullptr when empty, or when the only element's
  // producer is between its exchange and its link store (then empty() is
  // false, so the consumer keeps polling instead of sleeping).
  queue_link* pop() noexcept {
    queue_link* tail = tail_.load(std::memory_order_relaxed);
    queue_link* next = tail->next.load(std::memory_order_acquire);
    if (tail == &stub_) {
      if (next == nullptr) return nullptr;
      tail_.store(next, std::memory_order_relaxed);
      tail = next;
      next = next->next.load(std::memory_order_acquire);
    }
    if (next != nullptr) {
      tail_.store(next, std::memory_order_relaxed);
      return tail;
    }
    if (tail != head_.load(std::memory_order_acquire)) return nullptr;  // producer mid-push
    push(&stub_);
    next = tail->next.load(std::memory_order_acquire);
    if (next != nullptr) {
      tail_.store(next, std::memory_order_relaxed);
      return tail;
    }
    return nullptr;
  }

  // Consumer, or any thread as a hint. False while an element is in flight.
  // tail_ is either the stub or the next element to return, so the queue is
  // empty only when tail_ is the stub, with no successor, and no producer has
  // exchanged head_ since. (Dereferences only the stub: safe from any thread.)
  bool empty() const noexcept {
    const queue_link* tail = tail_.load(std::memory_order_relaxed);
    return tail == &stub_ && tail->next.load(std::memory_order_acquire) == nullptr &&
           head_.load(std::memory_order_acquire) == tail;
  }

  // Approximate length for diagnostics (the watchdog's dump); walks at most
  // `cap` links. Consumer, or any thread when the consumer is stalled.
  std::size_t approx_size(std::size_t cap = 1u << 20) const noexcept {
    std::size_t n = 0;
    for (queue_link* p = tail_.load(std::memory_order_relaxed); p != nullptr && n < cap;
         p = p->next.load(std::memory_order_acquire))
      if (p != &stub_) ++n;
    return n;
  }

 private:
  // Written by every producer.
  alignas(cache_line) std::atomic<queue_link*> head_;
  // Owned by the consumer (atomic only so the diagnostic walk is race-free;
  // relaxed accesses cost nothing more than plain ones).
  alignas(cache_line) std::atomic<queue_link*> tail_;
  queue_link stub_;
};

}  // namespace weft::base
