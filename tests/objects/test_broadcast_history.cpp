// Broadcasts to elements that migrate while more broadcasts are in flight
// than a PE keeps in its history (src/objects/broadcast.cpp keeps the last
// 256; an element that arrives further behind gets the gap from the PE it
// left). Every element must get every broadcast exactly once and, as they
// all come from main here, in the order they were made; and once the job
// is quiet no PE may still hold anything for an element (the history is
// back to its limit: memory bounded by what is in flight, not by the job).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>
#include "objects/internal.hpp"
#include "objects/support.hpp"
#include "weft/weft.hpp"

namespace {

using namespace objects_test;

constexpr int many = 400;  // > the 256 a PE keeps

struct history_log {
  std::mutex mu;
  std::map<int, std::vector<int>> got;  // element -> broadcast numbers in arrival order
  std::map<int, int> moves;
  void clear() {
    std::lock_guard<std::mutex> lock(mu);
    got.clear();
    moves.clear();
  }
};
history_log g_log;

// The PE the held element waits on, released when every other element got
// every broadcast.
std::atomic<bool> g_release{false};
std::atomic<bool> g_holding{false};
std::atomic<int> g_done_elsewhere{0};

// Element pes-1 starts on the last PE, which is held in its hold() while
// the other PEs deliver all broadcasts; released, it moves one PE on at
// each broadcast, and arrives each time far behind its new PE. The others
// move among the PEs that are not held, at each broadcast too.
struct Rover : weft::array_element<Rover, int> {
  Rover() = default;
  std::vector<int> got;
  int moves = 0;
  void pup(weft::pupper& p) { p | got | moves; }
  void hold() {
    g_holding = true;
    while (!g_release.load()) std::this_thread::yield();
  }
  void hear(int k) {
    got.push_back(k);
    const int pes = weft::num_pes();
    if (pes == 1) return;
    const bool held = this_index() == pes - 1;
    if (!held && int(got.size()) == many && ++g_done_elsewhere == pes - 1) g_release = true;
    const int ring = held ? pes : pes - 1;
    if (ring < 2) return;
    ++moves;
    migrate_to((weft::my_pe() + 1) % ring);
  }
  void report() {
    std::lock_guard<std::mutex> lock(g_log.mu);
    g_log.got[this_index()] = got;
    g_log.moves[this_index()] = moves;
  }
};

// What a PE still keeps for elements of any array (must be nothing once
// the job is quiet).
struct Inspector : weft::group_element<Inspector> {
  void inspect() {
    using namespace weft::objects::detail;
    for (const auto& [id, lc] : this_pe_objects().collections) {
      const std::string where = "PE " + std::to_string(weft::my_pe());
      PE_CHECK(lc->bcast_pins.empty(), where + " still pins broadcasts");
      PE_CHECK(lc->bcast_departed.empty(), where + " waits for an arrival's answer");
      PE_CHECK(lc->bcast_serving.empty(), where + " still forwards broadcasts");
      PE_CHECK(lc->bcast_fetching.empty(), where + " has an element waiting for broadcasts");
      PE_CHECK(lc->bcast_history.size() <= 256, where + " keeps more than 256 broadcasts");
    }
  }
};

class BroadcastHistory : public PesTest {};

TEST_P(BroadcastHistory, ElementFarBehindGetsEveryBroadcastOnceInOrder) {
  g_log.clear();
  g_release = pes() == 1;
  g_done_elsewhere = 0;
  g_holding = false;
  const int n = pes();
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    auto a = weft::array<Rover>::create(weft::array_options{weft::array_map::round_robin()}, n);
    if (pes() > 1) {
      // Held before any broadcast reaches it (main's PE waits meanwhile).
      a[n - 1].send<&Rover::hold>();
      while (!g_holding.load()) std::this_thread::yield();
    }
    for (int k = 0; k < many; ++k) a.broadcast<&Rover::hear>(k);
    auto q = quiescence();
    co_await q;
    a.broadcast<&Rover::report>();
    auto g = weft::group_proxy<Inspector>::create();
    g.broadcast<&Inspector::inspect>();
    auto q2 = quiescence();
    co_await q2;
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  std::vector<int> want(many);
  for (int k = 0; k < many; ++k) want[std::size_t(k)] = k;
  for (int i = 0; i < n; ++i) EXPECT_EQ(g_log.got[i], want) << "element " << i;
  if (pes() > 1) {
    EXPECT_EQ(g_log.moves[n - 1], many) << "the held element moves at every broadcast";
  }
}

// Every element moves at most broadcasts, to a PE chosen by its index and
// the broadcast's number, with main's broadcasts all sent at once: the PEs'
// counts drift apart by what is in flight.
struct Hopper : weft::array_element<Hopper, int> {
  Hopper() = default;
  std::vector<int> got;
  int moves = 0;
  void pup(weft::pupper& p) { p | got | moves; }
  void hear(int k) {
    got.push_back(k);
    const int pes = weft::num_pes();
    if (pes > 1 && (this_index() + k) % 4 != 0) {
      ++moves;
      migrate_to((weft::my_pe() + 1 + (this_index() * 7 + k) % (pes - 1)) % pes);
    }
  }
  void report() {
    std::lock_guard<std::mutex> lock(g_log.mu);
    g_log.got[this_index()] = got;
    g_log.moves[this_index()] = moves;
  }
};

TEST_P(BroadcastHistory, ElementsMigratingDuringManyBroadcastsGetEachOnceInOrder) {
  g_log.clear();
  const int n = 3 * pes() + 1;
  const int count = int(scaled(2 * many, many));
  int rc = run_pes(pes(), [&]() -> weft::task<> {
    auto a = weft::array<Hopper>::create(n);
    for (int k = 0; k < count; ++k) a.broadcast<&Hopper::hear>(k);
    auto q = quiescence();
    co_await q;
    a.broadcast<&Hopper::report>();
    auto g = weft::group_proxy<Inspector>::create();
    g.broadcast<&Inspector::inspect>();
    auto q2 = quiescence();
    co_await q2;
    weft::exit(0);
  });
  ASSERT_EQ(rc, 0);
  expect_no_pe_errors();
  std::vector<int> want(static_cast<std::size_t>(count));
  for (int k = 0; k < count; ++k) want[std::size_t(k)] = k;
  long moves = 0;
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(g_log.got[i], want) << "element " << i;
    moves += g_log.moves[i];
  }
  if (pes() > 1) {
    EXPECT_GT(moves, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Pes, BroadcastHistory, testing::Values(1, 2, 4), pes_name);

}  // namespace
