// spsc_pointer_ring: unit tests (capacity, full/empty, the lap bit over
// many laps, a consumer that never writes a slot, peek) and stress tests of
// producer/consumer pairs checked for loss, duplication and FIFO order, one
// pair on a ring of 4 slots (a lap every 4 elements, so a stale slot of the
// last lap is read as new if the lap bit is wrong) and four pairs at once
// (more threads than cores). Threads spin with yield(); no timing asserts.
#include "weft/base/spsc_pointer_ring.hpp"

#include <gtest/gtest.h>
#include "test_scale.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace {

using weft::base::spsc_pointer_ring;
using weft_test::sanitized;
constexpr std::size_t stress_items = sanitized ? 200'000 : 2'000'000;

struct alignas(8) item {
  std::uint64_t seq = 0;
  std::uint32_t producer = 0;
  std::uint32_t check = 0;  // derived from seq: detects a stale or torn element
};

std::uint32_t check_of(std::uint32_t p, std::uint64_t s) {
  return std::uint32_t(s * 2654435761u) ^ (p * 40503u);
}

TEST(SpscPointerRing, EmptyRingPopsNothing) {
  spsc_pointer_ring<item> r(8);
  item* out = nullptr;
  EXPECT_TRUE(r.empty());
  EXPECT_EQ(r.approx_size(), 0u);
  EXPECT_FALSE(r.try_pop(out));
  EXPECT_EQ(out, nullptr);
}

TEST(SpscPointerRing, CapacityRoundsUpToPowerOfTwo) {
  EXPECT_EQ(spsc_pointer_ring<item>(0).capacity(), 2u);
  EXPECT_EQ(spsc_pointer_ring<item>(2).capacity(), 2u);
  EXPECT_EQ(spsc_pointer_ring<item>(3).capacity(), 4u);
  EXPECT_EQ(spsc_pointer_ring<item>(1024).capacity(), 1024u);
  EXPECT_EQ(spsc_pointer_ring<item>(1025).capacity(), 2048u);
}

TEST(SpscPointerRing, FullRingRejectsPushUntilOnePops) {
  std::vector<item> items(9);
  spsc_pointer_ring<item> r(8);
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(r.try_push(&items[std::size_t(i)]));
  EXPECT_FALSE(r.try_push(&items[8]));
  EXPECT_EQ(r.approx_size(), 8u);
  item* out = nullptr;
  ASSERT_TRUE(r.try_pop(out));
  EXPECT_EQ(out, &items[0]);
  EXPECT_TRUE(r.try_push(&items[8]));
  for (int i = 1; i <= 8; ++i) {
    ASSERT_TRUE(r.try_pop(out));
    EXPECT_EQ(out, &items[std::size_t(i)]);
  }
  EXPECT_FALSE(r.try_pop(out));
  EXPECT_TRUE(r.empty());
}

// After the consumer empties the ring, every slot still holds the pointer of
// the last lap: with one element per lap position at a time, each pop must
// see exactly the element pushed for it, lap after lap (the same pointer
// pushed again one lap later must not be taken for new before it is pushed).
TEST(SpscPointerRing, SlotsOfTheLastLapAreNotNew) {
  item a, b;
  spsc_pointer_ring<item> r(2);
  item* out = nullptr;
  for (int lap = 0; lap < 64; ++lap) {
    for (int slot = 0; slot < 2; ++slot) {
      EXPECT_FALSE(r.try_pop(out)) << "lap " << lap << " slot " << slot;
      EXPECT_TRUE(r.empty());
      ASSERT_TRUE(r.try_push(slot == 0 ? &a : &b));
      EXPECT_FALSE(r.empty());
      ASSERT_TRUE(r.try_pop(out));
      EXPECT_EQ(out, slot == 0 ? &a : &b);
    }
  }
  EXPECT_FALSE(r.try_pop(out));
}

TEST(SpscPointerRing, WrapAroundKeepsOrder) {
  std::vector<item> items(4);
  spsc_pointer_ring<item> r(4);
  std::size_t next_in = 0, next_out = 0;
  for (int round = 0; round < 1000; ++round) {
    const int n = 1 + round % 4;  // 1..4 per round, so the laps start at every slot
    for (int i = 0; i < n; ++i) ASSERT_TRUE(r.try_push(&items[next_in++ % 4]));
    EXPECT_EQ(r.approx_size(), std::size_t(n));
    for (int i = 0; i < n; ++i) {
      item* out = nullptr;
      ASSERT_TRUE(r.try_pop(out));
      ASSERT_EQ(out, &items[next_out++ % 4]);
    }
    item* out = nullptr;
    ASSERT_FALSE(r.try_pop(out));
  }
  EXPECT_TRUE(r.empty());
}

