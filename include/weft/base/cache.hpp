// Cache-line facts and a padding helper. PE-private state lives in
// thread_local or in structures padded to a line, never in arrays indexed by
// PE that neighbours write to (lesson 4 of DESIGN.md).
#pragma once
#include <atomic>
#include <cstddef>
#include <new>

namespace weft::base {

// 64 bytes on every x86-64 and most Arm cores we target; a constant rather than
// std::hardware_destructive_interference_size, whose value GCC warns may
// differ between translation units compiled with different -mtune.
inline constexpr std::size_t cache_line = 64;

// A T alone on its cache line(s).
template <class T>
struct alignas(cache_line) padded {
  T value{};
  T& operator*() { return value; }
  const T& operator*() const { return value; }
  T* operator->() { return &value; }
  const T* operator->() const { return &value; }
};

// An allocator whose blocks start on a line and fill whole lines: for a
// vector that every PE reads on its hot path (the node's PE table), which
// must not share a line with whatever malloc puts next to it (a neighbour's
// writes there would cost every reader a miss).
template <class T>
struct line_allocator {
  using value_type = T;
  line_allocator() = default;
  template <class U>
  line_allocator(const line_allocator<U>&) noexcept {}
  static std::size_t bytes(std::size_t n) noexcept {
    return (n * sizeof(T) + cache_line - 1) / cache_line * cache_line;
  }
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(bytes(n), std::align_val_t(cache_line)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    ::operator delete(p, bytes(n), std::align_val_t(cache_line));
  }
  template <class U>
  bool operator==(const line_allocator<U>&) const noexcept {
    return true;
  }
};

// A spin-wait hint: tells the core it is spinning (pause on x86).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Asks for the line at `p` in the exclusive state, ahead of a write to it
// (prefetchw on x86): a line that another core wrote last then moves once,
// owned, instead of once to read and again to upgrade at the first store.
// Emitted as the instruction itself: without -mprfchw GCC turns
// __builtin_prefetch(p, 1) into a prefetch for reading. Every x86-64 core
// decodes 0F 0D; those that do not report PRFCHW (Intel before Broadwell)
// run it as a no-op.
inline void prefetch_for_write(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1);
#endif
}

// A sequentially consistent fence, for Dekker-style store-then-load protocols
// (the PE wake-up in core). ThreadSanitizer does not model fences and GCC
// warns about them under -fsanitize=thread; that is harmless here because no
// data is published through a fence — messages are published by the queues'
// release/acquire pairs, which TSan sees — the fence only makes a wake-up
// impossible to miss.
inline void full_fence() {
#pragma GCC diagnostic push
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wtsan"
#endif
  std::atomic_thread_fence(std::memory_order_seq_cst);
#pragma GCC diagnostic pop
}

}  // namespace weft::base
