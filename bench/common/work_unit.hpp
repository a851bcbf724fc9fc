// The calibrated unit of work the imbalance benchmarks share
// (bench/tasks/imbalance.cpp, bench/lb/imbalance.cpp): `work` steps of the
// logistic map on 16 doubles, then a hash of them. Floating-point work, not
// a sleep, so a PE that runs it is busy as an application's would be.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>
#include "weft/base/timer.hpp"

namespace weft::bench {

inline constexpr int unit_len = 16;  // doubles per unit

// noinline: every configuration runs these very instructions (no
// contraction or vectorisation that differs by call site), so results
// compare bit for bit.
[[gnu::noinline]] inline std::uint64_t compute_unit(double* x, long work) {
  for (long s = 0; s < work; ++s)
    for (int j = 0; j < unit_len; ++j) x[j] = 3.9 * x[j] * (1.0 - x[j]);
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (int j = 0; j < unit_len; ++j) {
    std::uint64_t b = 0;
    std::memcpy(&b, &x[j], sizeof b);
    h = (h ^ b) * 0x100000001b3ull;
  }
  return h;
}

inline std::uint64_t mix(std::uint64_t k) {  // splitmix64's finaliser
  k += 0x9e3779b97f4a7c15ull;
  k = (k ^ (k >> 30)) * 0xbf58476d1ce4e5b9ull;
  k = (k ^ (k >> 27)) * 0x94d049bb133111ebull;
  return k ^ (k >> 31);
}

// Start values of unit `u` of element `e`: distinct, in [0.1, 0.9).
inline void init_unit(double* x, long e, long u) {
  for (int j = 0; j < unit_len; ++j) {
    const std::uint64_t k =
        mix((std::uint64_t(e) << 40) ^ (std::uint64_t(u) << 8) ^ std::uint64_t(j));
    x[j] = 0.1 + 0.8 * double(k >> 11) * 0x1p-53;
  }
}

// Times one unit of `work` serially on the calling thread: 5 batches of 64
// units, µs per unit of each batch appended to `out`; `sink` keeps the
// results observable.
inline void time_unit(long work, std::vector<double>& out, std::uint64_t& sink) {
  constexpr int batch = 64;
  std::vector<double> x(std::size_t(batch) * unit_len);
  for (int u = 0; u < batch; ++u) init_unit(&x[std::size_t(u) * unit_len], -1, u);
  for (int b = 0; b < 5; ++b) {
    const std::uint64_t t0 = weft::base::wall_ns();
    for (int u = 0; u < batch; ++u) sink += compute_unit(&x[std::size_t(u) * unit_len], work);
    out.push_back(double(weft::base::wall_ns() - t0) * 1e-3 / batch);
  }
}

}  // namespace weft::bench
