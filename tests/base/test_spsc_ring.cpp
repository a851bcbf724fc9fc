// spsc_ring: unit tests (capacity rounding, full/empty, wrap-around) and
// stress tests of producer/consumer pairs -- one pair on a small ring, and
// four pairs at once (more threads than cores) -- checked for loss,
// duplication and FIFO order. Threads spin with yield(); no timing asserts.
#include "weft/base/spsc_ring.hpp"

#include <gtest/gtest.h>
#include "test_scale.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace {

using weft_test::sanitized;
// Total items of each stress test: millions normally, fewer under a sanitizer.
constexpr std::size_t stress_items = sanitized ? 200'000 : 2'000'000;

using weft::base::spsc_ring;

TEST(SpscRing, EmptyRingPopsNothing) {
  spsc_ring<int> r(8);
  int v = 42;
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.approx_size(), 0u);
  EXPECT_FALSE(r.try_pop(v));
  EXPECT_EQ(v, 42);  // untouched
}

TEST(SpscRing, CapacityRoundsUpToPowerOfTwo) {
  EXPECT_EQ(spsc_ring<int>(0).capacity(), 2u);
  EXPECT_EQ(spsc_ring<int>(1).capacity(), 2u);
  EXPECT_EQ(spsc_ring<int>(2).capacity(), 2u);
  EXPECT_EQ(spsc_ring<int>(3).capacity(), 4u);
  EXPECT_EQ(spsc_ring<int>(64).capacity(), 64u);
  EXPECT_EQ(spsc_ring<int>(65).capacity(), 128u);
}

TEST(SpscRing, FullRingRejectsPush) {
  spsc_ring<int> r(5);  // 8 slots
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(r.try_push(i));
  EXPECT_FALSE(r.try_push(99));
  EXPECT_EQ(r.approx_size(), 8u);
  int v = -1;
  ASSERT_TRUE(r.try_pop(v));
  EXPECT_EQ(v, 0);
  EXPECT_TRUE(r.try_push(8));  // one slot freed
  EXPECT_FALSE(r.try_push(99));
  for (int i = 1; i <= 8; ++i) {
    ASSERT_TRUE(r.try_pop(v));
    EXPECT_EQ(v, i);
  }
  EXPECT_FALSE(r.try_pop(v));
  EXPECT_TRUE(r.empty());
}

// Indices run far past the capacity; the slot index wraps many times.
TEST(SpscRing, WrapAroundKeepsOrder) {
  spsc_ring<std::uint64_t> r(4);
  std::uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 1000; ++round) {
    const int n = 1 + round % 4;  // 1..4 items per round, so positions vary
    for (int i = 0; i < n; ++i) ASSERT_TRUE(r.try_push(next_in++));
    for (int i = 0; i < n; ++i) {
      std::uint64_t v = 0;
      ASSERT_TRUE(r.try_pop(v));
      ASSERT_EQ(v, next_out++);
    }
  }
  EXPECT_TRUE(r.empty());
}

struct record {
  std::uint32_t producer;
  std::uint32_t check;  // derived from seq: detects torn or stale slots
  std::uint64_t seq;
};

std::uint32_t check_of(std::uint32_t p, std::uint64_t s) {
  return std::uint32_t(s * 2654435761u) ^ (p * 40503u);
}

// `pairs` producer/consumer pairs, each on its own ring, all at once.
void run_pairs(int pairs, std::size_t total, std::size_t capacity) {
  const std::size_t per = total / std::size_t(pairs);
  std::vector<std::unique_ptr<spsc_ring<record>>> rings;
  for (int i = 0; i < pairs; ++i) rings.push_back(std::make_unique<spsc_ring<record>>(capacity));
  std::vector<std::size_t> errors(std::size_t(pairs), 0), received(std::size_t(pairs), 0);
  std::vector<std::thread> threads;
  for (int p = 0; p < pairs; ++p) {
    spsc_ring<record>& r = *rings[std::size_t(p)];
    threads.emplace_back([&r, p, per] {
      for (std::uint64_t s = 0; s < per; ++s) {
        const record rec{std::uint32_t(p), check_of(std::uint32_t(p), s), s};
        while (!r.try_push(rec)) std::this_thread::yield();
      }
    });
    threads.emplace_back([&r, p, per, &errors, &received] {
      std::uint64_t next = 0;
      std::size_t errs = 0;
      while (next < per) {
        record rec;
        if (!r.try_pop(rec)) {
          std::this_thread::yield();
          continue;
        }
        if (rec.producer != std::uint32_t(p) || rec.seq != next ||
            rec.check != check_of(rec.producer, rec.seq))
          ++errs;
        next = rec.seq + 1;
      }
      errors[std::size_t(p)] = errs;
      received[std::size_t(p)] = next;
    });
  }
  for (auto& t : threads) t.join();
  for (int p = 0; p < pairs; ++p) {
    EXPECT_EQ(errors[std::size_t(p)], 0u) << "pair " << p;
    EXPECT_EQ(received[std::size_t(p)], per) << "pair " << p;
    EXPECT_TRUE(rings[std::size_t(p)]->empty());
  }
}

TEST(SpscRing, StressOnePairSmallRing) {
  run_pairs(1, stress_items / 4, 64);
}
TEST(SpscRing, StressFourPairs) {
  run_pairs(4, stress_items, 256);
}

}  // namespace
