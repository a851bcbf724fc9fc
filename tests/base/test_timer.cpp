#include <gtest/gtest.h>

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
  // A sleep of at least 20 ms measured both ways: the calibrated cycle count
  // is not shorter than the sleep (no upper bound: the machine may be loaded).
  std::uint64_t w0 = wb::wall_ns(), c0 = wb::cycles();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::uint64_t w1 = wb::wall_ns(), c1 = wb::cycles();
  EXPECT_GE(w1 - w0, 20'000'000u);
  EXPECT_GE(wb::cycles_to_ns(c1 - c0), 0.9 * 20e6);
  EXPECT_NEAR(wb::cycles_to_ns(c1 - c0) / double(w1 - w0), 1.0, 0.1);
}
