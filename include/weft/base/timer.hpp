// Time. wall_ns() is the monotonic wall clock (ns resolution, ~20 ns per
// call through the vDSO); cycles() is the CPU's time-stamp counter (a few ns),
// calibrated once against wall_ns() so hot paths can time themselves cheaply
// and convert afterwards.
#pragma once
#include <cstdint>
#include <ctime>
#include "weft/base/export.hpp"

namespace weft::base {

// Monotonic nanoseconds since an arbitrary origin. Any thread, never blocks.
inline std::uint64_t wall_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000ull + std::uint64_t(ts.tv_nsec);
}

// Raw cycle counter (invariant TSC on x86-64; wall_ns() elsewhere).
inline std::uint64_t cycles() {
#if defined(__x86_64__)
  return __builtin_ia32_rdtsc();
#else
  return wall_ns();
#endif
}

// Nanoseconds per cycles() tick, measured on first use (~2 ms, once per
// process; thread-safe). Call once at startup to keep it off hot paths.
WEFT_API double ns_per_cycle();

namespace detail {
using clock_fn = std::uint64_t (*)();
// ns_per_cycle's measurement with the clocks passed in (tests give it clocks
// that jump the way a preempted thread sees them): wall ns over `tsc` ticks
// across `interval_ns`.
WEFT_API double calibrate_ns_per_cycle(clock_fn wall, clock_fn tsc, std::uint64_t interval_ns);
}  // namespace detail

inline double cycles_to_ns(std::uint64_t c) {
  return double(c) * ns_per_cycle();
}

}  // namespace weft::base
