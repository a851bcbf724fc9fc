// spsc_pairs: unit tests (empty, lazy ring allocation, the overflow path with
// a tiny ring, producer-side flush, peek) and stress tests of four producers against
// one consumer, with a tiny ring (overflow exercised under concurrency) and a
// normal one, checked for loss, duplication and per-producer FIFO order.
// Threads spin with yield(); no timing asserts.
#include "weft/base/spsc_pairs.hpp"

#include <gtest/gtest.h>
#include "test_scale.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using weft_test::sanitized;
// Total items of each stress test: millions normally, fewer under a sanitizer.
constexpr std::size_t stress_items = sanitized ? 200'000 : 2'000'000;

using weft::base::spsc_pairs;

std::uint64_t encode(int producer, std::uint64_t seq) {
  return std::uint64_t(producer) << 40 | seq;
}
int producer_of(std::uint64_t v) {
  return int(v >> 40);
}
std::uint64_t seq_of(std::uint64_t v) {
  return v & ((std::uint64_t(1) << 40) - 1);
}

TEST(SpscPairs, EmptyPopsNothing) {
  spsc_pairs<std::uint64_t> q(4, 8);
  std::uint64_t v = 7;
  EXPECT_EQ(q.producers(), 4);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.approx_size(), 0u);
  EXPECT_FALSE(q.try_pop(v));
  EXPECT_EQ(v, 7u);
  EXPECT_TRUE(q.flush(2));  // nothing pending, ring not even allocated
}

// A value type that counts its default constructions: a ring of capacity c
// value-initializes c of them when (and only when) it is allocated. It stays
// trivially copyable, as spsc_ring requires.
int constructed = 0;  // single-threaded test only
struct counted {
  std::uint64_t v;
  counted() noexcept : v(0) { ++constructed; }
  explicit counted(std::uint64_t x) noexcept : v(x) {}
};
static_assert(std::is_trivially_copyable_v<counted>);

TEST(SpscPairs, RingsAreAllocatedLazilyByTheirProducer) {
  constructed = 0;
  spsc_pairs<counted> q(8, 16);
  EXPECT_EQ(constructed, 0);  // no ring for any of the 8 producers yet
  q.push(5, counted(1));
  EXPECT_EQ(constructed, 16);  // producer 5's ring only
  q.push(5, counted(2));
  EXPECT_EQ(constructed, 16);
  q.push(2, counted(3));
  EXPECT_EQ(constructed, 32);
  EXPECT_EQ(q.approx_size(), 3u);
  int base = constructed;
  counted out;  // counts one
  base += 1;
  std::vector<std::uint64_t> got;
  while (q.try_pop(out)) got.push_back(out.v);
  EXPECT_EQ(constructed, base);  // popping allocates no ring
  ASSERT_EQ(got.size(), 3u);
  // Per-producer order: 1 before 2.
  std::size_t i1 = 0, i2 = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] == 1) i1 = i;
    if (got[i] == 2) i2 = i;
  }
  EXPECT_LT(i1, i2);
}

TEST(SpscPairs, OverflowKeepsFifoWithTinyRing) {
  spsc_pairs<std::uint64_t> q(2, 1);  // rounded to 2 slots
  for (std::uint64_t s = 0; s < 10; ++s) q.push(1, encode(1, s));
  EXPECT_EQ(q.approx_size(), 2u);  // the rest overflowed (not counted)
  EXPECT_FALSE(q.flush(1));        // ring still full: nothing moves
  std::uint64_t v = 0, next = 0;
  ASSERT_TRUE(q.try_pop(v));
  EXPECT_EQ(seq_of(v), next++);
  // A push with pending overflow goes behind it, after flushing what fits.
  q.push(1, encode(1, 10));
  for (; next < 11;) {
    if (!q.try_pop(v)) {
      q.flush(1);  // the producer's job; here the same thread
      ASSERT_TRUE(q.try_pop(v)) << "flush moved nothing at " << next;
    }
    EXPECT_EQ(producer_of(v), 1);
    EXPECT_EQ(seq_of(v), next++);
  }
  EXPECT_TRUE(q.flush(1));
  EXPECT_FALSE(q.try_pop(v));
  EXPECT_TRUE(q.empty());
}

TEST(SpscPairs, ConsumerServesEveryProducer) {
  spsc_pairs<std::uint64_t> q(3, 4);
  for (int p = 0; p < 3; ++p)
    for (std::uint64_t s = 0; s < 3; ++s) q.push(p, encode(p, s));
  std::uint64_t next[3] = {0, 0, 0}, v = 0;
  int n = 0;
  while (q.try_pop(v)) {
    const int p = producer_of(v);
    ASSERT_GE(p, 0);
    ASSERT_LT(p, 3);
    EXPECT_EQ(seq_of(v), next[p]++);
    ++n;
  }
  EXPECT_EQ(n, 9);
}

