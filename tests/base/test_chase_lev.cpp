// chase_lev: unit tests (LIFO pop, FIFO steal, capacity rounding, growth,
// wrap-around, pop vs steal on the last element) and stress tests: an owner
// pushing and popping while three thieves steal (more threads than cores),
// every item taken exactly once and each thief's steals in push order; a
// round-by-round race of pop against steal for a single element; and stolen
// pointers whose pointees the owner wrote with plain stores (TSan checks the
// publication). Threads spin with yield(); no timing asserts.
#include "weft/base/cache.hpp"
#include "weft/base/chase_lev.hpp"

#include <gtest/gtest.h>
#include "test_scale.hpp"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <thread>
#include <vector>

namespace {

using weft_test::sanitized;
// Total items of each stress test: millions normally, fewer under a sanitizer.
constexpr std::size_t stress_items = sanitized ? 200'000 : 2'000'000;

using weft::base::chase_lev;
using weft::base::steal_status;

TEST(ChaseLev, EmptyDequeGivesNothing) {
  chase_lev<std::uint64_t> d;
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.size_approx(), 0u);
  EXPECT_EQ(d.pop(), std::nullopt);
  EXPECT_EQ(d.steal(), std::nullopt);
  std::uint64_t v = 5;
  EXPECT_EQ(d.steal(v), steal_status::empty);
  EXPECT_EQ(v, 5u);                  // untouched
  EXPECT_EQ(d.pop(), std::nullopt);  // repeated empty pops leave it consistent
  d.push(1);
  EXPECT_EQ(d.pop(), 1u);
}

TEST(ChaseLev, CapacityRoundsUpToPowerOfTwo) {
  EXPECT_EQ(chase_lev<int>(0).capacity(), 2u);
  EXPECT_EQ(chase_lev<int>(3).capacity(), 4u);
  EXPECT_EQ(chase_lev<int>(64).capacity(), 64u);
  EXPECT_EQ(chase_lev<int>(100).capacity(), 128u);
}

TEST(ChaseLev, OwnerIsLifoThievesAreFifo) {
  chase_lev<int> d(8);
  for (int i = 0; i < 6; ++i) d.push(i);
  EXPECT_EQ(d.size_approx(), 6u);
  EXPECT_EQ(d.pop(), 5);
  EXPECT_EQ(d.steal(), 0);
  EXPECT_EQ(d.pop(), 4);
  int v = -1;
  EXPECT_EQ(d.steal(v), steal_status::success);
  EXPECT_EQ(v, 1);
  EXPECT_EQ(d.size_approx(), 2u);
  EXPECT_EQ(d.pop(), 3);
  EXPECT_EQ(d.pop(), 2);
  EXPECT_EQ(d.pop(), std::nullopt);
  EXPECT_TRUE(d.empty());
}

TEST(ChaseLev, GrowsAndKeepsEveryElement) {
  chase_lev<std::uint64_t> d(4);
  for (std::uint64_t i = 0; i < 1000; ++i) d.push(i);
  EXPECT_GE(d.capacity(), 1000u);
  EXPECT_EQ(d.size_approx(), 1000u);
  for (std::uint64_t i = 0; i < 10; ++i) EXPECT_EQ(d.steal(), i);  // oldest first
  for (std::uint64_t i = 999; i >= 10; --i) ASSERT_EQ(d.pop(), i);
  EXPECT_EQ(d.pop(), std::nullopt);
}

// Growth with top far from zero: the copied range [top, bottom) wraps in the
// old array and lands at different slots in the new one.
TEST(ChaseLev, GrowsAfterWrapAround) {
  chase_lev<std::uint64_t> d(4);
  std::uint64_t next_in = 0, next_steal = 0;
  for (int i = 0; i < 3; ++i) d.push(next_in++);
  for (int round = 0; round < 100; ++round) {  // slide the window: top and bottom advance
    d.push(next_in++);
    ASSERT_EQ(d.steal(), next_steal++);
  }
  EXPECT_EQ(d.capacity(), 4u);
  for (int i = 0; i < 10; ++i) d.push(next_in++);  // forces growth mid-wrap
  EXPECT_GE(d.capacity(), 16u);
  while (next_steal < next_in) ASSERT_EQ(d.steal(), next_steal++);
  EXPECT_EQ(d.steal(), std::nullopt);
  EXPECT_EQ(d.pop(), std::nullopt);
}

