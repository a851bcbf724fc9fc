// base/cache.hpp: line_allocator's blocks start on a cache line and fill
// whole lines, whatever the element count (so nothing malloc places next to
// a vector every PE reads shares a line with it).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>
#include "weft/base/cache.hpp"

namespace wb = weft::base;

TEST(LineAllocator, BlocksStartOnALineAndFillWholeLines) {
  wb::line_allocator<std::uint64_t> a;
  for (std::size_t n : {1ul, 2ul, 7ul, 8ul, 9ul, 64ul, 1000ul}) {
    EXPECT_EQ(a.bytes(n) % wb::cache_line, 0u) << n;
    EXPECT_GE(a.bytes(n), n * sizeof(std::uint64_t)) << n;
    EXPECT_LT(a.bytes(n), n * sizeof(std::uint64_t) + wb::cache_line) << n;
    std::uint64_t* p = a.allocate(n);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % wb::cache_line, 0u) << n;
    // Every byte up to the line's end is the block's (ASan checks).
    for (std::size_t i = 0; i < a.bytes(n) / sizeof(std::uint64_t); ++i) p[i] = i;
    a.deallocate(p, n);
  }
}

TEST(LineAllocator, AVectorOfOwningPointersGrowsOnLines) {
  std::vector<std::unique_ptr<int>, wb::line_allocator<std::unique_ptr<int>>> v;
  for (int i = 0; i < 100; ++i) {
    v.push_back(std::make_unique<int>(i));
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(v.data()) % wb::cache_line, 0u) << i;
  }
  for (int i = 0; i < 100; ++i) EXPECT_EQ(*v[std::size_t(i)], i);
}
