// Message-block memory: size classes, per-thread reuse, cross-thread frees,
// both raw allocators.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
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

// Producer/consumer, as messages go: every block is allocated on one thread
// and freed on another while the producer is still allocating. The freed
// blocks join the consumer's list of their class, up to its cap; beyond the
// cap they go back to the raw allocator (the consumer does not hoard them).
// The lists are LIFO, so the consumer's next allocations show what it kept:
// the first of them is the last block it kept, then the ones before it,
// down to the first block it freed -- the first `kept` blocks freed, and
// `kept` is the cap: at least 64 blocks and at most 1 MiB of them, less than
// the blocks freed.
TEST(Memory, BlocksFreedOnAnotherThread) {
  constexpr std::size_t n = 20000, bytes = 256;
  for (auto alloc : {wb::raw_allocator::mimalloc, wb::raw_allocator::system}) {
    SCOPED_TRACE(alloc == wb::raw_allocator::mimalloc ? "mimalloc" : "system");
    wb::select_allocator(alloc);
    std::vector<std::pair<void*, std::uint8_t>> blocks(n);
    std::atomic<std::size_t> produced{0};  // blocks[0, produced) are allocated
    std::atomic<std::size_t> consumed{0};  // blocks[0, consumed) are freed
    std::atomic<std::size_t> freed_while_producing{0};
    std::thread producer([&] {
      for (std::size_t i = 0; i < n; ++i) {
        // Halfway, until the consumer has freed some: the two overlap
        // whatever the scheduler does.
        if (i == n / 2)
          while (consumed.load() == 0) std::this_thread::yield();
        auto& [p, c] = blocks[i];
        p = wb::block_alloc(bytes, c);
        std::memset(p, 7, bytes);
        produced.store(i + 1, std::memory_order_release);
      }
      wb::block_cache_release();
    });
    std::size_t kept = 0;
    bool lifo = true;
    std::uint8_t cls = 0xff;
    std::thread consumer([&] {
      for (std::size_t i = 0; i < n; ++i) {
        while (produced.load(std::memory_order_acquire) <= i) std::this_thread::yield();
        auto& [p, c] = blocks[i];
        if (produced.load(std::memory_order_relaxed) < n) freed_while_producing.fetch_add(1);
        wb::block_free(p, c);
        consumed.store(i + 1);
      }
      cls = blocks[0].second;
      // The first allocation is the last block kept.
      std::vector<std::pair<void*, std::uint8_t>> again(1);
      again[0].first = wb::block_alloc(bytes, again[0].second);
      std::size_t last = n;
      for (std::size_t i = 0; i < n; ++i)
        if (blocks[i].first == again[0].first) last = i;
      if (last < n) {
        kept = last + 1;
        for (std::size_t i = last; i-- > 0;) {
          again.emplace_back();
          again.back().first = wb::block_alloc(bytes, again.back().second);
          lifo = lifo && again.back().first == blocks[i].first;
        }
      }
      for (auto& [p, c] : again) wb::block_free(p, c);
      wb::block_cache_release();
    });
    producer.join();
    consumer.join();
    EXPECT_GT(freed_while_producing.load(), 0u) << "producer and consumer overlapped";
    ASSERT_NE(cls, wb::block_unpooled);
    ASSERT_GT(kept, 0u) << "the consumer's next block is one it freed";
    EXPECT_TRUE(lifo) << "its next " << kept << " blocks are the first ones it freed, last first";
    EXPECT_LT(kept, n) << "the consumer kept every block freed: no cap";
    EXPECT_GE(kept, 64u);
    EXPECT_LE(kept * (wb::block_min << cls), std::size_t(1) << 20);
    RecordProperty("kept", int(kept));
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

// A transport's registered memory, made of two fixed slots.
class two_slots final : public wb::registered_memory {
 public:
  void* allocate(std::size_t bytes) override {
    if (bytes > slot_bytes) return nullptr;
    for (int i = 0; i < 2; ++i)
      if (!used_[i]) {
        used_[i] = true;
        ++allocations;
        return &arena_[i * slot_bytes];
      }
    return nullptr;
  }
  void deallocate(void* p) override {
    const std::size_t i = std::size_t(static_cast<unsigned char*>(p) - arena_) / slot_bytes;
    ASSERT_LT(i, 2u);
    ASSERT_TRUE(used_[i]) << "a slot freed twice";
    used_[i] = false;
    ++deallocations;
  }
  bool contains(const void* p) const override {
    auto* b = static_cast<const unsigned char*>(p);
    return b >= arena_ && b < arena_ + sizeof arena_;
  }
  static constexpr std::size_t slot_bytes = 2 * wb::block_max;
  int allocations = 0, deallocations = 0;

 private:
  alignas(16) unsigned char arena_[2 * slot_bytes];
  bool used_[2] = {false, false};
};

TEST(Memory, LargeBlocksComeFromRegisteredMemoryWhileItHasRoom) {
  auto mem = std::make_unique<two_slots>();
  wb::set_registered_memory(mem.get());
  const std::size_t big = wb::block_max + 100;
  std::uint8_t c1 = 0, c2 = 0, c3 = 0, small = 0;
  void* a = wb::block_alloc(big, c1);
  void* b = wb::block_alloc(big, c2);
  void* c = wb::block_alloc(big, c3);  // full: the raw allocator
  void* s = wb::block_alloc(100, small);  // small blocks never go there
  EXPECT_EQ(c1, wb::block_registered);
  EXPECT_EQ(c2, wb::block_registered);
  EXPECT_EQ(c3, wb::block_unpooled);
  EXPECT_NE(small, wb::block_registered);
  EXPECT_TRUE(mem->contains(a) && mem->contains(b));
  EXPECT_FALSE(mem->contains(c));
  EXPECT_EQ(std::uintptr_t(a) % 16, 0u);
  std::memset(a, 1, big);  // the whole request is usable
  // What a receiver restores from the block alone.
  EXPECT_EQ(wb::block_class_of(a, big), wb::block_registered);
  EXPECT_EQ(wb::block_class_of(c, big), wb::block_unpooled);
  EXPECT_EQ(wb::block_class_of(s, 100), small);
  wb::block_free(a, c1);
  wb::block_free(c, c3);
  wb::block_free(s, small);
  // Removed: new large blocks come from the raw allocator, and blocks given
  // out before still go back to the memory they came from.
  wb::set_registered_memory(nullptr);
  std::uint8_t c4 = 0;
  void* d = wb::block_alloc(big, c4);
  EXPECT_EQ(c4, wb::block_unpooled);
  wb::block_free(d, c4);
  wb::block_free(b, c2);
  EXPECT_EQ(mem->allocations, 2);
  EXPECT_EQ(mem->deallocations, 2);
}
