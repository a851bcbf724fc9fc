// Asymmetric fences (base/fence.hpp): the store-buffering litmus test. Two
// threads each store to their own variable, fence, and load the other's;
// on x86 (and everywhere) both loads may read 0 unless the fences order
// store before load. With light_fence on one side and heavy_fence on the
// other that outcome must never occur, with membarrier as with full fences.
// (With a compiler barrier as the heavy side it showed up 5 times in 2,000
// rounds on a 2-core machine: the test can fail.)
#include "weft/base/fence.hpp"

#include <gtest/gtest.h>
#include "test_scale.hpp"

#include <atomic>
#include <cstdint>
#include <thread>

namespace {

using namespace weft::base;

struct litmus {
  alignas(cache_line) std::atomic<int> x{0};
  alignas(cache_line) std::atomic<int> y{0};
  alignas(cache_line) std::atomic<long> go{-1};    // round the light side may start
  alignas(cache_line) std::atomic<long> done{-1};  // round the light side finished
  int r_light = 0;
};

// Spins (the two sides must run at the same time for the race to happen),
// yielding now and then so that a loaded machine still gets through.
template <class Ready>
void wait_until(Ready ready) {
  for (unsigned spins = 1; !ready(); ++spins) {
    if (spins % 1024 == 0)
      std::this_thread::yield();
    else
      cpu_relax();
  }
}

// Rounds of the litmus test, the calling thread the heavy side; returns how
// often both loads read 0.
long both_missed(long rounds) {
  litmus t;
  long missed = 0;
  std::thread light([&] {
    for (long i = 0; i < rounds; ++i) {
      wait_until([&] { return t.go.load(std::memory_order_acquire) == i; });
      t.x.store(1, std::memory_order_relaxed);
      light_fence();
      t.r_light = t.y.load(std::memory_order_relaxed);
      t.done.store(i, std::memory_order_release);
    }
  });
  for (long i = 0; i < rounds; ++i) {
    t.x.store(0, std::memory_order_relaxed);
    t.y.store(0, std::memory_order_relaxed);
    t.go.store(i, std::memory_order_release);
    t.y.store(1, std::memory_order_relaxed);
    heavy_fence();
    const int r_heavy = t.x.load(std::memory_order_relaxed);
    wait_until([&] { return t.done.load(std::memory_order_acquire) == i; });
    if (t.r_light == 0 && r_heavy == 0) ++missed;
  }
  light.join();
  return missed;
}

constexpr long rounds = weft_test::sanitized ? 5'000 : 20'000;

TEST(AsymmetricFence, MembarrierNeverLetsBothSidesMiss) {
  const char* why = enable_asymmetric_fences();
  if (*why != '\0') GTEST_SKIP() << "membarrier not available here: " << why;
  EXPECT_TRUE(asymmetric_fences_enabled());
  EXPECT_EQ(both_missed(rounds), 0);
  disable_asymmetric_fences();
}

TEST(AsymmetricFence, FullFencesNeverLetBothSidesMiss) {
  disable_asymmetric_fences();
  EXPECT_FALSE(asymmetric_fences_enabled());
  EXPECT_EQ(both_missed(rounds), 0);
}

TEST(AsymmetricFence, EnableReportsAReasonOrSucceeds) {
  const char* why = enable_asymmetric_fences();
  ASSERT_NE(why, nullptr);
  EXPECT_EQ(*why == '\0', asymmetric_fences_enabled()) << why;
  disable_asymmetric_fences();
  EXPECT_FALSE(asymmetric_fences_enabled());
}

}  // namespace
