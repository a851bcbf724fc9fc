// A job that is quiescent without weft::exit (issue 24, item 4): weft says so,
// naming what ran last, and ends the job with exit status 4 -- but only when
// nothing could ever give it work again. Whatever can (a pending timer, a
// poll_while condition, a thread of the program, a handler or the main
// function still running, on_quiescence callbacks, an attached node, the
// on-quiescence=wait option) keeps the job running. Every test here ends by
// its own weft::exit (or by the check); none asserts a time: the delays only
// give a wrong end the chance to happen.
#include <gtest/gtest.h>

#include <sched.h>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include "core/support.hpp"
#include "weft/weft.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::make_config;
using weft_test::run_node;
using weft_test::threads_opt;

// Longer than the check's first wait (100 ms) and its first retry, so that
// a check that wrongly ends the job has the time to.
constexpr auto later = 400ms;

void on_exit_with(weft::message_ptr m) {
  weft::exit(m->as<int>());
}
const weft::handler_id h_exit_with = weft::register_handler("qe.exit_with", on_exit_with);

void on_noop(weft::message_ptr) {}
const weft::handler_id h_noop = weft::register_handler("qe.noop", on_noop);

// The last handler of a job: it waits until every other PE of the node is
// idle, so that it is the last thing run. (The only message of its job: a
// PE counts as idle until the end of the turn that runs a message, so a
// wait for the others could end while one of them still ran another.)
void on_last(weft::message_ptr) {
  // This PE may still count as idle (until the end of this turn): not now.
  weft::detail::end_idle_period();
  while (weft::detail::idle_pes() < weft::node_size() - 1) sched_yield();
}
const weft::handler_id h_last = weft::register_handler("qe.last", on_last);

// A long handler: the job is busy while it runs.
void on_long(weft::message_ptr) {
  std::this_thread::sleep_for(later);
  weft::exit(6);
}
const weft::handler_id h_long = weft::register_handler("qe.long", on_long);

