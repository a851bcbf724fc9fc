// What an explicit OpenMP task costs in what the team's threads share, at
// teams of 2, 4, 8 and 16 threads (issue 25; DESIGN.md, lesson 13): one
// thread (`single`) makes the tasks, the others take them. Each thread
// reads its own counts (weft/base/op_counts.hpp) at the region's start and
// after the single's barrier, where every task is done; the sums over the
// team are divided by the tasks:
//  - shared read-modify-writes (team-wide counters, locks, a thief's
//    compare-and-swap) per task must not grow faster than O(log P). With
//    one team-wide queue under a mutex, every poll of an idle thread took
//    that mutex: P - 1 pollers per task;
//  - peer visits (deques probed) per poll (a steal attempt) must stay
//    below 1 + log2 P: a thief probes O(log P) deques, never all of them.
//    The polls themselves are not bounded per task -- an idle thread polls
//    as long as it waits -- so they are not asserted.
// Two patterns: independent tasks, in batches below the 64-per-thread
// bound past which a task runs at once (a batch then a taskwait), and a
// depend(inout) chain.
// The team runs on as many PEs as threads: 16 PEs on a 2-core machine
// oversubscribe it, which is fine for counting.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>
#include "omp/run_weft.hpp"
#include "op_growth.hpp"
#include "weft/base/op_counts.hpp"
#include "weft/weft.hpp"

namespace {

using weft::base::op;
using weft::base::op_counts;

using weft_test::run_weft;

enum class pattern { independent, chain };

// A task's body: long enough (about a microsecond) for thieves to find
// tasks queued.
void work() {
  for (int i = 0; i < 500; ++i) __asm__ volatile("" ::: "memory");
}

constexpr long batch = 100;  // below 64 tasks per thread of a team of 2
constexpr long batches = 20;
constexpr long chain_tasks = 1000;
constexpr int repeats = 3;

// The team's counts, summed, over the tasks made by one thread of a team
// of `p` on `p` PEs; `ran` gets the tasks that ran.
op_counts team_counts(int p, pattern k, long& ran) {
  std::vector<op_counts> before(static_cast<std::size_t>(p)), after(static_cast<std::size_t>(p));
  long done = 0, x = 0;
  const int rc = run_weft(p, [&] {
#pragma omp parallel num_threads(p)
    {
      const auto id = std::size_t(omp_get_thread_num());
      before[id] = weft::base::this_thread_op_counts();
      // Every thread is there to take tasks (not still starting).
#pragma omp barrier
#pragma omp single
      {
        if (k == pattern::independent) {
          for (long b = 0; b < batches; ++b) {
            for (long i = 0; i < batch; ++i) {
#pragma omp task shared(done)
              {
                work();
                __atomic_fetch_add(&done, 1, __ATOMIC_RELAXED);
              }
            }
#pragma omp taskwait
          }
        } else {
          for (long i = 0; i < chain_tasks; ++i) {
#pragma omp task depend(inout : x) shared(x)
            {
              work();
              ++x;
            }
          }
        }
      }
      // The single's barrier: every task ran.
      after[id] = weft::base::this_thread_op_counts();
    }
    weft::exit(0);
  });
  EXPECT_EQ(rc, 0);
  ran = k == pattern::independent ? done : x;
  op_counts sum;
  for (int i = 0; i < p; ++i) sum += after[std::size_t(i)] - before[std::size_t(i)];
  return sum;
}

void check(pattern k, const char* name) {
  const long tasks = k == pattern::independent ? batch * batches : chain_tasks;
  std::map<int, double> rmw_per_task;
  for (int p : {2, 4, 8, 16})
    for (int r = 0; r < repeats; ++r) {
      long ran = 0;
      const op_counts c = team_counts(p, k, ran);
      ASSERT_EQ(ran, tasks) << name << ", team of " << p;
      const double rmw = double(c[op::shared_rmw]) / double(tasks);
      rmw_per_task[p] = std::max(rmw_per_task[p], rmw);
      const double polls = double(c[op::poll]);
      std::printf("%s, team of %d: %.2f shared_rmw, %.2f peer_visit, %.2f polls per task\n", name,
                  p, rmw, double(c[op::peer_visit]) / double(tasks), polls / double(tasks));
      // Polls are not compared: the PEs' own idle polls (the tasks layer's
      // steal attempts, its visible marks) fall in the same window, as
      // many as the run's idle time makes; a steal attempt's probes are
      // bounded by construction (task_queue.cpp, steal_probes).
    }
  // The worst of the repeats at each P (how many idle polls fall in a run
  // varies). Slack 2: whether a task is stolen (a compare-and-swap more) or run by
  // its creator varies from run to run, so the figures at each P lie
  // within 1 of each other in any order; one team-wide lock per idle poll
  // adds tens to hundreds per doubling.
  EXPECT_TRUE(weft_test::grows_at_most_log(std::string(name) + ": shared_rmw", rmw_per_task, 2.0));
}

TEST(OmpTaskCounts, IndependentTasksShareOLogPLinesPerTask) {
  check(pattern::independent, "independent tasks");
}

TEST(OmpTaskCounts, DependChainSharesOLogPLinesPerTask) {
  check(pattern::chain, "depend(inout) chain");
}

}  // namespace
