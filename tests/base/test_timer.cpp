#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include "weft/base/timer.hpp"

namespace wb = weft::base;

TEST(Timer, WallClockIsMonotonic) {
  std::uint64_t last = wb::wall_ns();
  for (int i = 0; i < 100000; ++i) {
    std::uint64_t now = wb::wall_ns();
    ASSERT_GE(now, last);
    last = now;
  }
}

TEST(Timer, CyclesAreCalibratedAgainstTheWallClock) {
  const double k = wb::ns_per_cycle();
  EXPECT_GT(k, 0.0);
  // The wall clock's reads bracket the cycle counter's, which bracket a sleep
  // of at least 20 ms:  w0, c0, sleep, c1, w1.  So the cycles, converted,
  // are at least the sleep and at most the wall interval: bounds that a
  // preemption anywhere only widens (a loaded machine cannot make this
  // fail). 10% slack on either side for the calibration itself.
  const std::uint64_t w0 = wb::wall_ns(), c0 = wb::cycles();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::uint64_t c1 = wb::cycles(), w1 = wb::wall_ns();
  ASSERT_GT(c1, c0);
  EXPECT_GE(w1 - w0, 20'000'000u);
  const double cycles_ns = wb::cycles_to_ns(c1 - c0);
  EXPECT_GE(cycles_ns, 0.9 * 20e6);
  EXPECT_LE(cycles_ns, 1.1 * double(w1 - w0));
}

// Fake clocks for the calibration: time advances 10 ns per read, the TSC
// ticks 3 times per ns, and one chosen read finds the thread back from a
// 1 ms preemption (both clocks jumped).
namespace fake {
std::uint64_t now_ns = 1'000'000;
long reads = 0, preempted_at = -1;
std::uint64_t advance() {
  now_ns += 10;
  if (reads++ == preempted_at) now_ns += 1'000'000;
  return now_ns;
}
std::uint64_t wall() { return advance(); }
std::uint64_t tsc() { return advance() * 3; }
}  // namespace fake

TEST(Timer, CalibrationIgnoresAPreemptionBetweenTheClockReads) {
  // Reads 0-2 are the first bracket (tsc, wall, tsc) at the start; the end's
  // first bracket begins after the interval. Preempted between the wall read
  // and the TSC read of either end, or not at all, the result is exact.
  for (long at : {-1L, 1L, 2L, 40L}) {
    fake::now_ns = 1'000'000;
    fake::reads = 0;
    fake::preempted_at = at;
    const double k = wb::detail::calibrate_ns_per_cycle(&fake::wall, &fake::tsc, 2'000'000);
    EXPECT_NEAR(k, 1.0 / 3.0, 1e-4) << "preempted at read " << at;
  }
  // The end: find where its brackets start (after the interval loop), and
  // preempt inside its first bracket.
  fake::now_ns = 1'000'000;
  fake::reads = 0;
  fake::preempted_at = -1;
  wb::detail::calibrate_ns_per_cycle(&fake::wall, &fake::tsc, 2'000'000);
  const long total = fake::reads;
  const long end_first_bracket = total - 32 * 3 + 1;  // its wall read
  fake::now_ns = 1'000'000;
  fake::reads = 0;
  fake::preempted_at = end_first_bracket;
  EXPECT_NEAR(wb::detail::calibrate_ns_per_cycle(&fake::wall, &fake::tsc, 2'000'000), 1.0 / 3.0,
              1e-4);
}