class QuiescentExitDeathTest : public testing::Test {
 protected:
  // The children start threads: the re-executing death-test style.
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

const testing::ExitedWithCode quiescent_exit(4);

// A program that sends a few messages and forgets weft::exit: weft::run
// returns 4 after one message on stderr that names the last handler and
// its PE, says that nothing is left, and names the option.
TEST_F(QuiescentExitDeathTest, AForgottenExitEndsTheJobWithAMessage) {
  EXPECT_EXIT(std::exit(run_node({threads_opt(3)},
                                 [] { weft::send(2, weft::make_message(h_last, 0)); })),
              quiescent_exit,
              "weft: error: the job is quiescent and weft::exit was not called: no message is "
              "in flight, every PE is idle, no timer or poll_while condition is pending[^\n]*"
              "The last thing run was handler 'qe.last' on PE 2\\. Nothing is left to do: ending "
              "the job with exit status 4[^\n]*--weft:on-quiescence=wait\n");
}

// Work started by an on_quiescence callback that then forgets weft::exit:
// the callback runs first, and the end comes after what it started.
TEST_F(QuiescentExitDeathTest, WorkAfterAQuiescenceCallbackEndsToo) {
  EXPECT_EXIT(std::exit(run_node({threads_opt(3)},
                                 [] {
                                   weft::on_quiescence(
                                       [] { weft::send(2, weft::make_message(h_last, 0)); });
                                 })),
              quiescent_exit, "The last thing run was handler 'qe.last' on PE 2\\.");
}

// Nothing but the main function: it is the last thing run.
TEST_F(QuiescentExitDeathTest, AnIdleJobNamesTheMainFunction) {
  EXPECT_EXIT(std::exit(run_node({threads_opt(2)}, [] {})), quiescent_exit,
              "The last thing run was the main function on PE 0\\.");
}

// The same with the sleep path forced (every PE asleep on its futex) and
// the per-producer rings.
TEST_F(QuiescentExitDeathTest, SleepingPesAndSpscPairs) {
  EXPECT_EXIT(std::exit(run_node({threads_opt(3), "--weft:queue=spsc-pairs",
                                  "--weft:idle-spin-us=0", "--weft:idle-yield-us=0"},
                                 [] { weft::send(2, weft::make_message(h_last, 0)); })),
              quiescent_exit, "The last thing run was handler 'qe.last' on PE 2\\.");
}

// The program's own exit code wins over the check.
TEST(QuiescentExit, ExitAtQuiescenceIsNotAnError) {
  EXPECT_EQ(run_node({threads_opt(3)},
                     [] {
                       for (int pe = 0; pe < 3; ++pe) weft::send(pe, weft::make_message(h_noop, 0));
                       weft::exit_at_quiescence(5);
                     }),
            5);
}

// A pending timer is work to come.
TEST(QuiescentExit, APendingTimerKeepsTheJob) {
  EXPECT_EQ(run_node({threads_opt(2)},
                     [] {
                       weft::after(later, [] { weft::exit(6); });
                     }),
            6);
}

// A poll_while condition may wait for anything outside weft.
TEST(QuiescentExit, AConditionKeepsTheJob) {
  EXPECT_EQ(run_node({threads_opt(2)},
                     [] {
                       const auto until = std::chrono::steady_clock::now() + later;
                       weft::poll_while([until] {
                         if (std::chrono::steady_clock::now() < until) return true;
                         weft::exit(6);
                         return false;
                       });
                     }),
            6);
}

// A handler (and a main function) that runs long is work in progress.
TEST(QuiescentExit, ALongHandlerKeepsTheJob) {
  EXPECT_EQ(run_node({threads_opt(2)}, [] { weft::send(1, weft::make_message(h_long, 0)); }), 6);
}
TEST(QuiescentExit, ALongMainFunctionKeepsTheJob) {
  EXPECT_EQ(run_node({threads_opt(2)},
                     [] {
                       std::this_thread::sleep_for(later);
                       weft::exit(6);
                     }),
            6);
}

// A thread the program made during the run may still send, even before its
// first call into weft.
TEST(QuiescentExit, AThreadOfTheProgramKeepsTheJob) {
  std::thread t;
  const int rc = run_node({threads_opt(2)}, [&t] {
    t = std::thread([] {
      std::this_thread::sleep_for(later);
      weft::send(1, weft::make_message_with(h_exit_with, 6));
    });
  });
  t.join();
  EXPECT_EQ(rc, 6);
}

// A thread from before weft::run is trusted to stay out only until it calls
// into the node: from then on it may call again.
TEST(QuiescentExit, AThreadFromBeforeTheRunThatCalledKeepsTheJob) {
  static std::atomic<bool> running{false}, called{false};
  running = false;
  called = false;
  std::thread t([] {
    while (!running.load()) std::this_thread::sleep_for(1ms);
    weft::send(1, weft::make_message(h_noop, 0));
    called = true;
    std::this_thread::sleep_for(later);
    weft::send(1, weft::make_message_with(h_exit_with, 6));
  });
  // The main function returns (and the node may go idle) only after the
  // thread's first call.
  const int rc = run_node({threads_opt(2)}, [] {
    running = true;
    while (!called.load()) std::this_thread::sleep_for(1ms);
  });
  t.join();
  EXPECT_EQ(rc, 6);
}

// on-quiescence=wait: an event weft cannot see (here a thread from before
// the run, which has not called into it yet) comes later, and the job is
// still there to take it.
TEST(QuiescentExit, TheWaitOptionKeepsAQuiescentJob) {
  static std::atomic<bool> running{false};
  running = false;
  std::thread t([] {
    while (!running.load()) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(later);
    weft::send(1, weft::make_message_with(h_exit_with, 6));
  });
  const int rc = run_node({threads_opt(2), "--weft:on-quiescence=wait"}, [] { running = true; });
  t.join();
  EXPECT_EQ(rc, 6);
}

// An attached node (libweft-omp's, for a plain OpenMP program): its PEs idle
// while the program's thread (PE 0) runs serial code; it is never ended.
std::atomic<int> g_pongs{0};
void on_pong(weft::message_ptr) {
  g_pongs.fetch_add(1);
}
const weft::handler_id h_pong = weft::register_handler("qe.pong", on_pong);
void on_ping(weft::message_ptr) {
  weft::send(0, weft::make_message(h_pong, 0));
}
const weft::handler_id h_ping = weft::register_handler("qe.ping", on_ping);

TEST(QuiescentExit, AnAttachedNodeIsNeverEnded) {
  g_pongs = 0;
  weft::detail::start_attached_node(make_config({threads_opt(2)}));
  weft::send(1, weft::make_message(h_ping, 0));
  while (g_pongs.load() < 1) weft::detail::serve_messages(16);
  std::this_thread::sleep_for(later);  // "serial code" while the node is quiescent
  ASSERT_TRUE(weft::detail::node_runs());
  weft::send(1, weft::make_message(h_ping, 0));
  while (g_pongs.load() < 2) weft::detail::serve_messages(16);
  EXPECT_EQ(weft::detail::stop_attached_node(), 0);
}

// on-quiescence is an option like the others: bad values are usage errors.
TEST_F(QuiescentExitDeathTest, BadOptionValue) {
  EXPECT_EXIT(make_config({"--weft:on-quiescence=exit"}), testing::ExitedWithCode(2),
              "--weft:on-quiescence=exit: .*accepted: error\\|wait");
}

}  // namespace
