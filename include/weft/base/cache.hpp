// Cache-line facts and a padding helper. PE-private state lives in
// thread_local or in structures padded to a line, never in arrays indexed by
// PE that neighbours write to (lesson 4 of DESIGN.md).
#pragma once
#include <cstddef>

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

// A spin-wait hint: tells the core it is spinning (pause on x86).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace weft::base