TEST(SpscPointerRing, PeekShowsWhatPopTakesAndLeavesIt) {
  std::vector<item> items(3);
  spsc_pointer_ring<item> r(2);  // a lap every 2 elements: peek must read the lap bit too
  item* out = nullptr;
  for (int round = 0; round < 100; ++round) {
    EXPECT_EQ(r.peek(), nullptr) << "round " << round;
    ASSERT_TRUE(r.try_push(&items[std::size_t(round % 3)]));
    EXPECT_EQ(r.peek(), &items[std::size_t(round % 3)]);
    EXPECT_EQ(r.peek(), &items[std::size_t(round % 3)]);  // still there
    EXPECT_EQ(r.approx_size(), 1u);
    ASSERT_TRUE(r.try_pop(out));
    EXPECT_EQ(out, &items[std::size_t(round % 3)]);
  }
  EXPECT_EQ(r.peek(), nullptr);
}

// `pairs` producer/consumer pairs, each on its own ring. Each producer owns
// a pool of items larger than the ring and reuses an item only after its
// consumer has acknowledged it, so each pointer goes round the ring many
// times with new contents. The consumer stops at the first wrong element
// (and the producer with it), so a broken ring fails instead of hanging.
void run_pairs(int pairs, std::size_t total, std::size_t capacity) {
  const std::size_t per = total / std::size_t(pairs);
  struct pair_state {
    explicit pair_state(std::size_t cap) : ring(cap), pool(2 * cap) {}
    spsc_pointer_ring<item> ring;
    std::vector<item> pool;
    std::atomic<std::uint64_t> consumed{0};
    std::atomic<bool> failed{false};  // the consumer saw a wrong element and stopped
    std::size_t errors = 0, received = 0;
  };
  std::vector<std::unique_ptr<pair_state>> st;
  for (int i = 0; i < pairs; ++i) st.push_back(std::make_unique<pair_state>(capacity));
  std::vector<std::thread> threads;
  for (int p = 0; p < pairs; ++p) {
    pair_state& s = *st[std::size_t(p)];
    threads.emplace_back([&s, p, per] {
      const std::size_t n = s.pool.size();
      for (std::uint64_t q = 0; q < per; ++q) {
        // The item for q was last used for q - n: wait until it was consumed.
        while (q >= n && s.consumed.load(std::memory_order_acquire) <= q - n) {
          if (s.failed.load(std::memory_order_relaxed)) return;
          std::this_thread::yield();
        }
        item& it = s.pool[q % n];
        it.seq = q;
        it.producer = std::uint32_t(p);
        it.check = check_of(std::uint32_t(p), q);
        while (!s.ring.try_push(&it)) {
          if (s.failed.load(std::memory_order_relaxed)) return;
          std::this_thread::yield();
        }
      }
    });
    threads.emplace_back([&s, p, per] {
      std::uint64_t next = 0;
      while (next < per) {
        // Every other look peeks first (what core's idle spin does): what
        // peek shows must be what the pop takes.
        item* seen = next % 2 == 0 ? s.ring.peek() : nullptr;
        item* it = nullptr;
        if (!s.ring.try_pop(it)) {
          if (seen != nullptr) {
            ++s.errors;  // peek showed an element the pop did not find
            s.failed.store(true, std::memory_order_relaxed);
            break;
          }
          std::this_thread::yield();
          continue;
        }
        if ((seen != nullptr && seen != it) || it->producer != std::uint32_t(p) ||
            it->seq != next || it->check != check_of(it->producer, it->seq) ||
            it != &s.pool[next % s.pool.size()]) {
          ++s.errors;  // stop at the first: the ring's state is no longer known
          s.failed.store(true, std::memory_order_relaxed);
          break;
        }
        ++next;
        s.consumed.store(next, std::memory_order_release);
      }
      s.received = next;
    });
  }
  for (auto& t : threads) t.join();
  for (int p = 0; p < pairs; ++p) {
    EXPECT_EQ(st[std::size_t(p)]->errors, 0u) << "pair " << p;
    EXPECT_EQ(st[std::size_t(p)]->received, per) << "pair " << p;
    EXPECT_TRUE(st[std::size_t(p)]->ring.empty());
  }
}

TEST(SpscPointerRing, StressOnePairTinyRing) {
  run_pairs(1, stress_items / 4, 4);
}
TEST(SpscPointerRing, StressFourPairs) {
  run_pairs(4, stress_items, 256);
}

}  // namespace
