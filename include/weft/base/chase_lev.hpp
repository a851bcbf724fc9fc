// Chase-Lev work-stealing deque: the per-PE task deque of the tasks layer.
// The owning PE pushes and pops tasks at the bottom (LIFO, cache-warm, no
// atomic read-modify-write except when taking the last element); idle PEs
// steal the oldest task at the top with one compare-and-swap.
//
// Algorithm and memory orderings: N. M. Lê, A. Pop, A. Cohen, F. Zappa
// Nardelli, "Correct and Efficient Work-Stealing for Weak Memory Models"
// (PPoPP 2013), the C11 version of Chase and Lev's dynamic circular deque
// (SPAA 2005), with three deliberate deviations:
//  - The paper's two seq_cst fences (in take between the bottom store and the
//    top load, in steal between the top load and the bottom load) are written
//    as seq_cst accesses on those same variables. That is the same store-load
//    (Dekker) ordering -- the single total order over the four seq_cst
//    accesses forbids owner and thief both missing the other's update -- and
//    costs the same on x86 (one xchg for the store, plain loads). We do it
//    because ThreadSanitizer does not model fences (GCC warns -Wtsan), so with
//    fences every user of a stolen T* would see false race reports.
//  - The push's release fence + relaxed bottom store is a release store, and
//    the owner's other bottom stores are release (seq_cst for the one above)
//    rather than relaxed: a thief that reads bottom from any owner store then
//    synchronizes with every earlier push, in the C++20 model and in TSan's.
//  - pop() first checks emptiness with a relaxed load of top (top only grows,
//    so a stale value can only under-report emptiness): an idle PE polling its
//    own empty deque pays no fence.
// Buffer slots are std::atomic<T> accessed relaxed, as in the paper: a thief
// may read a slot the owner is overwriting after a wrap-around; it then loses
// the CAS on top and discards the value, but the read must not be a data race.
//
// The circular array grows by doubling when full. Retired arrays are kept
// until the destructor: a thief may still be reading from one, and their
// total size is below the current array's, so memory is at most doubled.
// Rejected: hazard pointers or epochs to free them early -- a per-steal cost
// for memory that is bounded anyway.
//
// steal() may fail spuriously when it loses a race for the top element to
// another thief or the owner; steal(T&) tells that (abort) apart from empty,
// so a thief can retry the same victim on abort and move on when empty.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>
#include "weft/base/cache.hpp"

namespace weft::base {

enum class steal_status {
  success,  // an element was taken
  empty,    // the deque was seen empty
  abort,    // lost a race for the top element; the deque may still hold work
};

template <class T>
class chase_lev {
  static_assert(std::is_trivially_copyable_v<T>, "chase_lev holds trivially copyable values");
  static_assert(std::atomic<T>::is_always_lock_free, "chase_lev slots must be lock-free atomics");

 public:
  // capacity is rounded up to a power of two (at least 2); the deque grows
  // beyond it as needed.
  explicit chase_lev(std::size_t capacity = 64) {
    std::size_t c = 2;
    while (c < capacity) c <<= 1;
    array_.store(new slot_array(c), std::memory_order_relaxed);
  }
  ~chase_lev() { delete array_.load(std::memory_order_relaxed); }
  chase_lev(const chase_lev&) = delete;
  chase_lev& operator=(const chase_lev&) = delete;

  // Owner only; never blocks. May throw std::bad_alloc when the array must
  // grow (the deque is unchanged then).
  void push(T v) {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed);
    const std::int64_t t = top_.load(std::memory_order_acquire);
    slot_array* a = array_.load(std::memory_order_relaxed);
    if (b - t > std::int64_t(a->mask)) a = grow(a, t, b);
    a->store(b, v);
    bottom_.store(b + 1, std::memory_order_release);
  }

  // Owner only; never blocks. Takes the newest element; nullopt when empty
  // (including when a thief won the race for the last element).
  std::optional<T> pop() noexcept {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed) - 1;
    if (top_.load(std::memory_order_relaxed) > b) return std::nullopt;  // empty, no fence
    slot_array* a = array_.load(std::memory_order_relaxed);
    bottom_.store(b, std::memory_order_seq_cst);
    std::int64_t t = top_.load(std::memory_order_seq_cst);
    if (t > b) {  // a thief took the last element meanwhile
      bottom_.store(b + 1, std::memory_order_release);
      return std::nullopt;
    }
    const T v = a->load(b);
    if (t == b) {  // last element: race the thieves for it on top
      const bool won = top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                                    std::memory_order_relaxed);
      bottom_.store(b + 1, std::memory_order_release);
      if (!won) return std::nullopt;
    }
    return v;
  }

  // Any thread; never blocks (lock-free). Takes the oldest element into
  // `out` on success; `out` is untouched otherwise.
  steal_status steal(T& out) noexcept {
    std::int64_t t = top_.load(std::memory_order_seq_cst);
    const std::int64_t b = bottom_.load(std::memory_order_seq_cst);
    if (t >= b) return steal_status::empty;
    slot_array* a = array_.load(std::memory_order_acquire);
    const T v = a->load(t);
    if (!top_.compare_exchange_strong(t, t + 1, std::memory_order_seq_cst,
                                      std::memory_order_relaxed))
      return steal_status::abort;
    out = v;
    return steal_status::success;
  }

  // Any thread. nullopt when empty *or* on a lost race (see steal(T&)).
  std::optional<T> steal() noexcept {
    T v{};
    if (steal(v) == steal_status::success) return v;
    return std::nullopt;
  }

  // Any thread, as a hint.
  std::size_t size_approx() const noexcept {
    const std::int64_t b = bottom_.load(std::memory_order_relaxed);
    const std::int64_t t = top_.load(std::memory_order_relaxed);
    return b > t ? std::size_t(b - t) : 0;
  }
  bool empty() const noexcept { return size_approx() == 0; }

  // Any thread, as a hint: the current array's size.
  std::size_t capacity() const noexcept { return array_.load(std::memory_order_acquire)->mask + 1; }

 private:
  struct slot_array {
    explicit slot_array(std::size_t c) : mask(c - 1), slots(new std::atomic<T>[c]) {}
    T load(std::int64_t i) const noexcept {
      return slots[std::size_t(i) & mask].load(std::memory_order_relaxed);
    }
    void store(std::int64_t i, T v) noexcept {
      slots[std::size_t(i) & mask].store(v, std::memory_order_relaxed);
    }
    const std::size_t mask;
    const std::unique_ptr<std::atomic<T>[]> slots;
  };

  // Owner only: a doubled copy of elements [t, b), published with release so
  // a thief that loads it (acquire) sees the copied slots.
  slot_array* grow(slot_array* a, std::int64_t t, std::int64_t b) {
    auto n = std::make_unique<slot_array>(2 * (a->mask + 1));
    for (std::int64_t i = t; i < b; ++i) n->store(i, a->load(i));
    retired_.emplace_back(a);  // may throw; `a` then stays current
    array_.store(n.get(), std::memory_order_release);
    return n.release();
  }

  // Advanced by thieves' CAS (and the owner's, for the last element); read by
  // all. Alone on its line: every steal writes it.
  alignas(cache_line) std::atomic<std::int64_t> top_{0};
  // Written by the owner only; read by thieves.
  alignas(cache_line) std::atomic<std::int64_t> bottom_{0};
  // Replaced by the owner on growth; read by thieves. Arrays live until ~chase_lev.
  std::atomic<slot_array*> array_{nullptr};
  // Owner-private: arrays replaced by grow(), freed in the destructor.
  std::vector<std::unique_ptr<slot_array>> retired_;
};

}  // namespace weft::base
