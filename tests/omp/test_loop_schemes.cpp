// libweft-omp's loop schemes from inside (src/omp/loop_schemes.cpp; the
// static weft_omp linked with weft::weft, as task_counts.cpp): what each
// scheme offers and what history learns, made deterministic by bodies that
// hold threads until others have done their part -- never by timing.
// A team of 4 threads on 4 PEs, one per PE: a thread that holds its PE in
// its own code then delays no other member's start.
//  - history, everything offered stolen: thread 0 holds its first
//    iteration until the others ran every iteration it did not keep, so
//    each part it offered is stolen; its moving average rises at every
//    loop, toward 1, and so does the share it offers (what it keeps falls);
//  - history, nothing stolen: the others hold their first iteration until
//    thread 0 ran all of its block, so it takes every part back; the
//    average falls toward 0 at every loop;
//  - idle, nobody idle: each thread holds the last iteration of its block
//    until every thread reached its own last one, so no thread is idle
//    while another has work, and no part is offered;
//  - idle, three threads idle: thread 0 holds its first piece until the
//    three others are idle (their blocks done), then every part it offers
//    is taken before it goes on;
//  - --weft:omp-scheme is validated.
// Every iteration runs exactly once in each.
#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>
#include "core/support.hpp"
#include "omp/omp_internal.hpp"
#include "omp/run_weft.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::run_weft;
namespace wo = weft::omp;

constexpr int team = 4;
// The schemes split all but a loop's last iteration into static blocks
// (the first thread to leave the loop takes that one): blocks of 1000.
constexpr long n = 4001;
constexpr long block0 = (n - 1) / team;  // thread 0's block: [0, block0)
constexpr int loops = 6;

// Spins (yielding the CPU) until `done`; false after 60 s, so that a
// broken scheme fails the test instead of hanging it.
bool hold_until(const std::function<bool()>& done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    sched_yield();
  }
  return true;
}

void expect_once(const std::vector<int>& hits) {
  for (long i = 0; i < n; ++i) ASSERT_EQ(hits[std::size_t(i)], 1) << "iteration " << i;
}

float share_of_thread0() {
  const auto all = wo::history_shares();
  EXPECT_EQ(all.size(), 1u) << "one loop call site ran under history";
  return all.empty() ? -1.0f : all.front().second[0];
}

// One loop of the "stolen" (true) or "kept" (false) pattern; returns what
// thread 0 kept for itself at its start.
unsigned long long history_loop(bool stolen) {
  std::vector<int> hits(n, 0);
  std::atomic<long> others{0}, mine{0};
  std::atomic<unsigned long long> kept{0};
  std::atomic<bool> zero_started{false};
  bool held_ok = true;
#pragma omp parallel num_threads(team)
  {
    bool first = true;
#pragma omp for schedule(runtime)
    for (long i = 0; i < n; ++i) {
      const int me = omp_get_thread_num();
      if (me == 0 && first) {
        // Thread 0's own first piece (the others wait for it, so nobody
        // took any of its block before): what it kept is all it runs of
        // its block.
        kept.store(wo::scheme_view_now().reserved);
        zero_started.store(true);
        if (stolen && !hold_until([&] { return others.load() >= n - long(kept.load()); }))
          held_ok = false;
      }
      if (me != 0 && first) {
        if (!hold_until([&] { return zero_started.load(); })) held_ok = false;
        if (!stolen && !hold_until([&] { return mine.load() >= block0; })) held_ok = false;
      }
      first = false;
      __atomic_add_fetch(&hits[std::size_t(i)], 1, __ATOMIC_RELAXED);
      (me == 0 ? mine : others).fetch_add(1);
    }
  }
  EXPECT_TRUE(held_ok) << "a held thread waited 60 s";
  expect_once(hits);
  return kept.load();
}

void history_case(bool stolen) {
  wo::count_scheme_events(true);
  omp_set_schedule(omp_sched_static, 0);
  float last = 0.5f;
  unsigned long long last_kept = 0;
  for (int k = 0; k < loops; ++k) {
    const unsigned long long kept = history_loop(stolen);
    const float share = share_of_thread0();
    if (stolen)
      EXPECT_GT(share, last) << "loop " << k << ": all offered was stolen";
    else
      EXPECT_LT(share, last) << "loop " << k << ": nothing offered was stolen";
    last = share;
    last_kept = kept;
  }
  // 0.5 moved a quarter of the way to 1 (or 0) at each of 6 loops.
  if (stolen) {
    EXPECT_GT(last, 0.85f);
    EXPECT_LT(last_kept, (unsigned long long)block0 / 2) << "offers more than the start's half";
  } else {
    EXPECT_LT(last, 0.15f);
    EXPECT_GT(last_kept, (unsigned long long)block0 / 2) << "offers less than the start's half";
  }
  const wo::scheme_counts c = wo::scheme_counts_now();
  EXPECT_EQ(c.history_loops, (std::uint64_t)loops);
  EXPECT_EQ(c.offered, c.stolen + c.returned);
}