TEST(ChaseLev, LastElementGoesToExactlyOneSide) {
  chase_lev<int> d;
  d.push(7);
  EXPECT_EQ(d.steal(), 7);
  EXPECT_EQ(d.pop(), std::nullopt);
  d.push(8);
  EXPECT_EQ(d.pop(), 8);
  int v = 0;
  EXPECT_EQ(d.steal(v), steal_status::empty);
  d.push(9);
  d.push(10);
  EXPECT_EQ(d.pop(), 10);
  EXPECT_EQ(d.steal(), 9);
  EXPECT_TRUE(d.empty());
}

// The owner pushes all items, popping some as it goes (bursts of LIFO work)
// and the rest at the end; three thieves steal throughout. Every item must be
// taken exactly once, and each thief's steals must come in push order (top
// only advances, and elements are stacked in push order).
TEST(ChaseLev, StressOwnerAndThreeThieves) {
  constexpr int thieves = 3;
  const std::size_t n = stress_items;
  chase_lev<std::uint64_t> d(16);  // small, so it grows under contention
  std::atomic<bool> owner_done{false};
  std::atomic<int> ready{0};
  std::vector<std::vector<std::uint64_t>> stolen(thieves);
  std::vector<std::size_t> out_of_order(thieves, 0), aborts(thieves, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < thieves; ++k) {
    threads.emplace_back([&, k] {
      auto& mine = stolen[std::size_t(k)];
      mine.reserve(n / 2);
      ready.fetch_add(1);
      std::uint64_t last = 0;
      bool any = false;
      for (;;) {
        const bool done = owner_done.load();  // read before the attempt
        std::uint64_t v;
        const steal_status st = d.steal(v);
        if (st == steal_status::success) {
          if (any && v <= last) ++out_of_order[std::size_t(k)];
          last = v;
          any = true;
          mine.push_back(v);
        } else if (st == steal_status::abort) {
          ++aborts[std::size_t(k)];
        } else if (done) {
          break;  // owner finished and deque seen empty afterwards: stays empty
        } else {
          std::this_thread::yield();
        }
      }
    });
  }
  while (ready.load() < thieves) std::this_thread::yield();
  std::vector<std::uint64_t> popped;
  popped.reserve(n);
  std::uint64_t pushed = 0;
  while (pushed < n) {
    const std::uint64_t burst = 1 + pushed % 97;  // varying burst sizes
    for (std::uint64_t i = 0; i < burst && pushed < n; ++i) d.push(pushed++);
    for (std::uint64_t i = 0; i < burst / 3; ++i)
      if (auto v = d.pop()) popped.push_back(*v);
    if (pushed % 8 == 0) std::this_thread::yield();  // let thieves run when oversubscribed
  }
  while (auto v = d.pop()) popped.push_back(*v);
  owner_done.store(true);
  for (auto& t : threads) t.join();

  std::vector<std::uint8_t> seen(n, 0);
  std::size_t dup = 0, bad = 0, total = 0;
  auto take = [&](std::uint64_t v) {
    ++total;
    if (v >= n) return void(++bad);
    if (seen[v]++) ++dup;
  };
  for (auto v : popped) take(v);
  for (auto& s : stolen)
    for (auto v : s) take(v);
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(dup, 0u);
  EXPECT_EQ(total, n);
  std::size_t missing = 0;
  for (auto s : seen) missing += s == 0;
  EXPECT_EQ(missing, 0u);
  for (int k = 0; k < thieves; ++k) EXPECT_EQ(out_of_order[std::size_t(k)], 0u) << "thief " << k;
  EXPECT_TRUE(d.empty());
  std::size_t stolen_total = 0;
  for (auto& s : stolen) stolen_total += s.size();
  RecordProperty("stolen", int(stolen_total));
  RecordProperty("popped", int(popped.size()));
}

