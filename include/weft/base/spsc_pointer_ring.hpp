// Bounded single-producer / single-consumer ring of pointers in which the
// consumer learns of a new element from its slot alone: each slot holds the
// pointer with the parity of its lap round the ring in the low bit, so a
// slot written in the consumer's current lap is new and one left from the
// previous lap is not. The producer's index is never read on the fast path,
// and the consumer never writes a slot.
//
// Why not spsc_ring (Lamport, cached indices) for pointers: its consumer
// finds an element by reading the producer's index, so a message to a
// consumer polling an empty ring moves two lines between the cores (the
// index, then the slot); here it moves one (the slot). The consumer's index
// is stored on its own line at every pop but read by the producer only when
// its cached copy says the ring is full, so that line stays put too. This is
// the queue of --weft:queue=spsc-pairs (core's PE-to-PE messages).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "weft/base/cache.hpp"

namespace weft::base {

template <class T>
class spsc_pointer_ring {
  static_assert(alignof(T) >= 2, "the low bit of each pointer carries the slot's lap");

 public:
  // capacity is rounded up to a power of two (at least 2).
  explicit spsc_pointer_ring(std::size_t capacity) {
    std::size_t c = 2;
    int shift = 1;
    while (c < capacity) {
      c <<= 1;
      ++shift;
    }
    mask_ = c - 1;
    lap_shift_ = shift;
    slots_ = std::make_unique<std::atomic<std::uintptr_t>[]>(c);  // value-initialised: 0
  }
  spsc_pointer_ring(const spsc_pointer_ring&) = delete;
  spsc_pointer_ring& operator=(const spsc_pointer_ring&) = delete;

  std::size_t capacity() const noexcept { return mask_ + 1; }

  // Producer only; p must not be null. False when full.
  bool try_push(T* p) noexcept {
    const std::size_t t = tail_.load(std::memory_order_relaxed);
    if (t - head_cache_ > mask_) {
      head_cache_ = head_.load(std::memory_order_acquire);
      if (t - head_cache_ > mask_) return false;
    }
    // Release: what p points to is written before the consumer can see p.
    slots_[t & mask_].store(reinterpret_cast<std::uintptr_t>(p) | lap_bit(t),
                            std::memory_order_release);
    tail_.store(t + 1, std::memory_order_relaxed);  // for approx_size only
    return true;
  }

  // Consumer only. False when empty.
  bool try_pop(T*& out) noexcept {
    const std::size_t h = head_.load(std::memory_order_relaxed);
    const std::uintptr_t v = slots_[h & mask_].load(std::memory_order_acquire);
    if (!is_current(v, h)) return false;
    out = reinterpret_cast<T*>(v & ~std::uintptr_t(1));
    // Release: this slot has been read before the producer may reuse it.
    head_.store(h + 1, std::memory_order_release);
    return true;
  }

  // Consumer only: the element try_pop would return, left in place (null
  // when empty), so that the consumer can start fetching what it points to
  // before it gets round to the pop.
  T* peek() const noexcept {
    const std::size_t h = head_.load(std::memory_order_relaxed);
    const std::uintptr_t v = slots_[h & mask_].load(std::memory_order_acquire);
    return is_current(v, h) ? reinterpret_cast<T*>(v & ~std::uintptr_t(1)) : nullptr;
  }

  // Any thread, as a hint; exact for the consumer.
  bool empty() const noexcept {
    const std::size_t h = head_.load(std::memory_order_acquire);
    return !is_current(slots_[h & mask_].load(std::memory_order_acquire), h);
  }

  // Any thread, as a hint (the producer's index is published relaxed).
  std::size_t approx_size() const noexcept {
    const std::size_t h = head_.load(std::memory_order_acquire);
    const std::size_t t = tail_.load(std::memory_order_relaxed);
    return t > h ? t - h : 0;
  }

 private:
  // Slots start at 0 and a written slot is never 0 (p is not null), so lap 0
  // (bit 0) needs no separate "written" mark.
  std::uintptr_t lap_bit(std::size_t pos) const noexcept { return (pos >> lap_shift_) & 1; }
  bool is_current(std::uintptr_t v, std::size_t pos) const noexcept {
    return v != 0 && (v & 1) == lap_bit(pos);
  }

  std::size_t mask_ = 0;
  int lap_shift_ = 1;
  std::unique_ptr<std::atomic<std::uintptr_t>[]> slots_;
  // Consumer-owned line: its index (read by the producer only when full).
  alignas(cache_line) std::atomic<std::size_t> head_{0};
  // Producer-owned line: its index and its cache of the consumer's.
  alignas(cache_line) std::atomic<std::size_t> tail_{0};
  std::size_t head_cache_ = 0;
};

}  // namespace weft::base
