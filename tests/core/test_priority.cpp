// Message priorities: among the messages waiting at a PE, higher priority
// runs first, equal priorities in arrival order; with no priorities the
// order is plain FIFO.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <random>
#include <vector>
#include "core/support.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::run_node;

struct tagged {
  int priority;
  int seq;
};

std::mutex g_mutex;
std::vector<tagged> g_order;  // guarded by g_mutex

void on_record(weft::message_ptr m) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_order.push_back(m->as<tagged>());
}
const weft::handler_id h_record = weft::register_handler("priority.record", on_record);

// Sends from main_fn, which runs on PE 0 before its scheduler loop starts,
// so every message is queued when the loop first looks.
std::vector<tagged> send_all_then_collect(const std::vector<std::string>& opts,
                                          const std::vector<int>& priorities) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_order.clear();
  }
  int rc = run_node(opts, [&] {
    for (int i = 0; i < int(priorities.size()); ++i) {
      weft::message_ptr m =
          weft::make_message_with(h_record, tagged{priorities[std::size_t(i)], i});
      m->priority = priorities[std::size_t(i)];
      weft::send(0, std::move(m));
    }
    weft::exit_at_quiescence(0);
  });
  EXPECT_EQ(rc, 0);
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_order;
}

class Priority : public ::testing::TestWithParam<const char*> {};

TEST_P(Priority, HigherFirstAndFifoAmongEquals) {
  std::mt19937 rng(7);
  std::vector<int> prios(2000);
  for (auto& p : prios) p = int(rng() % 7) - 3;  // negative, zero and positive
  auto order = send_all_then_collect({"--weft:threads=2", GetParam()}, prios);
  ASSERT_EQ(order.size(), prios.size());
  for (std::size_t i = 1; i < order.size(); ++i) {
    ASSERT_GE(order[i - 1].priority, order[i].priority) << "at " << i;
    if (order[i - 1].priority == order[i].priority) {
      ASSERT_LT(order[i - 1].seq, order[i].seq);
    }
  }
}

TEST_P(Priority, NoPrioritiesMeansFifo) {
  std::vector<int> prios(3000, 0);
  auto order = send_all_then_collect({"--weft:threads=1", GetParam()}, prios);
  ASSERT_EQ(order.size(), prios.size());
  for (std::size_t i = 0; i < order.size(); ++i) ASSERT_EQ(order[i].seq, int(i));
}

INSTANTIATE_TEST_SUITE_P(Queues, Priority,
                         ::testing::Values("--weft:queue=mpsc", "--weft:queue=spsc-pairs"));

}  // namespace
