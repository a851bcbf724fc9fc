// Per sender-receiver order in balancing steps without at_sync (periodic,
// on demand), while the elements keep sending: such a step pauses the
// array until no element message is in flight, moves the elements with
// the messages that waited for them, and resumes (src/objects/sync_pause.cpp).
//
// Every element sends a numbered message to two others each round (its
// next round comes as a message to itself); the balancer moves them all
// the while. Each receiver checks, per sender, that the number it gets is
// the one it expects next (a loss, a duplicate or an overtaking is named
// at once), and at the end that it got them all.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>
#include "objects/support.hpp"
#include "weft/weft.hpp"

namespace {

using namespace objects_test;

int g_rounds = 0;
bool g_on_demand = false;
std::atomic<long> g_moved{0};
std::atomic<long> g_complete{0};
std::atomic<long> g_balances{0};

struct Walker : weft::array_element<Walker, int> {
  Walker() = default;
  std::vector<int> next;  // per sending element: the number expected next
  int ticks = 0;
  void pup(weft::pupper& p) { p | next | ticks; }
  void on_migrated() override { ++g_moved; }

  void init() { next.assign(std::size_t(array_size()), 0); }
  void from(int sender, int k) {
    int& want = next.at(std::size_t(sender));
    PE_CHECK(k == want, "element " + std::to_string(this_index()) + " got " + std::to_string(k) +
                            " from element " + std::to_string(sender) + ", expected " +
                            std::to_string(want));
    want = k + 1;
  }
  void tick(int round) {
    PE_CHECK(round == ticks, "element " + std::to_string(this_index()) + " ran round " +
                                 std::to_string(round) + " after " + std::to_string(ticks));
    ticks = round + 1;
    const int n = array_size(), i = this_index();
    for (int d : {1, 3}) this_proxy()[(i + d) % n].send<&Walker::from>(i, round);
    if (round + 1 == g_rounds) return;
    this_proxy()[i].send<&Walker::tick>(round + 1);
    if (g_on_demand && i == 0 && round % 25 == 10) {
      ++g_balances;
      weft::lb::balance();
    }
  }
  void check() {
    const int n = array_size(), i = this_index();
    bool all = ticks == g_rounds;
    for (int s = 0; s < n; ++s) {
      const bool sends_here = (s + 1) % n == i || (s + 3) % n == i;
      if (next[std::size_t(s)] != (sends_here ? g_rounds : 0)) all = false;
    }
    PE_CHECK(all, "element " + std::to_string(i) + " did not get every message");
    if (all) ++g_complete;
  }
};

class UnassistedOrder : public PesTest {};

void run_walk(int pes, int n, std::vector<std::string> opts) {
  g_moved = 0;
  g_complete = 0;
  g_balances = 0;
  ASSERT_EQ(run_pes(
                pes,
                [n]() -> weft::task<> {
                  auto a = weft::array<Walker>::create(n);
                  a.broadcast<&Walker::init>();
                  co_await quiescence();
                  a.broadcast<&Walker::tick>(0);
                  co_await quiescence();
                  a.broadcast<&Walker::check>();
                  co_await quiescence();
                  weft::exit(0);
                },
                std::move(opts)),
            0);
  expect_no_pe_errors();
  EXPECT_EQ(g_complete.load(), n);
}

// On one PE nothing moves, but every step still pauses and resumes the
// array: nothing that waited may be lost or reordered.
TEST_P(UnassistedOrder, PeriodicStepsKeepEachSendersOrder) {
  g_on_demand = false;
  g_rounds = int(scaled(6000, 2000));
  run_walk(pes(), 2 * pes() + 5, {"--weft:lb=rotate", "--weft:lb-period=0.0002"});
  if (pes() > 1) {
    EXPECT_GT(g_moved.load(), 0);
  }
}

TEST_P(UnassistedOrder, StepsOnDemandKeepEachSendersOrder) {
  g_on_demand = true;
  g_rounds = int(scaled(400, 150));
  run_walk(pes(), 2 * pes() + 5, {"--weft:lb=random"});
  EXPECT_GT(g_balances.load(), 0);
  if (pes() > 1) {
    EXPECT_GT(g_moved.load(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Pes, UnassistedOrder, testing::Values(1, 2, 4, 7), pes_name);

}  // namespace
