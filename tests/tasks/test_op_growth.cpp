// What the tasks layer's per-operation paths touch of other PEs, counted
// (weft/base/op_counts.hpp) at 2, 4, 8 and 16 PEs: none may grow faster
// than O(log P) (DESIGN.md, lesson 13). A 2-core machine cannot time 16 PEs;
// it can count for them.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <vector>
#include "core/support.hpp"
#include "op_growth.hpp"
#include "tasks/loop.hpp"
#include "weft/base/op_counts.hpp"
#include "weft/weft.hpp"

namespace {

using weft::base::op;
using weft_test::grows_at_most_log;
using weft_test::run_node;
using weft_test::threads_opt;

constexpr int pe_counts[] = {2, 4, 8, 16};

// Runs fn on PE 0 of a node of `pes` PEs, then ends the run.
void on_node(int pes, const std::function<void()>& fn) {
  const int code = run_node({threads_opt(pes)}, [&] {
    fn();
    weft::exit(0);
  });
  ASSERT_EQ(code, 0);
}

// A steal attempt with nothing to steal anywhere probes a bounded number of
// victims (2 + log2 P), not every PE: every idle PE makes one per turn.
TEST(TasksOpGrowth, StealAttemptProbesLogPVictims) {
  std::map<int, double> visits, rmws;
  for (int pes : pe_counts) {
    constexpr int attempts = 1000;
    weft::base::op_counts d;
    on_node(pes, [&] {
      using namespace weft::tasks::internal;
      const weft::base::op_counts before = weft::base::this_thread_op_counts();
      int stolen = 0;
      for (int i = 0; i < attempts; ++i) stolen += steal_one(*t_me) != nullptr ? 1 : 0;
      d = weft::base::this_thread_op_counts() - before;
      EXPECT_EQ(stolen, 0) << "no loop runs: there is nothing to steal";
    });
    ASSERT_EQ(d[op::wait_round], std::uint64_t(attempts)) << "one round per attempt";
    visits[pes] = double(d[op::poll]) / attempts;
    rmws[pes] = double(d[op::shared_rmw] + d[op::peer_visit]) / attempts;
    EXPECT_GE(visits[pes], 1.0) << "an attempt looks at one victim at least";
  }
  EXPECT_TRUE(grows_at_most_log("deques probed per steal attempt", visits, 0.25));
  EXPECT_TRUE(
      grows_at_most_log("shared RMWs and peer visits per failed steal attempt", rmws, 0.25));
}

// An idle PE's poll for exposed tasks reads the visible marks, a word per
// 64 PEs, and the deques they name: with no task anywhere, one word, where
// it read every PE's deque. After a loop, the marks its deques left are
// cleared by the first polls that find them empty.
TEST(TasksOpGrowth, IdlePollReadsMarksNotEveryDeque) {
  std::map<int, double> polls;
  for (int pes : pe_counts) {
    constexpr int calls = 1000;
    weft::base::op_counts d;
    bool visible_after = true;
    on_node(pes, [&] {
      using namespace weft::tasks::internal;
      weft::parallel_for(0, 1000, [](int) {}, {.grain = 1, .scheme = weft::tasks_scheme::split});
      hook_tasks_visible();  // clears what the loop left marked
      const weft::base::op_counts before = weft::base::this_thread_op_counts();
      for (int i = 0; i < calls; ++i) visible_after = hook_tasks_visible() && visible_after;
      d = weft::base::this_thread_op_counts() - before;
    });
    EXPECT_FALSE(visible_after) << "no task is left after the loop";
    polls[pes] = double(d[op::poll]) / calls;
  }
  EXPECT_TRUE(grows_at_most_log("words and deques read per idle poll", polls, 0.25));
}

// The default scheme's caller, for an empty loop of one iteration per PE:
// a look at the idle count, the mark of its deque, the completion count
// -- the same few touches at any P (it exposed one task per idle PE
// through a node-wide counter, two RMWs per task, and read the idle count
// at every chunk). Thieves' own costs and wake-ups are not the caller's.
// The fewest of three runs per P: a caller whose thieves the OS holds off
// (16 PEs on 2 CPUs under ThreadSanitizer, beside other tests) waits and
// looks again, touches that count the machine's load, not the algorithm
// (one such run read 4.5 at P=16 against 2.0 at every other P).
TEST(TasksOpGrowth, DefaultLoopCallerTouchesStayFlat) {
  std::map<int, double> touches;
  for (int pes : pe_counts) {
    constexpr int loops = 500;
    for (int run = 0; run < 3; ++run) {
      weft::base::op_counts d;
      on_node(pes, [&] {
        const weft::base::op_counts before = weft::base::this_thread_op_counts();
        for (int k = 0; k < loops; ++k) weft::parallel_for(0, pes, [](int) {}, {.grain = 1});
        d = weft::base::this_thread_op_counts() - before;
      });
      const double t = double(d[op::peer_visit] + d[op::shared_rmw]) / loops;
      touches[pes] = run == 0 ? t : std::min(touches[pes], t);
    }
  }
  EXPECT_TRUE(
      grows_at_most_log("peer visits and shared RMWs per empty loop, caller", touches, 1.5));
}

// Whatever it finds, an attempt stays within its probes, and a task exposed
// anywhere is found by repeated attempts (bounded probes must not make a
// task invisible): each PE but the caller steals from the caller's deque
// until the loop is done.
TEST(TasksOpGrowth, BoundedProbesStillFindEveryTask) {
  for (int pes : pe_counts) {
    std::atomic<long> ran{0};
    on_node(pes, [&] {
      const long n = 4096;
      for (int rep = 0; rep < 20; ++rep)
        weft::parallel_for(0L, n, [&](long) { ran.fetch_add(1, std::memory_order_relaxed); },
                           {.grain = 1, .scheme = weft::tasks_scheme::split});
    });
    EXPECT_EQ(ran.load(), 20 * 4096L) << pes << " PEs";
  }
}

}  // namespace