TEST(omp_loop_schemes, history_offers_more_after_its_offers_were_stolen) {
  EXPECT_EQ(run_weft(
                team,
                [] {
                  history_case(true);
                  weft::exit(0);
                },
                "--weft:omp-scheme=history"),
            0);
}

TEST(omp_loop_schemes, history_offers_less_after_its_offers_came_back) {
  EXPECT_EQ(run_weft(
                team,
                [] {
                  history_case(false);
                  weft::exit(0);
                },
                "--weft:omp-scheme=history"),
            0);
}

void idle_nobody_idle() {
  wo::count_scheme_events(true);
  omp_set_schedule(omp_sched_static, 0);
  std::vector<int> hits(n, 0);
  std::atomic<int> at_last{0};
  bool held_ok = true;
#pragma omp parallel num_threads(team)
  {
#pragma omp for schedule(runtime)
    for (long i = 0; i < n; ++i) {
      __atomic_add_fetch(&hits[std::size_t(i)], 1, __ATOMIC_RELAXED);
      if (i < n - 1 && (i + 1) % block0 == 0) {  // the last of a block
        at_last.fetch_add(1);
        if (!hold_until([&] { return at_last.load() == team; })) held_ok = false;
      }
    }
  }
  EXPECT_TRUE(held_ok);
  expect_once(hits);
  const wo::scheme_counts c = wo::scheme_counts_now();
  EXPECT_EQ(c.idle_loops, 1u);
  EXPECT_EQ(c.offered, 0u) << "no thread was idle while another had work";
  EXPECT_EQ(c.taken_unstarted, 0u);
}

void idle_three_idle() {
  wo::count_scheme_events(true);
  omp_set_schedule(omp_sched_static, 0);
  std::vector<int> hits(n, 0);
  std::atomic<long> by_others_in_block0{0};
  std::atomic<bool> zero_started{false};
  bool held_ok = true;
#pragma omp parallel num_threads(team)
  {
    bool first = true;
#pragma omp for schedule(runtime)
    for (long i = 0; i < n; ++i) {
      const int me = omp_get_thread_num();
      if (me != 0 && first && !hold_until([&] { return zero_started.load(); })) held_ok = false;
      if (me == 0 && i < block0) {
        // Its first iteration waits for the three others to
        // be idle (they wait for it to start, so nobody
        // took any of its block before); the later ones for
        // the parts it offered then to be taken.
        zero_started.store(true);
        if (first && !hold_until([] { return wo::scheme_view_now().hungry == team - 1; }))
          held_ok = false;
        if (!first && !hold_until([] { return wo::scheme_view_now().parts == 0; })) held_ok = false;
      }
      if (me != 0 && i < block0) by_others_in_block0.fetch_add(1);
      first = false;
      __atomic_add_fetch(&hits[std::size_t(i)], 1, __ATOMIC_RELAXED);
    }
  }
  EXPECT_TRUE(held_ok);
  expect_once(hits);
  const wo::scheme_counts c = wo::scheme_counts_now();
  EXPECT_GE(c.offered, std::uint64_t(team - 1)) << "one part per idle thread";
  EXPECT_GT(by_others_in_block0.load(), 0) << "idle threads took its parts";
}

TEST(omp_loop_schemes, idle_offers_nothing_while_no_thread_is_idle) {
  EXPECT_EQ(run_weft(
                team,
                [] {
                  idle_nobody_idle();
                  weft::exit(0);
                },
                "--weft:omp-scheme=idle"),
            0);
}

TEST(omp_loop_schemes, idle_offers_one_part_per_idle_thread) {
  EXPECT_EQ(run_weft(
                team,
                [] {
                  idle_three_idle();
                  weft::exit(0);
                },
                "--weft:omp-scheme=idle"),
            0);
}

TEST(omp_loop_schemes, option_is_validated) {
  EXPECT_EXIT(weft_test::make_config({"--weft:omp-scheme=fastest"}), ::testing::ExitedWithCode(2),
              "omp-scheme.*static\\|idle\\|history");
}

}  // namespace
