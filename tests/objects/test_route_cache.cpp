// The route cache in front of an objects PE's element and location tables
// (src/objects/state.hpp): which slot a key takes, and what it remembers.
// Dense neighbours must not evict each other: 64 consecutive 1-D elements,
// the 3x3 neighbourhood of a 2-D element and the 27 points of a 3-D stencil
// each take different slots, wherever they sit in the array.
#include <gtest/gtest.h>

#include <set>
#include "objects/state.hpp"
#include "weft/weft.hpp"

namespace {

using weft::index_key;
using weft::objects::detail::route_cache;

std::size_t slot_of(int x) { return route_cache::index_of(index_key::of(x)); }
std::size_t slot_of(int x, int y) {
  return route_cache::index_of(index_key::of(weft::index2d{x, y}));
}
std::size_t slot_of(int x, int y, int z) {
  return route_cache::index_of(index_key::of(weft::index3d{x, y, z}));
}

TEST(RouteCache, ConsecutiveElementsTakeDifferentSlots) {
  for (int first : {0, 1, 63, 1000, 123456, 1 << 20}) {
    std::set<std::size_t> slots;
    for (int i = first; i < first + int(weft::objects::detail::route_cache::size); ++i)
      slots.insert(slot_of(i));
    EXPECT_EQ(slots.size(), route_cache::size) << "from " << first;
  }
}

TEST(RouteCache, StencilNeighboursTakeDifferentSlots) {
  for (int x = 1; x < 40; x += 3)
    for (int y = 1; y < 40; y += 5) {
      std::set<std::size_t> s2;
      for (int dx = -1; dx <= 1; ++dx)
        for (int dy = -1; dy <= 1; ++dy) s2.insert(slot_of(x + dx, y + dy));
      EXPECT_EQ(s2.size(), 9u) << x << "," << y;
      for (int z = 1; z < 40; z += 7) {
        std::set<std::size_t> s3;
        for (int dx = -1; dx <= 1; ++dx)
          for (int dy = -1; dy <= 1; ++dy)
            for (int dz = -1; dz <= 1; ++dz) s3.insert(slot_of(x + dx, y + dy, z + dz));
        EXPECT_EQ(s3.size(), 27u) << x << "," << y << "," << z;
      }
    }
}

TEST(RouteCache, RemembersPerKeyAndForgetsOnEvictionOrDrop) {
  weft::objects::detail::route_cache c;
  const index_key a = index_key::of(5),
                  b = index_key::of(5 + int(weft::objects::detail::route_cache::size));
  ASSERT_EQ(route_cache::index_of(a), route_cache::index_of(b));  // the same slot
  EXPECT_EQ(c.rec(a), nullptr);
  EXPECT_EQ(c.pe(a), -1);
  c.remember_pe(a, 3);
  EXPECT_EQ(c.pe(a), 3);
  EXPECT_EQ(c.rec(a), nullptr);
  EXPECT_EQ(c.pe(b), -1);  // another key in the same slot is not taken for it
  c.remember_pe(b, 7);     // evicts a
  EXPECT_EQ(c.pe(b), 7);
  EXPECT_EQ(c.pe(a), -1);
  c.drop(b);
  EXPECT_EQ(c.pe(b), -1);
  c.drop(a);  // not there: nothing happens
  EXPECT_EQ(c.pe(b), -1);
}

}  // namespace