TEST(SpscPairs, PeekShowsWhatPopTakesNext) {
  struct alignas(8) tagged_item {
    int producer;
  };
  std::vector<tagged_item> items{{0}, {1}, {2}};
  spsc_pairs<tagged_item*> q(3, 4);
  EXPECT_EQ(q.peek(), nullptr);  // no ring allocated yet
  q.push(2, &items[2]);
  q.push(0, &items[0]);
  q.push(2, &items[2]);
  // Round-robin from where the last pop found one: peek follows the same order.
  for (int n = 0; n < 3; ++n) {
    tagged_item* seen = q.peek();
    ASSERT_NE(seen, nullptr) << n;
    tagged_item* got = nullptr;
    ASSERT_TRUE(q.try_pop(got));
    EXPECT_EQ(got, seen) << n;
  }
  EXPECT_EQ(q.peek(), nullptr);
}

// `producers` threads push `per` elements each, element s of producer p
// made by make(p, s); the consumer reads encode(p, s) back from each with
// code_of (~0: not an element of this test) and checks loss, duplication
// and per-producer order.
template <class T, class Make, class CodeOf>
void run_stress(int producers, std::size_t total, std::size_t capacity, Make make, CodeOf code_of) {
  const std::size_t per = total / std::size_t(producers);
  spsc_pairs<T> q(producers, capacity);
  std::atomic<int> ready{0}, finished{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      ready.fetch_add(1);
      while (ready.load() < producers) std::this_thread::yield();
      for (std::uint64_t s = 0; s < per; ++s) {
        q.push(p, make(p, s));
        // Bound the private overflow so a tiny ring does not turn the test
        // into a memory test; yielding lets the consumer drain.
        if (s % 1024 == 1023)
          while (!q.flush(p)) std::this_thread::yield();
      }
      while (!q.flush(p)) std::this_thread::yield();
      finished.fetch_add(1);
    });
  }
  std::vector<std::uint64_t> next(std::size_t(producers), 0);
  std::size_t received = 0, misordered = 0, bad = 0;
  const std::size_t expected = per * std::size_t(producers);
  while (received < expected) {
    T v;
    if (!q.try_pop(v)) {
      // Every producer flushed and nothing left: a lost element ends the
      // loop here and fails below, instead of a hang.
      if (finished.load() == producers && q.empty()) break;
      std::this_thread::yield();
      continue;
    }
    const std::uint64_t code = code_of(v, per);
    const int p = producer_of(code);
    if (code == ~std::uint64_t(0) || p < 0 || p >= producers) {
      ++bad;
      break;
    }
    if (seq_of(code) != next[std::size_t(p)]) ++misordered;
    next[std::size_t(p)] = seq_of(code) + 1;
    ++received;
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(bad, 0u);
  EXPECT_EQ(misordered, 0u);
  T v;
  EXPECT_FALSE(q.try_pop(v));
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(received, expected) << "elements lost";
  for (int p = 0; p < producers; ++p) EXPECT_EQ(next[std::size_t(p)], per) << "producer " << p;
}

// Values: the Lamport rings (spsc_ring).
void run_value_stress(int producers, std::size_t total, std::size_t capacity) {
  run_stress<std::uint64_t>(
      producers, total, capacity, [](int p, std::uint64_t s) { return encode(p, s); },
      [](std::uint64_t v, std::size_t) { return v; });
}

TEST(SpscPairs, StressFourProducersTinyRing) {
  run_value_stress(4, stress_items / 8, 4);
}
TEST(SpscPairs, StressFourProducers) {
  run_value_stress(4, stress_items, 1024);
}

// Pointers take the other ring (spsc_pointer_ring, the one core uses), with
// each producer's elements in an array of its own and the consumer reading
// them through the pointers it pops.
struct alignas(8) tagged {
  std::uint64_t value = 0;  // encode(producer, seq)
};

void run_pointer_stress(int producers, std::size_t total, std::size_t capacity) {
  const std::size_t per = total / std::size_t(producers);
  std::vector<std::vector<tagged>> items;
  for (int p = 0; p < producers; ++p) items.emplace_back(per);
  run_stress<tagged*>(
      producers, total, capacity,
      [&items](int p, std::uint64_t s) {
        tagged* t = &items[std::size_t(p)][s];
        t->value = encode(p, s);
        return t;
      },
      [&items, producers](tagged* t, std::size_t n) {
        // The element must be the one its code names, not a stale pointer.
        const int p = producer_of(t->value);
        if (p < 0 || p >= producers || seq_of(t->value) >= n ||
            t != &items[std::size_t(p)][seq_of(t->value)])
          return ~std::uint64_t(0);
        return t->value;
      });
}

TEST(SpscPairs, StressFourProducersOfPointersTinyRing) {
  run_pointer_stress(4, stress_items / 8, 4);
}
TEST(SpscPairs, StressFourProducersOfPointers) {
  run_pointer_stress(4, stress_items, 1024);
}

}  // namespace