// Spin-wait that still progresses when oversubscribed: pause, yield now and then.
template <class Pred>
void spin_until(Pred pred) {
  for (unsigned i = 1; !pred(); ++i) {
    if (i % 256 == 0)
      std::this_thread::yield();
    else
      weft::base::cpu_relax();
  }
}

// The calling thread's CPU set, one CPU picked from it by index (-1 if the
// set has fewer CPUs); the race below needs owner and thief on two CPUs.
int nth_allowed_cpu(int n) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set) && n-- == 0) return c;
  return -1;
}

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  EXPECT_EQ(pthread_setaffinity_np(pthread_self(), sizeof set, &set), 0) << "cpu " << cpu;
}

// Restores the calling thread's CPU set when it goes out of scope: threads
// that later tests start inherit it.
class affinity_guard {
 public:
  affinity_guard() {
    saved_ok_ = pthread_getaffinity_np(pthread_self(), sizeof saved_, &saved_) == 0;
  }
  ~affinity_guard() {
    if (saved_ok_) pthread_setaffinity_np(pthread_self(), sizeof saved_, &saved_);
  }
  affinity_guard(const affinity_guard&) = delete;
  affinity_guard& operator=(const affinity_guard&) = delete;

 private:
  cpu_set_t saved_;
  bool saved_ok_ = false;
};

// One element at a time, owner pop() and thief steal() race for it; exactly
// one of them must get it. The race must really happen: a round is contended
// when the thief's steal() aborted -- it saw the element, then lost the CAS on
// top, which only the owner's CAS in pop() on the last element can win here
// (one thief). That is the path this test is for, and the deque shows it to a
// thief alone; so the rounds go on until enough of them were contended (and
// each side won some), and the test fails if a generous bound on rounds is
// reached first. To make that likely whatever the load: owner and thief are
// pinned to two different CPUs (on one CPU they would only overlap when a
// preemption lands inside a few instructions); the owner pops as soon as
// the thief says it is about to steal, and the thief pauses before its
// steal() -- longer while it keeps winning, shorter when it loses -- so the
// two settle where their accesses to top overlap on this machine. (A round
// the thief won does not show whether the owner's CAS lost or the owner
// found the deque empty already: it counts as a win, not as contended.)
TEST(ChaseLev, StressPopAndStealRaceForLastElement) {
  const int owner_cpu = nth_allowed_cpu(0), thief_cpu = nth_allowed_cpu(1);
  if (thief_cpu < 0)
    GTEST_SKIP() << "the process may run on one CPU only: owner and thief cannot race";
  const int min_contended = 20;  // rounds the thief saw abort (owner won the CAS race)
  const int min_wins = 20;       // rounds each side won
  const int max_rounds = 500'000;  // typically 1000 to 60000 rounds are enough
  chase_lev<int> d(4);
  std::atomic<int> round{-1};       // owner: item `round` is in the deque
  std::atomic<int> ready{-1};       // thief: about to steal in round `ready`
  std::atomic<int> thief_done{-1};  // thief: finished with round `thief_done`
  std::atomic<int> thief_got{0};    // 0 nothing, 1 the round's item, 2 a wrong item
  std::atomic<bool> thief_aborted{false};  // in round `thief_done`, steal() said abort
  std::atomic<bool> stop{false};
  std::thread thief([&] {
    pin_to(thief_cpu);
    int delay = 0;  // pauses before the steal
    for (int r = 0;; ++r) {
      spin_until([&] { return round.load() >= r || stop.load(); });
      if (round.load() < r) return;
      ready.store(r);
      for (int i = delay; i > 0; --i) weft::base::cpu_relax();
      int v = -1;
      bool aborted = false;
      steal_status st;
      while ((st = d.steal(v)) == steal_status::abort) aborted = true;
      const bool won = st == steal_status::success;
      thief_aborted.store(aborted);
      thief_got.store(won ? (v == r ? 1 : 2) : 0);
      thief_done.store(r);
      if (won && delay < 1000) ++delay;  // capped: a descheduled owner must not stall the test
      if (!won) delay -= delay / 4 + 1;
      if (delay < 0) delay = 0;
    }
  });
  const affinity_guard restore;
  pin_to(owner_cpu);
  int owner_won = 0, thief_won = 0, both = 0, neither = 0, contended = 0, r = 0;
  int wrong_round = -1;  // a round where someone got another round's item
  for (; r < max_rounds &&
         (contended < min_contended || owner_won < min_wins || thief_won < min_wins);
       ++r) {
    d.push(r);
    round.store(r);
    spin_until([&] { return ready.load() >= r; });
    for (int i = (r * 37) % 8; i > 0; --i) weft::base::cpu_relax();
    const std::optional<int> mine = d.pop();
    spin_until([&] { return thief_done.load() >= r; });
    const int t = thief_got.load();
    if (t == 2 || (mine && *mine != r)) {
      wrong_round = r;
      break;
    }
    owner_won += mine && t == 0;
    thief_won += !mine && t == 1;
    both += mine && t == 1;
    neither += !mine && t == 0;
    contended += thief_aborted.load();
  }
  stop.store(true);
  thief.join();
  ASSERT_EQ(wrong_round, -1) << "an item of another round was taken";
  EXPECT_EQ(both, 0);
  EXPECT_EQ(neither, 0);
  EXPECT_EQ(owner_won + thief_won, r);
  EXPECT_TRUE(d.empty());
  EXPECT_GE(contended, min_contended)
      << "rounds where pop() and steal() raced for the item, of " << r;
  EXPECT_GE(owner_won, min_wins) << "of " << r << " rounds";
  EXPECT_GE(thief_won, min_wins) << "of " << r << " rounds";
  RecordProperty("rounds", r);
  RecordProperty("contended", contended);
  RecordProperty("owner_won", owner_won);
  RecordProperty("thief_won", thief_won);
}

