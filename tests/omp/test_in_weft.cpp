// OpenMP regions inside a weft program (libweft-omp linked statically with
// weft::weft): regions met in the main function, and regions of many
// objects at once, run on the node's PEs, with no thread of their own, the
// threads of one team on OS threads of their own (with
// --weft:ult-isolate=all every OpenMP thread keeps its thread-locals, with
// no more OS threads than OpenMP threads alive); barriers inside them do not
// block the PEs (other messages keep flowing); an OpenMP region and
// weft::parallel_for nest; threads beyond the PEs run on carriers that see
// their PE and run parallel_for alone.
#include <gtest/gtest.h>
#include <omp.h>

#include <dirent.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>
#include <vector>
#include "omp/run_weft.hpp"
#include "op_growth.hpp"
#include "weft/base/op_counts.hpp"
#include "weft/threads/ult.hpp"
#include "weft/weft.hpp"

namespace {

// ThreadSanitizer starts a thread of its own at some point of the run.
#if defined(__SANITIZE_THREAD__)
constexpr int sanitizer_threads = 1;
#else
constexpr int sanitizer_threads = 0;
#endif

int os_threads() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

std::atomic<int> g_max_threads{0};
void note_threads() {
  const int n = os_threads();
  int cur = g_max_threads.load();
  while (n > cur && !g_max_threads.compare_exchange_weak(cur, n)) {
  }
}

using weft_test::run_weft;

TEST(OmpInWeft, RegionInMainRunsOnThePesAndNoOtherThread) {
  g_max_threads = 0;
  std::set<int> pes_seen;
  std::atomic<long> sum{0};
  int team = 0;
  const int baseline = os_threads();
  const int rc = run_weft(4, [&] {
#pragma omp parallel
    {
      note_threads();
#pragma omp critical
      pes_seen.insert(weft::my_pe());
#pragma omp single
      team = omp_get_num_threads();
      long local = 0;
#pragma omp for schedule(dynamic, 3)
      for (int i = 0; i < 1000; ++i) local += i;
      sum += local;
    }
    weft::exit(0);
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(team, 4);
  EXPECT_EQ(sum.load(), 999L * 1000 / 2);
  // Which PE runs which thread depends on timing (a member not started in
  // time runs on thread 0's PE); that they are the node's PEs does not.
  ASSERT_FALSE(pes_seen.empty());
  EXPECT_GE(*pes_seen.begin(), 0);
  EXPECT_LE(*pes_seen.rbegin(), 3);
  // The test's own thread is PE 0; weft adds PEs 1..3 and its watchdog.
  EXPECT_LE(g_max_threads.load(), baseline + 3 + 1 + sanitizer_threads);
}

// Eight objects on two PEs, each running a region of two threads with a
// barrier in the middle, all at once: every region completes with the right
// result, the two threads of a region on OS threads of their own. By
// default the teams share the PEs' threads; with --weft:ult-isolate=all
// each OpenMP thread also keeps its thread-local value across the barrier
// while the other regions run. Either way the process has at most a thread
// per OpenMP thread alive at once (8 regions of 2), never a pool per PE:
// by default a carrier appears only for a member rescued from a PE that
// stayed inside another object's handler (a loaded machine, a sanitizer).
std::atomic<int> g_done{0};
std::atomic<long> g_bad{0};
std::atomic<long> g_bad_tls{0};
bool g_isolate_all = false;
thread_local long t_mine = -1;

struct Obj : weft::array_element<Obj, int> {
  void run(int rounds) {
    for (int r = 0; r < rounds; ++r) {
      std::vector<long> part(2, 0);
      const void* where[2] = {nullptr, nullptr};
#pragma omp parallel num_threads(2)
      {
        note_threads();
        const int me = omp_get_thread_num();
        part[std::size_t(me)] = me + 1;
        const long mark = (long(this_index()) * 1000 + r) * 2 + me;
        t_mine = mark;
        where[me] = &t_mine;
#pragma omp barrier
        // After the barrier every thread sees every part.
        long seen = 0;
        for (int i = 0; i < omp_get_num_threads(); ++i) seen += part[std::size_t(i)];
        if (seen != (omp_get_num_threads() == 2 ? 3 : 1)) g_bad.fetch_add(1);
        if (g_isolate_all && t_mine != mark) g_bad_tls.fetch_add(1);
        if (omp_get_num_threads() == 2 && where[0] == where[1]) g_bad_tls.fetch_add(1);
      }
    }
    if (g_done.fetch_add(1) + 1 == 8) weft::exit(0);
  }
};

void many_objects(bool isolate_all) {
  g_done = 0;
  g_bad = 0;
  g_bad_tls = 0;
  g_max_threads = 0;
  g_isolate_all = isolate_all;
  const int baseline = os_threads();
  const int rc = run_weft(
      2,
      [] {
        auto objs = weft::array<Obj>::create(8);
        objs.broadcast<&Obj::run>(50);
      },
      isolate_all ? "--weft:ult-isolate=all" : "");
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(g_done.load(), 8);
  EXPECT_EQ(g_bad.load(), 0);
  EXPECT_EQ(g_bad_tls.load(), 0);
  // PE 1, the watchdog, and at most a carrier per object's second thread.
  EXPECT_LE(g_max_threads.load(), baseline + 1 + 1 + 8 + sanitizer_threads);
}

TEST(OmpInWeft, ManyObjectsRunRegionsWithBarriersAtOnce) {
  many_objects(false);
}

TEST(OmpInWeft, ManyObjectsRunRegionsAtOnceEachThreadWithItsOwnThreadLocals) {
  many_objects(true);
}

// While a region's threads wait at a barrier, their PEs keep handling
// messages: a region whose thread 1 waits at the barrier, as a fiber on PE
// 1's own OS thread, for a message that thread 0 sends to PE 1 only then,
// completes -- PE 1's scheduler ran the message's handler on that very OS
// thread while thread 1 waited there. Where thread 1 runs is checked, not
// assumed: on a carrier (of PE 0, rescued from a PE 1 that looked held up
// inside a handler; or of PE 1, its thread taken) the region would complete
// without the path being taken. Thread 0 waits only at the barrier, after
// thread 1 got there, so nothing rescues thread 1 here; the rescue bound at
// its maximum (10 s) keeps it so should thread 0 wait sooner some day.
std::atomic<bool> g_flag{false};
std::atomic<bool> g_t1_waiting{false};  // thread 1 is at the barrier
std::atomic<bool> g_t1_passed{false};   // thread 1 is past the barrier
std::atomic<int> g_flag_pe{-2};         // where on_flag ran
std::atomic<bool> g_flag_saw_t1_waiting{false};
std::atomic<pid_t> g_flag_tid{0};
void on_flag(weft::message_ptr) {
  g_flag_pe = weft::threads::on_carrier() ? -1 : weft::threads::current_pe();
  g_flag_tid = gettid();
  g_flag_saw_t1_waiting = g_t1_waiting.load() && !g_t1_passed.load();
  g_flag = true;
}
const weft::handler_id h_flag = weft::register_handler("omp_test.flag", on_flag);

TEST(OmpInWeft, PesKeepHandlingMessagesWhileARegionWaits) {
  g_flag = false;
  g_t1_waiting = false;
  g_t1_passed = false;
  g_flag_pe = -2;
  g_flag_saw_t1_waiting = false;
  g_flag_tid = 0;
  int team = 0;
  int t1_pe = -2;  // -1: on a carrier
  pid_t t1_tid = 0;
  bool region_done = false;
  const int rc = run_weft(
      2,
      [&] {
#pragma omp parallel num_threads(2)
        {
          if (omp_get_thread_num() == 0) {
            team = omp_get_num_threads();
            // Thread 1 (if the team has one) waits at the barrier first.
            while (team == 2 && !g_t1_waiting.load()) {
#pragma omp taskyield
            }
            // To PE 1, where thread 1 of this region waits at the barrier below.
            weft::send(1, weft::make_message(h_flag, 0));
            while (!g_flag.load()) {
#pragma omp taskyield
            }
          } else {
            t1_pe = weft::threads::on_carrier() ? -1 : weft::threads::current_pe();
            t1_tid = gettid();
            g_t1_waiting = true;
          }
#pragma omp barrier
          if (omp_get_thread_num() == 1) g_t1_passed = true;
        }
        region_done = true;
        weft::exit(0);
      },
      "--weft:ult-rescue-us=10000000");
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(region_done);
  ASSERT_EQ(team, 2);
  ASSERT_EQ(t1_pe, 1) << "thread 1 ran on PE 1's own thread (-1: a carrier)";
  EXPECT_EQ(g_flag_pe.load(), 1) << "the message was handled by PE 1's own thread";
  EXPECT_TRUE(g_flag_saw_t1_waiting.load()) << "while thread 1 waited at the barrier";
  EXPECT_EQ(g_flag_tid.load(), t1_tid) << "on the OS thread where thread 1 waited";
}

TEST(OmpInWeft, ParallelForInsideARegionAndARegionInsideParallelFor) {
  std::atomic<long> a{0}, b{0};
  const int rc = run_weft(2, [&] {
#pragma omp parallel num_threads(2)
    {
      weft::parallel_for(0, 100, [&](int i) { a += i; });
    }
    weft::parallel_for(0, 4, [&](int) {
      long s = 0;
#pragma omp parallel for reduction(+ : s)
      for (int i = 0; i < 100; ++i) s += i;
      b += s;
    });
    weft::exit(0);
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(a.load(), 2 * 4950);
  EXPECT_EQ(b.load(), 4 * 4950);
}

// A member whose PE stays inside one handler -- a handler that spins until
// that very member has run -- starts on a carrier once thread 0 has waited
// --weft:ult-rescue-us for it: the region ends, and the handler with it.
std::atomic<bool> g_member_ran{false};
std::atomic<bool> g_spinner_in{false};
void on_spin_until_member(weft::message_ptr) {
  g_spinner_in = true;
  while (!g_member_ran.load()) {
  }
}
const weft::handler_id h_spin = weft::register_handler("omp_test.spin", on_spin_until_member);

TEST(OmpInWeft, MemberHeldUpBehindABusyPeStartsOnACarrier) {
  g_member_ran = false;
  g_spinner_in = false;
  int team = 0;
  const int rc = run_weft(2, [&] {
    weft::send(1, weft::make_message(h_spin, 0));
    while (!g_spinner_in.load()) {
    }
#pragma omp parallel num_threads(2)
    {
#pragma omp master
      team = omp_get_num_threads();
      if (omp_get_thread_num() == 1) g_member_ran = true;
    }
    weft::exit(0);
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(team, 2);
  EXPECT_TRUE(g_member_ran.load());
}

// A team larger than the PEs: its threads beyond them run on carriers,
// which see their PE's numbers and run weft::parallel_for alone (they have
// no deque of a PE's to share it from), with the right result.
TEST(OmpInWeft, ThreadsBeyondThePesSeeTheirPeAndRunParallelForAlone) {
  std::atomic<long> bad_pe{0}, total{0};
  int team = 0;
  const int rc = run_weft(2, [&] {
#pragma omp parallel num_threads(5)
    {
#pragma omp master
      team = omp_get_num_threads();
      if (weft::my_pe() < 0 || weft::my_pe() > 1 || weft::node_size() != 2) ++bad_pe;
      total += weft::parallel_for(0, 1000, weft::reduce::sum, [](int i) { return long(i); });
    }
    weft::exit(0);
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(team, 5);
  EXPECT_EQ(bad_pe.load(), 0);
  EXPECT_EQ(total.load(), 5L * 999 * 1000 / 2);
}

// A member whose PE sleeps in the kernel inside a handler (blocked on a lock
// that thread 0 holds until the region ends) starts on a carrier: the
// region ends, and the handler after it.
std::mutex g_lock;
std::atomic<bool> g_blocker_in{false};
void on_block_on_lock(weft::message_ptr) {
  g_blocker_in = true;
  std::lock_guard<std::mutex> hold(g_lock);
}
const weft::handler_id h_block = weft::register_handler("omp_test.block", on_block_on_lock);

TEST(OmpInWeft, MemberHeldUpBehindABlockedPeStartsOnACarrier) {
  g_blocker_in = false;
  std::atomic<int> ran{0};
  const int rc = run_weft(2, [&] {
    {
      std::unique_lock<std::mutex> hold(g_lock);
      weft::send(1, weft::make_message(h_block, 0));
      while (!g_blocker_in.load()) {
      }
#pragma omp parallel num_threads(2)
      ++ran;
    }
    weft::exit(0);
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(ran.load(), 2);
}

// Issue 25: a region's and a barrier's path touch no more of what other
// threads touch as the team grows than O(log P) -- counted, since a 2-core
// machine cannot time 16 cores (tests/op_growth.hpp). Per empty region,
// thread 0 (whose path is the region's critical one) starts its children
// of the fork tree (at most 4 start messages, where it once sent P - 1)
// and drops its reference to the team; per barrier, no member does more
// than climb the arrival tree (log4 P counters) and wake four sleepers,
// also the last to arrive when every other one sleeps. Teams of
// 2, 4, 8 and 16 threads on as many PEs (oversubscribed here), no rescue
// (a loaded machine would start members on carriers at random).
struct team_counts {
  std::map<int, double> region_visits, region_rmw, barrier_visits, barrier_rmw;
};

void count_team(int pes, team_counts& out) {
  constexpr int regions = 200, barriers = 200;
  using weft::base::op;
  using weft::base::this_thread_op_counts;
  const int rc = run_weft(
      pes,
      [&] {
  // The first region makes the team; later ones recycle it.
#pragma omp parallel num_threads(pes)
        asm volatile("" ::: "memory");
        const weft::base::op_counts before = this_thread_op_counts();
        for (int r = 0; r < regions; ++r) {
#pragma omp parallel num_threads(pes)
          asm volatile("" ::: "memory");
        }
        const weft::base::op_counts region = this_thread_op_counts() - before;
        out.region_visits[pes] = double(region[op::peer_visit]) / regions;
        out.region_rmw[pes] = double(region[op::shared_rmw]) / regions;
        std::vector<weft::base::op_counts> member(static_cast<std::size_t>(pes));
        int team = 0;
#pragma omp parallel num_threads(pes)
        {
#pragma omp single
          team = omp_get_num_threads();
          const weft::base::op_counts b0 = this_thread_op_counts();
          for (int r = 0; r < barriers; ++r) {
            // Thread 0 comes last, after the others fell asleep (it gives
            // the CPUs to them meanwhile): its release wakes them.
            if (omp_get_thread_num() == 0)
              std::this_thread::sleep_for(std::chrono::microseconds(300));
#pragma omp barrier
          }
          member[std::size_t(omp_get_thread_num())] = this_thread_op_counts() - b0;
        }
        EXPECT_EQ(team, pes);
        double visits = 0, rmw = 0;
        for (const weft::base::op_counts& m : member) {
          visits = std::max(visits, double(m[op::peer_visit]) / barriers);
          rmw = std::max(rmw, double(m[op::shared_rmw]) / barriers);
        }
        out.barrier_visits[pes] = visits;
        out.barrier_rmw[pes] = rmw;
        weft::exit(0);
      },
      "--weft:ult-rescue-us=10000000");
  EXPECT_EQ(rc, 0);
}

TEST(OmpInWeft, RegionAndBarrierPathsGrowAtMostLogP) {
  team_counts c;
  for (int pes : {2, 4, 8, 16}) count_team(pes, c);
  // Thread 0's counts per region are exact (its children, and one
  // reference); a barrier's maximum depends on who happens to arrive last
  // (up to 1 + levels read-modify-writes) and who slept: slack 3.
  EXPECT_TRUE(
      weft_test::grows_at_most_log("thread 0's peer visits per region", c.region_visits, 0.5));
  EXPECT_TRUE(weft_test::grows_at_most_log("thread 0's shared read-modify-writes per region",
                                           c.region_rmw, 0.5));
  EXPECT_TRUE(weft_test::grows_at_most_log("a member's peer visits per barrier (max)",
                                           c.barrier_visits, 3));
  EXPECT_TRUE(weft_test::grows_at_most_log("a member's shared read-modify-writes per barrier (max)",
                                           c.barrier_rmw, 3));
  // The fork tree: thread 0 starts at most 4 members.
  EXPECT_EQ(c.region_visits[16], 4);
}

// Teams of any size, on 4 PEs: beyond the PEs (carriers), odd sizes whose
// fork and arrival trees are ragged, nested teams, and recycled teams (the
// same size again): every thread meets every barrier, sees every other
// thread's write from before it, and the region ends with every thread
// done.
TEST(OmpInWeft, TeamsOfAnySizeMeetBarriersAndEnd) {
  std::atomic<long> bad{0};
  const int rc = run_weft(4, [&] {
    for (int round = 0; round < 3; ++round) {
      for (int n : {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33}) {
        std::vector<int> seen(std::size_t(n), -1);
        std::atomic<int> ran{0};
#pragma omp parallel num_threads(n)
        {
          const int me = omp_get_thread_num();
          if (omp_get_num_threads() != n) bad.fetch_add(1);
          ++ran;
          for (int phase = 0; phase < 4; ++phase) {
            seen[std::size_t(me)] = phase;
#pragma omp barrier
            for (int i = 0; i < n; ++i)
              if (seen[std::size_t(i)] != phase) bad.fetch_add(1);
#pragma omp barrier
          }
        }
        if (ran.load() != n) bad.fetch_add(1);
      }
    }
    // Nested: teams of 3 in a team of 3 (inner members on carriers where
    // their PE's thread runs an outer one).
    omp_set_max_active_levels(2);
    std::atomic<int> inner{0};
    for (int round = 0; round < 5; ++round) {
#pragma omp parallel num_threads(3)
      {
#pragma omp parallel num_threads(3)
        {
          if (omp_get_num_threads() != 3 || omp_get_level() != 2) bad.fetch_add(1);
#pragma omp barrier
          ++inner;
        }
#pragma omp barrier
      }
    }
    omp_set_max_active_levels(1);
    if (inner.load() != 5 * 9) bad.fetch_add(1);
    weft::exit(0);
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(bad.load(), 0);
}

// Past 64 PEs: teams of one thread per PE and more, on 130 PEs, meet
// their barriers, share a loop's iterations exactly once and finish their
// tasks (the start and wake-up trees and the task deques' victim draws
// index past the first 64).
TEST(OmpInWeft, TeamsPastSixtyFourPesMeetBarriersShareLoopsAndRunTasks) {
  std::atomic<long> bad{0};
  const int rc = run_weft(130, [&] {
    for (int n : {65, 130, 131}) {
      std::vector<int> seen(std::size_t(n), -1);
      std::vector<std::atomic<int>> hits(1000);
      std::atomic<int> tasks{0};
#pragma omp parallel num_threads(n)
      {
        const int me = omp_get_thread_num();
        if (omp_get_num_threads() != n) bad.fetch_add(1);
        for (int phase = 0; phase < 3; ++phase) {
          seen[std::size_t(me)] = phase;
#pragma omp barrier
          for (int i = 0; i < n; ++i)
            if (seen[std::size_t(i)] != phase) bad.fetch_add(1);
#pragma omp barrier
        }
#pragma omp for schedule(dynamic, 3)
        for (int i = 0; i < 1000; ++i) hits[std::size_t(i)].fetch_add(1);
        if (me == n - 1)
          for (int k = 0; k < 500; ++k) {
#pragma omp task shared(tasks)
            tasks.fetch_add(1);
          }
      }
      for (auto& h : hits)
        if (h.load() != 1) bad.fetch_add(1);
      if (tasks.load() != 500) bad.fetch_add(1);
    }
    weft::exit(0);
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(bad.load(), 0);
}

// The fork tree with a held-up starter: of a team of 6 on 6 PEs, member 1
// starts member 5 (thread 0 starts 1..4). PE 1 stays inside a handler
// that spins until member 5 has run: thread 0 rescues member 1 onto a
// carrier, which starts member 5 on PE 5 -- a member that starts others is
// not lost with its PE.
std::atomic<bool> g_member5_ran{false};
std::atomic<bool> g_spinner1_in{false};
void on_spin_until_member5(weft::message_ptr) {
  g_spinner1_in = true;
  while (!g_member5_ran.load()) {
  }
}
const weft::handler_id h_spin5 = weft::register_handler("omp_test.spin5", on_spin_until_member5);

TEST(OmpInWeft, MemberThatStartsOthersHeldUpBehindABusyPeStartsOnACarrier) {
  g_member5_ran = false;
  g_spinner1_in = false;
  std::atomic<int> ran{0};
  const int rc = run_weft(6, [&] {
    weft::send(1, weft::make_message(h_spin5, 0));
    while (!g_spinner1_in.load()) {
    }
#pragma omp parallel num_threads(6)
    {
      ++ran;
      if (omp_get_thread_num() == 5) g_member5_ran = true;
    }
    weft::exit(0);
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(ran.load(), 6);
  EXPECT_TRUE(g_member5_ran.load());
}

// The objects layer needs its PE's state: on a carrier it refuses, naming
// why and what to do.
struct Lone : weft::array_element<Lone, int> {
  void ping() {}
};

// (A function of its own: a pragma inside a macro's arguments applies to
// the whole macro.)
void send_from_a_carrier() {
  run_weft(2, [] {
    auto lone = weft::array<Lone>::create(1);
#pragma omp parallel num_threads(3)
    {
      if (omp_get_thread_num() == 2) lone[0].send<&Lone::ping>();
    }
    weft::exit(0);
  });
}

TEST(OmpInWeftDeathTest, ObjectsApiOnACarrierSaysWhyItRefuses) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(send_from_a_carrier(), testing::ExitedWithCode(3),
              "called on a guest of PE 0: an OpenMP thread that runs on a carrier");
}

}  // namespace
