// Bounded single-producer / single-consumer ring of trivially copyable values
// (Lamport's queue with cached indices). Each side keeps a private copy of the
// other side's index and re-reads the shared one only when its copy says the
// ring is full (producer) or empty (consumer), so in steady state each
// operation touches one shared line. Used by the spsc-pairs PE queue.
#pragma once
#include <atomic>
#include <cstddef>
#include <memory>
#include <type_traits>
#include "weft/base/cache.hpp"

namespace weft::base {

template <class T>
class spsc_ring {
  static_assert(std::is_trivially_copyable_v<T>, "spsc_ring holds trivially copyable values");

 public:
  // capacity is rounded up to a power of two (at least 2).
  explicit spsc_ring(std::size_t capacity) {
    std::size_t c = 2;
    while (c < capacity) c <<= 1;
    mask_ = c - 1;
    slots_ = std::make_unique<T[]>(c);
  }
  spsc_ring(const spsc_ring&) = delete;
  spsc_ring& operator=(const spsc_ring&) = delete;

  std::size_t capacity() const noexcept { return mask_ + 1; }

  // Producer only. False when full.
  bool try_push(const T& v) noexcept {
    const std::size_t t = tail_.load(std::memory_order_relaxed);
    if (t - head_cache_ > mask_) {
      head_cache_ = head_.load(std::memory_order_acquire);
      if (t - head_cache_ > mask_) return false;
    }
    slots_[t & mask_] = v;
    tail_.store(t + 1, std::memory_order_release);
    return true;
  }

  // Consumer only. False when empty.
  bool try_pop(T& out) noexcept {
    const std::size_t h = head_.load(std::memory_order_relaxed);
    if (h == tail_cache_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (h == tail_cache_) return false;
    }
    out = slots_[h & mask_];
    head_.store(h + 1, std::memory_order_release);
    return true;
  }

  // Any thread, as a hint.
  bool empty() const noexcept {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }
  std::size_t approx_size() const noexcept {
    // head first: a tail read after it is never behind it, so no wrap-around.
    const std::size_t h = head_.load(std::memory_order_acquire);
    return tail_.load(std::memory_order_acquire) - h;
  }

 private:
  std::size_t mask_ = 0;
  std::unique_ptr<T[]> slots_;
  // Consumer-owned line: its index and its cache of the producer's.
  alignas(cache_line) std::atomic<std::size_t> head_{0};
  std::size_t tail_cache_ = 0;
  // Producer-owned line.
  alignas(cache_line) std::atomic<std::size_t> tail_{0};
  std::size_t head_cache_ = 0;
};

}  // namespace weft::base
