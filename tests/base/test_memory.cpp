// Message-block memory: size classes, per-thread reuse, cross-thread frees,
// both raw allocators.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <thread>
#include <vector>
#include "weft/base/memory.hpp"

namespace wb = weft::base;

TEST(Memory, ClassesCoverTheRequestedSize) {
  for (std::size_t bytes : {1ul, 48ul, 64ul, 65ul, 96ul, 128ul, 129ul, 4128ul, 65568ul, 131072ul}) {
    std::uint8_t cls = 0;
    void* p = wb::block_alloc(bytes, cls);
    ASSERT_NE(p, nullptr);
    ASSERT_NE(cls, wb::block_unpooled) << bytes;
    EXPECT_GE(wb::block_min << cls, bytes);
    EXPECT_LT(wb::block_min << cls, 2 * std::max(bytes, wb::block_min)) << bytes;
    std::memset(p, 0xab, bytes);  // the whole request is usable (ASan checks it)
    wb::block_free(p, cls);
  }
}

TEST(Memory, LargeBlocksBypassThePool) {
  std::uint8_t cls = 0;
  void* p = wb::block_alloc(wb::block_max + 1, cls);
  EXPECT_EQ(cls, wb::block_unpooled);
  std::memset(p, 1, wb::block_max + 1);
  wb::block_free(p, cls);
}

TEST(Memory, FreedBlockIsReusedByTheSameThread) {
  std::uint8_t cls = 0;
  void* p = wb::block_alloc(100, cls);
  wb::block_free(p, cls);
  std::uint8_t cls2 = 0;
  void* q = wb::block_alloc(100, cls2);
  EXPECT_EQ(p, q);
  EXPECT_EQ(cls, cls2);
  wb::block_free(q, cls2);
}

TEST(Memory, LiveBlocksNeverOverlap) {
  std::vector<std::pair<void*, std::uint8_t>> live;
  std::set<void*> seen;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 500; ++i) {
      std::uint8_t cls = 0;
      void* p = wb::block_alloc(std::size_t(16 + (i * 37) % 5000), cls);
      EXPECT_TRUE(seen.insert(p).second) << "block handed out twice";
      live.push_back({p, cls});
    }
    for (auto& [p, c] : live) wb::block_free(p, c);
    live.clear();
    seen.clear();
  }
}

TEST(Memory, BlocksFreedOnAnotherThread) {
  // Producer/consumer: every block is allocated on one thread and freed on
  // another, as messages are; the consumer's lists are capped.
  for (auto alloc : {wb::raw_allocator::mimalloc, wb::raw_allocator::system}) {
    wb::select_allocator(alloc);
    std::vector<std::pair<void*, std::uint8_t>> blocks(20000);
    std::thread producer([&] {
      for (auto& [p, c] : blocks) {
        p = wb::block_alloc(256, c);
        std::memset(p, 7, 256);
      }
      wb::block_cache_release();
    });
    producer.join();
    std::thread consumer([&] {
      for (auto& [p, c] : blocks) wb::block_free(p, c);
      wb::block_cache_release();
    });
    consumer.join();
  }
  wb::select_allocator(wb::raw_allocator::mimalloc);
}

TEST(Memory, PoolOffUsesTheRawAllocator) {
  wb::set_block_pool(false);
  std::uint8_t cls = 0;
  void* p = wb::block_alloc(100, cls);
  EXPECT_EQ(cls, wb::block_unpooled);
  wb::block_free(p, cls);
  wb::set_block_pool(true);
}
