// What core's wake-up path reads of other PEs, counted
// (weft/base/op_counts.hpp) at 2, 4, 8 and 16 PEs: a producer that wakes a
// sleeping PE must find it without reading every PE's sleep word (DESIGN.md,
// lesson 13). A 2-core machine cannot time 16 PEs; it can count for them.
#include <gtest/gtest.h>

#include <sched.h>
#include <atomic>
#include <map>
#include "core/node.hpp"
#include "core/support.hpp"
#include "op_growth.hpp"
#include "weft/base/op_counts.hpp"
#include "weft/weft.hpp"

namespace {

using weft::base::op;
using weft_test::grows_at_most_log;
using weft_test::run_node;
using weft_test::threads_opt;

std::atomic<bool> g_hold{false};
std::atomic<int> g_held{0};

// Keeps its PE busy (not idle, not asleep) until g_hold drops.
void on_hold(weft::message_ptr) {
  g_held.fetch_add(1);
  while (g_hold.load()) sched_yield();
}
const weft::handler_id h_hold = weft::register_handler("test.op_growth.hold", &on_hold);

int sleepers() {
  return weft::core::g_node.load()->sleepers.load();
}

// The worst case of a scan: one sleeper, the last PE, all others busy.
// Waking it (core::wake_sleepers, what detail::wake_idle_pes and the node
// queue call) counts these wake_probe reads (or -1: the node failed).
long wake_probes_for_the_last_pe(int pes) {
  g_hold.store(true);
  g_held.store(0);
  std::uint64_t counted = 0;
  const int code =
      run_node({threads_opt(pes), "--weft:idle-spin-us=0", "--weft:idle-yield-us=0"}, [&] {
        for (int r = 1; r + 1 < pes; ++r) weft::send(r, weft::make_message(h_hold, 0));
        // The sleeper may wake by itself (a spurious futex return, a
        // sanitizer's signal) between the look and the wake-up: measure a
        // wake-up that found it asleep.
        for (int woken = 0; woken == 0;) {
          while (g_held.load() != pes - 2 || sleepers() != 1) sched_yield();
          const weft::base::op_counts before = weft::base::this_thread_op_counts();
          woken = weft::core::wake_sleepers(*weft::core::g_node.load(), nullptr, 1);
          counted = (weft::base::this_thread_op_counts() - before)[op::wake_probe];
        }
        g_hold.store(false);
        weft::exit(0);
      });
  return code == 0 ? long(counted) : -1;
}

// It reads one mask word and its sleep word, at any P up to 64.
TEST(CoreOpGrowth, WakingTheOneSleeperReadsAWordNotEveryPE) {
  std::map<int, double> visits;
  for (int pes : {2, 4, 8, 16}) {
    const long counted = wake_probes_for_the_last_pe(pes);
    ASSERT_GE(counted, 0) << "the node failed";
    visits[pes] = double(counted);
    EXPECT_GE(counted, 2) << "the mask word and the sleeper's word";
  }
  EXPECT_TRUE(grows_at_most_log("PE states read to wake the one sleeper", visits, 0.25));
}

// Past 64 PEs the sleeper mask takes a word per 64: a sleeper in the last
// word (PE 129 of 130, the others busy) is found and woken, after one read
// of each word and of its sleep word.
TEST(CoreOpGrowth, ASleeperInTheLastMaskWordIsWoken) {
  EXPECT_EQ(wake_probes_for_the_last_pe(130), 4) << "three mask words and the sleeper's sleep word";
}

}  // namespace