// T = pointer: the owner fills each pointee with plain stores before pushing;
// a thief (or the owner) reads them after taking. Under TSan this checks that
// push/steal publish the pointee (release bottom store / acquire load).
struct task {
  std::uint64_t id;
  std::uint64_t payload[3];
};

TEST(ChaseLev, StressStolenPointersSeePayload) {
  constexpr int thieves = 3;
  const std::size_t n = stress_items / 4;
  std::vector<task> tasks(n);
  chase_lev<task*> d;
  std::atomic<bool> owner_done{false};
  std::atomic<std::size_t> taken{0}, bad{0};
  auto check = [&](task* t) {
    if (t->payload[0] != t->id * 3 || t->payload[1] != t->id * 5 || t->payload[2] != ~t->id)
      bad.fetch_add(1);
    t->payload[0] = 0;  // the taker owns the task now: plain write, races if taken twice
    taken.fetch_add(1, std::memory_order_relaxed);
  };
  std::vector<std::thread> threads;
  for (int k = 0; k < thieves; ++k) {
    threads.emplace_back([&] {
      for (;;) {
        const bool done = owner_done.load();
        task* t = nullptr;
        const steal_status st = d.steal(t);
        if (st == steal_status::success) {
          check(t);
        } else if (st == steal_status::empty) {
          if (done) break;
          std::this_thread::yield();
        }
      }
    });
  }
  for (std::size_t i = 0; i < n; ++i) {
    task& t = tasks[i];
    t.id = i;
    t.payload[0] = i * 3;
    t.payload[1] = i * 5;
    t.payload[2] = ~std::uint64_t(i);
    d.push(&t);
    if (i % 4 == 3)
      if (auto p = d.pop()) check(*p);
    if (i % 64 == 0) std::this_thread::yield();
  }
  while (auto p = d.pop()) check(*p);
  owner_done.store(true);
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(taken.load(), n);
}

}  // namespace
