// mpsc_queue: unit tests of the intrusive Vyukov queue, and a stress test of
// several producers against one consumer checked for loss, duplication and
// per-producer FIFO order. Threads spin with yield(), so the tests progress on
// a loaded machine with more threads than cores; nothing asserts timings.
#include "weft/base/mpsc_queue.hpp"

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

using weft::base::mpsc_queue;
using weft::base::queue_link;

// The element: its queue_link first, so a popped link is the element.
struct item {
  queue_link link;
  std::uint32_t producer = 0;  // written before push, read after pop (plain data)
  std::uint64_t seq = 0;
};
static_assert(std::is_standard_layout_v<item>);

item* as_item(queue_link* l) {
  return reinterpret_cast<item*>(l);
}

TEST(MpscQueue, EmptyQueuePopsNothing) {
  mpsc_queue q;
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.approx_size(), 0u);
}

TEST(MpscQueue, SingleThreadFifo) {
  mpsc_queue q;
  std::vector<item> items(10);
  for (std::size_t i = 0; i < items.size(); ++i) {
    items[i].seq = i;
    q.push(&items[i].link);
  }
  EXPECT_EQ(q.approx_size(), 10u);
  for (std::size_t i = 0; i < items.size(); ++i) {
    queue_link* l = q.pop();
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(as_item(l)->seq, i);
  }
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_TRUE(q.empty());
}

// Regression: empty() said true while an element was still queued (after a
// pop, tail_ points at the next element rather than at the stub), so a PE
// that sleeps on empty() could sleep on a pending message.
TEST(MpscQueue, NotEmptyWhileAnElementRemains) {
  mpsc_queue q;
  item a, b, c;
  q.push(&a.link);
  q.push(&b.link);
  EXPECT_FALSE(q.empty());
  EXPECT_EQ(q.pop(), &a.link);
  EXPECT_FALSE(q.empty());
  EXPECT_EQ(q.approx_size(), 1u);
  q.push(&c.link);
  EXPECT_EQ(q.pop(), &b.link);
  EXPECT_FALSE(q.empty());
  EXPECT_EQ(q.pop(), &c.link);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.pop(), nullptr);
}

// Popping the last element goes through the stub re-insertion path; popped
// elements may be pushed again at once.
TEST(MpscQueue, ReuseAcrossStubReinsertion) {
  mpsc_queue q;
  item a, b;
  for (int round = 0; round < 1000; ++round) {
    q.push(&a.link);
    EXPECT_EQ(q.pop(), &a.link);
    EXPECT_TRUE(q.empty());
    EXPECT_EQ(q.pop(), nullptr);
    q.push(&a.link);
    q.push(&b.link);
    EXPECT_EQ(q.pop(), &a.link);
    q.push(&a.link);
    EXPECT_EQ(q.pop(), &b.link);
    EXPECT_EQ(q.pop(), &a.link);
    EXPECT_EQ(q.pop(), nullptr);
  }
}

void run_stress(int producers, std::size_t total) {
  const std::size_t per = total / std::size_t(producers);
  std::vector<item> items(per * std::size_t(producers));  // allocated up front
  mpsc_queue q;
  std::atomic<int> ready{0}, finished{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      ready.fetch_add(1);
      while (ready.load() < producers) std::this_thread::yield();
      for (std::size_t s = 0; s < per; ++s) {
        item& it = items[std::size_t(p) * per + s];
        it.producer = std::uint32_t(p);
        it.seq = s;
        q.push(&it.link);
        if (s % 4096 == 0) std::this_thread::yield();  // interleave producers
      }
      finished.fetch_add(1);
    });
  }
  std::vector<std::uint64_t> next(std::size_t(producers), 0);
  std::size_t received = 0, misordered = 0, bad = 0;
  while (received < items.size()) {
    queue_link* l = q.pop();
    if (l == nullptr) {
      // Every producer done and nothing left (exact once they stopped): a
      // lost item ends the loop here and fails below, instead of a hang.
      if (finished.load() == producers && q.empty()) break;
      std::this_thread::yield();
      continue;
    }
    item* it = as_item(l);
    if (it->producer >= std::uint32_t(producers) || it < items.data() ||
        it >= items.data() + items.size()) {
      ++bad;
      break;
    }
    // Sequential per producer: catches loss, duplication and reordering.
    if (it->seq != next[it->producer]) ++misordered;
    next[it->producer] = it->seq + 1;
    ++received;
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(bad, 0u);
  EXPECT_EQ(misordered, 0u);
  EXPECT_EQ(q.pop(), nullptr);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(received, items.size()) << "items lost";
  for (int p = 0; p < producers; ++p) EXPECT_EQ(next[std::size_t(p)], per) << "producer " << p;
}

TEST(MpscQueue, StressOneProducer) {
  run_stress(1, stress_items / 4);
}
TEST(MpscQueue, StressFourProducers) {
  run_stress(4, stress_items);
}

// The consumer sleeps (here: yields) only when empty() says so, as core's
// idle protocol does; it must never see empty() while items remain queued.
TEST(MpscQueue, StressEmptyNeverHidesItems) {
  constexpr int producers = 3;
  const std::size_t per = stress_items / 10 / producers;
  std::vector<item> items(per * producers);
  mpsc_queue q;
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      for (std::size_t s = 0; s < per; ++s) {
        item& it = items[std::size_t(p) * per + s];
        it.producer = std::uint32_t(p);
        it.seq = s;
        q.push(&it.link);
      }
      done.fetch_add(1);
    });
  }
  std::size_t received = 0;
  for (;;) {
    if (q.empty()) {
      if (done.load() == producers && q.empty()) break;
      std::this_thread::yield();
      continue;
    }
    if (q.pop() != nullptr) ++received;
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(received, items.size());
  EXPECT_EQ(q.pop(), nullptr);
}

}  // namespace
