// A consumer's array of per-producer SPSC rings: the queue the Charm++ SMP
// paper (seed 000, section 3.2) used to remove producer locks, at the price of
// the consumer polling one ring per producer. Selectable against mpsc_queue
// with --weft:queue=spsc-pairs so the trade-off can be measured here.
//
// Producers 0..n-1 are the PEs of the node; each may only push into its own
// slot (producer id = its PE rank). A ring is allocated by its producer on
// first use and published with a release store, so a node of N PEs that talk
// to few neighbours does not pay N^2 rings up front.
//
// Bounded rings never drop: when a producer's ring is full, its elements go
// to a producer-private overflow list, flushed in order on its next push or
// flush() call, which keeps per-producer FIFO order. The owner of that
// overflow must keep calling flush() (core does it each scheduler turn, and a
// PE with pending overflow yields but never sleeps).
#pragma once
#include <atomic>
#include <cstddef>
#include <deque>
#include <memory>
#include <type_traits>
#include <vector>
#include "weft/base/cache.hpp"
#include "weft/base/spsc_pointer_ring.hpp"
#include "weft/base/spsc_ring.hpp"

namespace weft::base {

template <class T>
class spsc_pairs {
  // Pointers (core's messages) go in rings whose consumer polls only the
  // slot; other values in Lamport rings.
  using ring_type = std::conditional_t<std::is_pointer_v<T>,
                                       spsc_pointer_ring<std::remove_pointer_t<T>>, spsc_ring<T>>;

 public:
  spsc_pairs(int producers, std::size_t ring_capacity)
      : capacity_(ring_capacity), slots_(std::size_t(producers)) {}
  ~spsc_pairs() {
    for (auto& s : slots_) delete s->ring.load(std::memory_order_relaxed);
  }
  spsc_pairs(const spsc_pairs&) = delete;
  spsc_pairs& operator=(const spsc_pairs&) = delete;

  int producers() const noexcept { return int(slots_.size()); }

  // Producer `p` only. Never fails (overflows into p's private list).
  void push(int p, const T& v) {
    slot& s = *slots_[std::size_t(p)];
    ring_type* r = s.ring.load(std::memory_order_relaxed);
    if (r == nullptr) {
      r = new ring_type(capacity_);
      s.ring.store(r, std::memory_order_release);
    }
    if (!s.overflow.empty()) {
      flush_slot(s, r);
      if (!s.overflow.empty()) {
        s.overflow.push_back(v);
        return;
      }
    }
    if (!r->try_push(v)) s.overflow.push_back(v);
  }

  // Producer `p` only: moves what overflowed into the ring as space allows.
  // Returns true when nothing of p's is left waiting.
  bool flush(int p) {
    slot& s = *slots_[std::size_t(p)];
    if (s.overflow.empty()) return true;
    flush_slot(s, s.ring.load(std::memory_order_relaxed));
    return s.overflow.empty();
  }

  // Producer `p` only: whether p has elements waiting in its overflow list,
  // and how many.
  bool has_overflow(int p) const { return !slots_[std::size_t(p)]->overflow.empty(); }
  std::size_t overflow_size(int p) const { return slots_[std::size_t(p)]->overflow.size(); }

  // Consumer only. Polls the rings round-robin from where it last found one.
  bool try_pop(T& out) noexcept {
    const std::size_t n = slots_.size();
    for (std::size_t i = 0; i < n; ++i) {
      std::size_t k = next_ + i;
      if (k >= n) k -= n;
      ring_type* r = slots_[k]->ring.load(std::memory_order_acquire);
      if (r != nullptr && r->try_pop(out)) {
        next_ = k + 1 == n ? 0 : k + 1;  // round-robin: no producer starves the others
        return true;
      }
    }
    return false;
  }

  // Consumer only, rings of pointers only: the element try_pop would take
  // next, left in place (null: none).
  T peek() const noexcept requires std::is_pointer_v<T> {
    const std::size_t n = slots_.size();
    for (std::size_t i = 0; i < n; ++i) {
      std::size_t k = next_ + i;
      if (k >= n) k -= n;
      ring_type* r = slots_[k]->ring.load(std::memory_order_acquire);
      if (r != nullptr) {
        if (T p = r->peek()) return p;
      }
    }
    return nullptr;
  }

  // Hands every element still held (rings and overflow lists) to `f`. Only
  // when no producer or consumer runs (shutdown).
  template <class F>
  void drain_quiescent(F&& f) {
    for (auto& s : slots_) {
      if (ring_type* r = s->ring.load(std::memory_order_acquire)) {
        T v;
        while (r->try_pop(v)) f(v);
      }
      for (auto& v : s->overflow) f(v);
      s->overflow.clear();
    }
  }

  // Any thread, as a hint (overflow lists are not counted: their producers
  // stay awake until they are flushed).
  bool empty() const noexcept {
    for (auto& s : slots_) {
      ring_type* r = s->ring.load(std::memory_order_acquire);
      if (r != nullptr && !r->empty()) return false;
    }
    return true;
  }
  std::size_t approx_size() const noexcept {
    std::size_t total = 0;
    for (auto& s : slots_)
      if (ring_type* r = s->ring.load(std::memory_order_acquire)) total += r->approx_size();
    return total;
  }

 private:
  struct slot {
    std::atomic<ring_type*> ring{nullptr};  // written once by the producer
    std::deque<T> overflow;                 // producer-private
  };
  static void flush_slot(slot& s, ring_type* r) {
    while (!s.overflow.empty() && r->try_push(s.overflow.front())) s.overflow.pop_front();
  }

  std::size_t capacity_;
  std::vector<padded<slot>> slots_;
  // Consumer-private, on a line of its own: producers read slots_ at every
  // push, and a store of next_ beside it would take that line from them.
  alignas(cache_line) std::size_t next_ = 0;
};

}  // namespace weft::base
