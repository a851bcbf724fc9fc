// array_map::hash(): "a hash of the index" (docs/objects.md). An element of
// an array under the hash map is built on PE index_key_hash(index) % PEs
// (weft/objects/index.hpp), which is also what the runtime's map answers
// (detail::home_pe), whatever the array's size: dense 1-D, 2-D and 3-D
// arrays of several sizes, sparse arrays that ask for the hash map and
// sparse arrays that get it by default, for 1 to 8 PEs (more PEs than the
// machine's cores). Each element must be built exactly once, where the map
// says, and stay there; then every PE sends every element a message, and
// each element must get exactly one from each PE, on its PE.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#include "core/support.hpp"
#include "objects/support.hpp"
#include "weft/weft.hpp"

namespace {

using namespace objects_test;

// A sparse index of 16 bytes without padding.
struct cell {
  std::int64_t a;
  std::int32_t b;
  std::int32_t c;
  friend bool operator==(const cell&, const cell&) = default;
};

template <class I>
int hash_pe(const I& i, int pes) {
  return int(weft::index_key_hash{}(weft::index_key::of(i)) % std::size_t(pes));
}

// The block map of a dense 1-D array (to show that the hash map is not it).
int block_pe(int i, int n, int pes) {
  return int(std::int64_t(i) * pes / n);
}

struct place_log {
  std::mutex mu;
  // (array tag, index as text) -> the PEs it was built on, and the PEs
  // whose pings it got.
  std::map<std::pair<int, std::string>, std::vector<int>> built;
  std::map<std::pair<int, std::string>, std::vector<int>> pinged_by;
  std::map<std::pair<int, std::string>, int> pe_of;  // where it was built
  void clear() {
    std::lock_guard<std::mutex> lock(mu);
    built.clear();
    pinged_by.clear();
    pe_of.clear();
  }
};
place_log g_place;

template <class I>
std::string text_of(const I& i) {
  if constexpr (std::is_same_v<I, cell>)
    return "(" + std::to_string(i.a) + "," + std::to_string(i.b) + "," + std::to_string(i.c) + ")";
  else
    return weft::index_string(i);
}

template <class I>
struct Placed : weft::array_element<Placed<I>, I> {
  int tag = 0;
  explicit Placed(int t) : tag(t) {
    const I i = this->this_index();
    const int pe = weft::my_pe();
    PE_CHECK(pe == hash_pe(i, weft::num_pes()),
             "element " + text_of(i) + " built on PE " + std::to_string(pe) + ", hash says " +
                 std::to_string(hash_pe(i, weft::num_pes())));
    PE_CHECK(pe == weft::objects::detail::home_pe(this->this_proxy().ref(), weft::index_key::of(i)),
             "element " + text_of(i) + " built away from the runtime's home PE");
    std::lock_guard<std::mutex> lock(g_place.mu);
    g_place.built[{tag, text_of(i)}].push_back(pe);
    g_place.pe_of[{tag, text_of(i)}] = pe;
  }
  void ping(int from) {
    const I i = this->this_index();
    PE_CHECK(weft::my_pe() == hash_pe(i, weft::num_pes()),
             "ping for " + text_of(i) + " ran on PE " + std::to_string(weft::my_pe()));
    std::lock_guard<std::mutex> lock(g_place.mu);
    g_place.pinged_by[{tag, text_of(i)}].push_back(from);
  }
};

using P1 = Placed<int>;
using P2 = Placed<weft::index2d>;
using P3 = Placed<weft::index3d>;
using PS = Placed<cell>;

// Arrays of these sizes, under the hash map, for each PE count.
constexpr int sizes_1d[] = {1, 7, 64, 250};
constexpr weft::index2d size_2d{5, 9};
constexpr weft::index3d size_3d{3, 4, 5};
constexpr int sparse_count = 100;
constexpr int tag_2d = 100, tag_3d = 101, tag_sparse_asked = 102, tag_sparse_default = 103;

cell sparse_key(int k) {
  return cell{std::int64_t(k) * 1000003 - 77, k * 31 + 5, -k};
}

// Each PE's element pings every element of every array.
struct Pinger : weft::group_element<Pinger> {
  void go(std::vector<weft::array<P1>> ones, weft::array<P2> two, weft::array<P3> three,
          weft::array<PS> asked, weft::array<PS> by_default) {
    const int me = weft::my_pe();
    for (std::size_t s = 0; s < ones.size(); ++s)
      for (int i = 0; i < sizes_1d[s]; ++i) ones[s][i].template send<&P1::ping>(me);
    for (int x = 0; x < size_2d.x; ++x)
      for (int y = 0; y < size_2d.y; ++y) two[weft::index2d{x, y}].send<&P2::ping>(me);
    for (int x = 0; x < size_3d.x; ++x)
      for (int y = 0; y < size_3d.y; ++y)
        for (int z = 0; z < size_3d.z; ++z) three[weft::index3d{x, y, z}].send<&P3::ping>(me);
    for (int k = 0; k < sparse_count; ++k) {
      asked[sparse_key(k)].send<&PS::ping>(me);
      by_default[sparse_key(k)].send<&PS::ping>(me);
    }
  }
};

class HashMap : public PesTest {};

TEST_P(HashMap, ElementsLiveWhereTheHashSaysAndGetTheirMessages) {
  const int pes = this->pes();
  g_place.clear();
  const weft::array_options hash{weft::array_map::hash()};
  int rc = run_pes(pes, [&]() -> weft::task<> {
    std::vector<weft::array<P1>> ones;
    for (int s = 0; s < int(std::size(sizes_1d)); ++s)
      ones.push_back(weft::array<P1>::create(hash, sizes_1d[s], s));
    auto two = weft::array<P2>::create(hash, size_2d, tag_2d);
    auto three = weft::array<P3>::create(hash, size_3d, tag_3d);
    auto asked = weft::array<PS>::create_sparse(hash);
    auto by_default = weft::array<PS>::create_sparse();
    for (int k = 0; k < sparse_count; ++k) {
      asked[sparse_key(k)].insert(tag_sparse_asked);
      by_default[sparse_key(k)].insert(tag_sparse_default);
    }
    // Messages may reach a sparse element before its insertion does: they
    // wait for it.
    auto pingers = weft::group_proxy<Pinger>::create();
    pingers.broadcast<&Pinger::go>(ones, two, three, asked, by_default);
    auto q = quiescence();
    co_await q;
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();

  std::vector<int> every_pe;
  for (int pe = 0; pe < pes; ++pe) every_pe.push_back(pe);
  std::lock_guard<std::mutex> lock(g_place.mu);
  auto check = [&](int tag, const std::string& idx, int want_pe) {
    const std::pair<int, std::string> key{tag, idx};
    ASSERT_EQ(g_place.built[key], std::vector<int>{want_pe})
        << "array " << tag << " element " << idx << ": built on these PEs";
    std::vector<int> from = g_place.pinged_by[key];
    std::sort(from.begin(), from.end());
    EXPECT_EQ(from, every_pe) << "array " << tag << " element " << idx
                              << ": one ping from each PE";
  };
  for (int s = 0; s < int(std::size(sizes_1d)); ++s) {
    const int n = sizes_1d[s];
    std::set<int> used;
    bool differs_from_block = false;
    for (int i = 0; i < n; ++i) {
      check(s, text_of(i), hash_pe(i, pes));
      used.insert(g_place.pe_of[{s, text_of(i)}]);
      differs_from_block |= hash_pe(i, pes) != block_pe(i, n, pes);
    }
    // The hash spreads a large array over the PEs, not as blocks would.
    if (n >= 64 && pes > 1) {
      EXPECT_EQ(int(used.size()), pes) << "array of " << n << ": PEs with elements";
      EXPECT_TRUE(differs_from_block) << "array of " << n;
    }
  }
  for (int x = 0; x < size_2d.x; ++x)
    for (int y = 0; y < size_2d.y; ++y)
      check(tag_2d, text_of(weft::index2d{x, y}), hash_pe(weft::index2d{x, y}, pes));
  for (int x = 0; x < size_3d.x; ++x)
    for (int y = 0; y < size_3d.y; ++y)
      for (int z = 0; z < size_3d.z; ++z)
        check(tag_3d, text_of(weft::index3d{x, y, z}), hash_pe(weft::index3d{x, y, z}, pes));
  for (int k = 0; k < sparse_count; ++k) {
    check(tag_sparse_asked, text_of(sparse_key(k)), hash_pe(sparse_key(k), pes));
    check(tag_sparse_default, text_of(sparse_key(k)), hash_pe(sparse_key(k), pes));
  }
  // Nothing else was built.
  const std::size_t dense = 1 + 7 + 64 + 250 + 45 + 60;
  EXPECT_EQ(g_place.built.size(), dense + 2 * sparse_count);
}

INSTANTIATE_TEST_SUITE_P(Pes, HashMap, testing::Values(1, 2, 3, 5, 8), pes_name);

}  // namespace
