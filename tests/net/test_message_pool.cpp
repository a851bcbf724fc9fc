// Tests of the transports' message pool allocator (src/net/message_pool.hpp):
// slot_pool's power-of-two classes and message_pool's references and loans.
#include <gtest/gtest.h>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <vector>
#include "net/message_pool.hpp"

namespace {

using weft::net::message_pool;
using weft::net::slot_pool;

constexpr std::size_t KiB = std::size_t(1) << 10;
constexpr std::size_t MiB = std::size_t(1) << 20;

// The blocks a test holds, checked as they are taken: inside the pool, at
// least as large as asked (and no more than the class above), starting on a
// multiple of slot_align (a pointer into a slot's first page names it),
// overlapping no other live block.
struct holder {
  slot_pool& pool;
  std::size_t bytes;
  std::map<std::size_t, std::pair<std::size_t, unsigned>> live;  // offset -> (size, class)

  std::size_t block_bytes(unsigned cls) const {
    return std::size_t(1) << (cls + pool.min_shift());
  }
  // The offset taken, or slot_pool::none.
  std::size_t take(std::size_t want) {
    unsigned cls = 99;
    const std::size_t off = pool.take(want, cls);
    if (off == slot_pool::none) return off;
    const std::size_t n = block_bytes(cls);
    EXPECT_GE(n, want);
    EXPECT_LT(n / 2, std::max(want, std::size_t(1) << pool.min_shift()))
        << "a " << want << "-byte request took a " << n << "-byte block";
    EXPECT_LE(off + n, bytes);
    EXPECT_EQ(off % message_pool::slot_align, 0u);
    auto next = live.lower_bound(off);
    if (next != live.end()) {
      EXPECT_LE(off + n, next->first) << "overlap at " << off;
    }
    if (next != live.begin()) {
      auto prev = std::prev(next);
      EXPECT_LE(prev->first + prev->second.first, off) << "overlap at " << off;
    }
    live[off] = {n, cls};
    return off;
  }
  bool took(std::size_t want) { return take(want) != slot_pool::none; }
  void give(std::size_t off) {
    auto it = live.find(off);
    ASSERT_NE(it, live.end());
    pool.give(off, it->second.second);
    live.erase(it);
  }
  void give_all() {
    while (!live.empty()) give(live.begin()->first);
  }
};

// The largest block is a quarter of the pool (rounded down to a power of
// two): a fresh pool holds 4 of them, and a 5th does not fit.
TEST(SlotPool, AFreshPoolHoldsFourBlocksOfTheLargestClass) {
  slot_pool p;
  p.reset(32 * MiB, 16 * KiB + 1);
  EXPECT_EQ(p.min_shift(), 15u);  // 32 KiB, the class above 16 KiB + 1
  holder h{p, 32 * MiB, {}};
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(h.took(8 * MiB)) << i;
  EXPECT_FALSE(h.took(8 * MiB));
  EXPECT_FALSE(h.took(1));
  unsigned cls = 0;
  EXPECT_EQ(p.take(8 * MiB + 1, cls), slot_pool::none) << "above the largest class";
}

// The pool carved into small blocks serves large ones again once they are
// free: taking splits, giving merges buddies. (With classes that never
// split or merge, a pool once filled with 512 KiB slots had no 8 MiB slot
// for the rest of its life, all of it free.)
TEST(SlotPool, MemoryOfSmallBlocksServesLargeOnesOnceFree) {
  slot_pool p;
  p.reset(32 * MiB, 16 * KiB + 1);
  holder h{p, 32 * MiB, {}};
  int n = 0;
  while (h.took(512 * KiB)) ++n;
  EXPECT_EQ(n, 64);
  h.give_all();
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(h.took(8 * MiB)) << i;
  h.give_all();
  // Every class in turn, the pool full each time.
  for (std::size_t size = 32 * KiB; size <= 8 * MiB; size *= 2) {
    n = 0;
    while (h.took(size)) ++n;
    EXPECT_EQ(std::size_t(n), 32 * MiB / size) << size;
    h.give_all();
  }
}

// Sizes that grow while some blocks are in flight (the shm test's pattern,
// LargeMessagesFromThePoolAreCopiedOutByTheReceiver: 300 KiB, then 50 000
// bytes more every message, up to 2.1 MiB, to two peers): whenever the
// oldest blocks have come back, the next one fits.
TEST(SlotPool, GrowingSizesWithBlocksInFlightAlwaysFitOnceTheOldestReturn) {
  for (std::size_t in_flight = 1; in_flight <= 16; ++in_flight) {
    slot_pool p;
    p.reset(32 * MiB, 16 * KiB + 1);
    holder h{p, 32 * MiB, {}};
    std::vector<std::size_t> order;  // offsets, oldest first
    for (std::size_t i = 0; i < 40; i += 2)
      for (int peer = 0; peer < 2; ++peer) {
        const std::size_t bytes = 300 * KiB + i * 50000;
        std::size_t off;
        while ((off = h.take(bytes)) == slot_pool::none) {
          ASSERT_FALSE(order.empty()) << "no room for " << bytes << " bytes in an empty pool";
          h.give(order.front());
          order.erase(order.begin());
        }
        order.push_back(off);
        if (order.size() > in_flight) {
          h.give(order.front());
          order.erase(order.begin());
        }
      }
  }
}

// Random takes and gives of every class, in pools of awkward sizes (not a
// power of two, a tail smaller than the largest class): blocks never
// overlap or leave the pool, and once all are back the pool is whole again.
TEST(SlotPool, RandomTakesAndGivesNeverOverlapAndLeaveThePoolWhole) {
  std::mt19937_64 rng(2024);
  for (std::size_t bytes : {32 * MiB, 5 * MiB + 512 * KiB + 64 * KiB, 4 * MiB + 4 * KiB,
                            48 * MiB, 1 * MiB}) {
    slot_pool p;
    p.reset(bytes, 4096);
    holder h{p, bytes, {}};
    // The largest class: a quarter of the pool, rounded down.
    std::size_t top = std::size_t(1) << p.min_shift();
    while (top * 2 <= bytes / 4) top *= 2;
    std::size_t top_count = 0;
    while (h.took(top)) ++top_count;
    EXPECT_GE(top_count, 4u) << bytes;
    h.give_all();
    for (int round = 0; round < 20000; ++round) {
      if (h.live.empty() || rng() % 3 != 0) {
        const std::size_t want = 1 + rng() % (std::size_t(1) << (12 + rng() % 9));
        h.take(std::min(want, top));
      } else {
        auto it = h.live.begin();
        std::advance(it, long(rng() % h.live.size()));
        h.give(it->first);
      }
      if (::testing::Test::HasFailure()) return;
    }
    h.give_all();
    std::size_t again = 0;
    while (h.took(top)) ++again;
    EXPECT_EQ(again, top_count) << bytes;
    h.give_all();
  }
}

TEST(SlotPool, APoolTooSmallForOneBlockGivesNone) {
  slot_pool p;
  p.reset(8 * KiB, 16 * KiB + 1);
  unsigned cls = 0;
  EXPECT_EQ(p.take(1, cls), slot_pool::none);
  p.reset(0, 4096);
  EXPECT_EQ(p.take(1, cls), slot_pool::none);
}

// message_pool over plain memory: core's references and peers' loans keep a
// slot, and its memory serves any class once the last one is gone.
TEST(MessagePool, ASlotIsFreeOnceCoreAndTheLoanLetGo) {
  const std::size_t bytes = 4 * MiB;
  void* mem = std::aligned_alloc(message_pool::slot_align, bytes);
  ASSERT_NE(mem, nullptr);
  bool unmapped = false;
  auto* pool = new message_pool(mem, bytes, 16 * KiB + 1, 16 * KiB + 1, [&] {
    unmapped = true;
    std::free(mem);
  });
  std::vector<void*> small;
  while (void* b = pool->allocate(64 * KiB)) small.push_back(b);
  EXPECT_EQ(small.size(), 64u);
  EXPECT_EQ(pool->allocate(1 * MiB), nullptr);
  pool->lend(small[0]);       // sent to a peer that reads it in place
  pool->deallocate(small[0]);  // core's free: the loan keeps the slot
  for (std::size_t i = 1; i < small.size(); ++i) pool->deallocate(small[i]);
  // Every 1 MiB block but the one holding small[0].
  std::vector<void*> large;
  while (void* b = pool->allocate(1 * MiB)) large.push_back(b);
  EXPECT_EQ(large.size(), 3u);
  for (void* b : large)
    EXPECT_FALSE(b <= small[0] && small[0] < static_cast<std::byte*>(b) + 1 * MiB);
  pool->give_back(small[0]);  // the peer is done
  void* last = pool->allocate(1 * MiB);
  ASSERT_NE(last, nullptr);
  pool->deallocate(last);
  for (void* b : large) pool->deallocate(b);
  EXPECT_FALSE(unmapped);
  pool->retire();  // nothing held: the pool goes now
  EXPECT_TRUE(unmapped);
}

}  // namespace
