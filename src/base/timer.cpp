#include "weft/base/timer.hpp"

#include <mutex>

namespace weft::base {

namespace detail {

double calibrate_ns_per_cycle(clock_fn wall, clock_fn tsc, std::uint64_t interval_ns) {
  // Both clocks read together at the start and the end of the interval. A
  // thread preempted between the two reads of one end (likely while the
  // processes of a job start on a busy machine) would count the time it was
  // off the CPU on one clock only: a 1 ms preemption made every figure
  // converted with the result 1.5-2x off. So each end is the wall clock read
  // between two TSC reads, the tightest of several such brackets; one in
  // which the thread was preempted is long and loses.
  struct reading {
    std::uint64_t wall, tsc, spread;
  };
  auto read_both = [&] {
    reading best{0, 0, ~std::uint64_t(0)};
    for (int i = 0; i < 32; ++i) {
      const std::uint64_t a = tsc();
      const std::uint64_t w = wall();
      const std::uint64_t b = tsc();
      if (b >= a && b - a < best.spread) best = {w, a + (b - a) / 2, b - a};
    }
    return best;
  };
  const reading r0 = read_both();
  while (wall() - r0.wall < interval_ns) {
  }
  const reading r1 = read_both();
  if (r1.tsc <= r0.tsc || r1.wall <= r0.wall) return 1.0;
  return double(r1.wall - r0.wall) / double(r1.tsc - r0.tsc);
}

}  // namespace detail

double ns_per_cycle() {
  // The TSC is invariant on every x86-64 we run on, so one calibration
  // serves the whole process.
  static double value = detail::calibrate_ns_per_cycle(&wall_ns, &cycles, 2'000'000);
  return value;
}

}  // namespace weft::base
