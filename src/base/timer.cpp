#include "weft/base/timer.hpp"

#include <mutex>

namespace weft::base {

double ns_per_cycle() {
  static double value = [] {
    // Two reads of both clocks ~2 ms apart. The TSC is invariant on every
    // x86-64 we run on, so one calibration serves the whole process.
    std::uint64_t w0 = wall_ns(), c0 = cycles();
    std::uint64_t w1 = w0;
    while (w1 - w0 < 2'000'000) w1 = wall_ns();
    std::uint64_t c1 = cycles();
    return c1 > c0 ? double(w1 - w0) / double(c1 - c0) : 1.0;
  }();
  return value;
}

}  // namespace weft::base
