// Errors: program errors are fatal (exit 3, "weft: fatal: ..." naming what
// was wrong), bad options are usage errors (exit 2, one line naming the
// option), a hang under --weft:timeout is an abort with a per-PE dump
// (exit 124).
#include <gtest/gtest.h>

#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include "core/support.hpp"
#include "weft/base/topology.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::make_config;
using weft_test::run_node;
using weft_test::threads_opt;

void on_noop(weft::message_ptr) {}
const weft::handler_id h_noop = weft::register_handler("noop", on_noop);

void on_throw_std(weft::message_ptr) {
  throw std::runtime_error("boom at the handler");
}
const weft::handler_id h_throw_std = weft::register_handler("thrower", on_throw_std);

void on_throw_int(weft::message_ptr) {
  throw 42;
}
const weft::handler_id h_throw_int = weft::register_handler("int_thrower", on_throw_int);

void on_register_late(weft::message_ptr) {
  weft::register_handler("late", on_noop);
}
const weft::handler_id h_register_late = weft::register_handler("register_late", on_register_late);

// Every test here forks a child that starts threads: the re-executing
// ("threadsafe") death-test style is the one that is safe with threads.
class ErrorsDeathTest : public testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// Runs a node of `threads` PEs whose main function is `fn`; for death tests.
void run_with(int threads, std::function<void()> fn) {
  (void)run_node({threads_opt(threads)}, std::move(fn));
}

const testing::ExitedWithCode fatal_exit(3);
const testing::ExitedWithCode usage_exit(2);

// ---- fatal program errors ---------------------------------------------------------

TEST_F(ErrorsDeathTest, SendToAPeOutOfRange) {
  EXPECT_EXIT(run_with(2, [] { weft::send(5, weft::make_message(h_noop, 0)); }), fatal_exit,
              "weft: fatal: weft::send to PE 5, but the job has PEs 0\\.\\.1");
  EXPECT_EXIT(run_with(2, [] { weft::send(-1, weft::make_message(h_noop, 0)); }), fatal_exit,
              "weft: fatal: weft::send to PE -1, but the job has PEs 0\\.\\.1");
  EXPECT_EXIT(run_with(1, [] { weft::send(1, weft::make_message(h_noop, 0)); }), fatal_exit,
              "weft::send to PE 1, but the job has PEs 0\\.\\.0");
}

void on_send_far(weft::message_ptr) {
  weft::send(weft::num_pes(), weft::make_message(h_noop, 0));
}
const weft::handler_id h_send_far = weft::register_handler("send_far", on_send_far);

TEST_F(ErrorsDeathTest, SendFromAnotherPeToAPeOutOfRange) {
  EXPECT_EXIT(run_with(3, [] { weft::send(2, weft::make_message(h_send_far, 0)); }), fatal_exit,
              "weft::send to PE 3, but the job has PEs 0\\.\\.2");
}

TEST_F(ErrorsDeathTest, MessageForAnUnregisteredHandler) {
  auto bad = [] {
    weft::message_ptr m = weft::make_message(h_noop, 8);
    m->handler = 9999;
    return m;
  };
  EXPECT_EXIT(run_with(2, [&bad] { weft::send(1, bad()); }), fatal_exit,
              "weft: fatal: weft::send: message for handler id 9999, which was never registered");
  EXPECT_EXIT(run_with(2, [&bad] { weft::send_node(bad()); }), fatal_exit,
              "weft::send_node: message for handler id 9999, which was never registered");
  EXPECT_EXIT(run_with(2, [&bad] { weft::broadcast(bad()); }), fatal_exit,
              "weft::broadcast: message for handler id 9999, which was never registered");
  // The first id past the table.
  EXPECT_EXIT(run_with(2,
                       [] {
                         weft::message_ptr m = weft::make_message(h_noop, 0);
                         m->handler = weft::handler_id(weft::num_handlers());
                         weft::send(0, std::move(m));
                       }),
              fatal_exit, "which was never registered");
}

TEST_F(ErrorsDeathTest, UnregisteredHandlerFromANonPeThread) {
  EXPECT_EXIT(run_with(2,
                       [] {
                         std::thread([] {
                           weft::message_ptr m = weft::make_message(h_noop, 0);
                           m->handler = 12345;
                           weft::send(1, std::move(m));
                         }).join();
                       }),
              fatal_exit, "handler id 12345, which was never registered");
}

TEST_F(ErrorsDeathTest, RegisterHandlerWhileANodeRuns) {
  EXPECT_EXIT(run_with(2, [] { weft::register_handler("late", on_noop); }), fatal_exit,
              "weft: fatal: register_handler\\(\"late\"\\) while a node runs");
  // From a handler on another PE too.
  EXPECT_EXIT(run_with(2, [] { weft::send(1, weft::make_message(h_register_late, 0)); }),
              fatal_exit, "register_handler\\(\"late\"\\) while a node runs");
}

TEST_F(ErrorsDeathTest, HandlerThrows) {
  EXPECT_EXIT(run_with(2, [] { weft::send(1, weft::make_message(h_throw_std, 0)); }), fatal_exit,
              "weft: fatal: handler 'thrower' on PE 1 threw boom at the handler");
  EXPECT_EXIT(run_with(3, [] { weft::send(2, weft::make_message(h_throw_int, 0)); }), fatal_exit,
              "handler 'int_thrower' on PE 2 threw an exception not derived from std::exception");
}

TEST_F(ErrorsDeathTest, MainFunctionThrows) {
  EXPECT_EXIT(run_with(2, [] { throw std::logic_error("bad main"); }), fatal_exit,
              "weft: fatal: main function threw bad main");
  EXPECT_EXIT(run_with(2, [] { throw 7; }), fatal_exit,
              "weft: fatal: main function threw an exception not derived from std::exception");
}

TEST_F(ErrorsDeathTest, ApiCalledWhileNoNodeRuns) {
  EXPECT_EXIT(weft::send(0, weft::make_message(h_noop, 0)), fatal_exit,
              "weft::send called while no node runs");
  EXPECT_EXIT(weft::broadcast(weft::make_message(h_noop, 0)), fatal_exit,
              "weft::broadcast called while no node runs");
  EXPECT_EXIT(weft::exit(0), fatal_exit, "weft::exit called while no node runs");
}

TEST_F(ErrorsDeathTest, PeOnlyCallsOffAPe) {
  EXPECT_EXIT(
      run_with(
          2, [] { std::thread([] { weft::after(std::chrono::milliseconds(1), [] {}); }).join(); }),
      fatal_exit, "weft::after called on a thread that is not a PE");
  EXPECT_EXIT(
      run_with(2, [] { std::thread([] { weft::poll_while([] { return false; }); }).join(); }),
      fatal_exit, "weft::poll_while called on a thread that is not a PE");
}

TEST_F(ErrorsDeathTest, RunInsideRun) {
  EXPECT_EXIT(run_with(2, [] { run_with(1, [] {}); }), fatal_exit,
              "weft::run called while a node already runs");
}

// --weft:timeout: the node never exits; the watchdog aborts with a dump.
// (It is quiescent: on-quiescence=wait keeps it running for the watchdog.)
void run_forever() {
  weft::runtime_config cfg = make_config(
      {threads_opt(3), "--weft:quiet", "--weft:timeout=0.5", "--weft:on-quiescence=wait"}, false);
  static char prog[] = "test";
  static char* argv[] = {prog, nullptr};
  weft::run(cfg, 1, argv, [](weft::args) {});
}

TEST_F(ErrorsDeathTest, TimeoutAbortsWithAPerPeDump) {
  EXPECT_EXIT(run_forever(), testing::ExitedWithCode(124),
              "weft: timeout: the node still runs after --weft:timeout=0.5 s; aborting(.|\n)*PE 0: "
              "(.|\n)*PE 2: ");
}

// A PE stuck in a handler with every signal blocked cannot answer the
// watchdog's backtrace request: the dump says so and goes on with the next PE.
void on_stuck(weft::message_ptr) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}
const weft::handler_id h_stuck = weft::register_handler("stuck", on_stuck);

void run_stuck() {
  weft::runtime_config cfg =
      make_config({threads_opt(3), "--weft:quiet", "--weft:timeout=0.5"}, false);
  static char prog[] = "test";
  static char* argv[] = {prog, nullptr};
  weft::run(cfg, 1, argv, [](weft::args) { weft::send(1, weft::make_message(h_stuck, 0)); });
}

TEST_F(ErrorsDeathTest, TimeoutDumpNamesAStuckHandler) {
  // The whole dump must be text: the regex stops at a NUL byte.
  EXPECT_EXIT(run_stuck(), testing::ExitedWithCode(124),
              "PE 1: running; current handler: 'stuck' \\(id [0-9]+\\); queue: 0 message\\(s\\)"
              "(.|\n)*\\(no backtrace: the thread did not answer\\)\n  PE 2: ");
}

// ---- usage errors (exit 2) -----------------------------------------------------------

// parse_options on a command line of `opts` (no other options).
void parse(const std::vector<std::string>& opts) {
  (void)make_config(opts, false);
}

TEST_F(ErrorsDeathTest, ThreadsOutOfRangeOrNotANumber) {
  EXPECT_EXIT(parse({"--weft:threads=0"}), usage_exit,
              "weft: error: --weft:threads=0: out of range \\(1\\.\\.4096\\)");
  EXPECT_EXIT(parse({"--weft:threads=abc"}), usage_exit,
              "weft: error: --weft:threads=abc: not an integer");
  EXPECT_EXIT(parse({"--weft:threads=-3"}), usage_exit, "--weft:threads=-3: out of range");
  EXPECT_EXIT(parse({"--weft:threads"}), usage_exit, "--weft:threads needs a value");
}

TEST_F(ErrorsDeathTest, UnknownOption) {
  EXPECT_EXIT(parse({"--weft:bogus=1"}), usage_exit, "weft: error: unknown option --weft:bogus");
  EXPECT_EXIT(parse({"--weft:bogus"}), usage_exit, "unknown option --weft:bogus");
}

TEST_F(ErrorsDeathTest, BadQueueKind) {
  EXPECT_EXIT(parse({"--weft:queue=foo"}), usage_exit,
              "weft: error: --weft:queue=foo: unknown value; accepted: auto\\|mpsc\\|spsc-pairs");
}

TEST_F(ErrorsDeathTest, BindToACpuOutsideTheSet) {
  // A CPU number just past the largest of this process's CPU set.
  int top = 0;
  for (const auto& c : weft::base::topology::get().allowed()) top = std::max(top, c.os_index);
  const std::string cpu = std::to_string(top + 1);
  EXPECT_EXIT(
      parse({"--weft:bind=" + cpu}), usage_exit,
      "weft: error: --weft:bind=" + cpu + ": CPU " + cpu + " is not in this process's CPU set");
  EXPECT_EXIT(parse({"--weft:bind=0,0"}), usage_exit,
              "--weft:bind=0,0: CPU 0 is listed more than once");
  EXPECT_EXIT(parse({"--weft:bind=sideways"}), usage_exit, "--weft:bind=sideways: ");
}

TEST_F(ErrorsDeathTest, OptionsThatDoNotApplyOrAreNotImplemented) {
  EXPECT_EXIT(parse({"--weft:transport=local", "--weft:comm=thread"}), usage_exit,
              "weft: error: --weft:comm=thread: a comm mode applies only to runs with a network "
              "transport");
  EXPECT_EXIT(parse({"--weft:comm=workers", "--weft:commap=0"}), usage_exit,
              "--weft:commap=0: comm=workers has no comm thread to bind");
  // The transport is chosen at startup (auto: local for one process), so a
  // comm mode in a one-process run is refused when the node starts.
  EXPECT_EXIT(run_node({"--weft:comm=hybrid"}, [] { weft::exit(0); }), usage_exit,
              "weft: error: --weft:comm=hybrid: a comm mode applies only to runs of several "
              "processes; this run is one process");
  EXPECT_EXIT(parse({"--weft:transport=carrier-pigeon"}), usage_exit,
              "--weft:transport=carrier-pigeon: unknown value");
}

TEST_F(ErrorsDeathTest, BadValuesOfOtherOptions) {
  EXPECT_EXIT(parse({"--weft:timeout=-1"}), usage_exit, "--weft:timeout=-1: out of range");
  EXPECT_EXIT(parse({"--weft:stats=maybe"}), usage_exit, "--weft:stats=maybe: not a boolean");
  EXPECT_EXIT(parse({"--weft:idle-spin-us=x"}), usage_exit,
              "--weft:idle-spin-us=x: not an integer");
}

TEST_F(ErrorsDeathTest, BadEnvironmentVariables) {
  EXPECT_EXIT(
      {
        setenv("WEFT_THREADS", "0", 1);
        parse({});
      },
      usage_exit, "weft: error: WEFT_THREADS=0: out of range \\(1\\.\\.4096\\)");
  EXPECT_EXIT(
      {
        setenv("WEFT_QUEUE", "lifo", 1);
        parse({});
      },
      usage_exit, "WEFT_QUEUE=lifo: unknown value; accepted: auto\\|mpsc\\|spsc-pairs");
}

// ---- what is not an error ---------------------------------------------------------------

void check_env_override() {
  setenv("WEFT_THREADS", "3", 1);
  setenv("WEFT_QUEUE", "spsc-pairs", 1);
  weft::runtime_config env_only = make_config({}, false);
  weft::runtime_config both = make_config({"--weft:threads=2"}, false);
  std::exit(env_only.threads == 3 && env_only.queue == weft::queue_kind::spsc_pairs &&
                    both.threads == 2 && both.queue == weft::queue_kind::spsc_pairs
                ? 0
                : 1);
}

TEST(Options, CommandLineOverridesTheEnvironment) {
  // In a child process, so the environment of this one stays clean.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(check_env_override(), testing::ExitedWithCode(0), "");
}

// --weft:help prints to stdout; the child sends its stdout to stderr, where
// EXPECT_EXIT looks.
void help_on_stderr() {
  std::fflush(stdout);
  dup2(2, 1);
  parse({"--weft:help"});
}

TEST(Options, HelpExitsWithZero) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(help_on_stderr(), testing::ExitedWithCode(0),
              "usage: [^ ]+ \\[--weft:name=value \\.\\.\\.\\] \\[program arguments\\]\n"
              "weft runtime options \\(also settable as WEFT_NAME=value; the command line "
              "wins\\):\n"
              "  --weft:help +print this list and exit\n"
              "(.|\n)*  --weft:threads=[^\n]*\n +default: [^\n]*; env: WEFT_THREADS\n");
}

// --weft:lb-max-bytes (src/objects/sync.cpp): bytes, or binary K, M, G.
TEST_F(ErrorsDeathTest, BadLbMaxBytes) {
  EXPECT_EXIT(parse({"--weft:lb-max-bytes=12X"}), usage_exit,
              "weft: error: --weft:lb-max-bytes=12X: unknown unit 'X': accepted forms N, NK, "
              "NM, NG");
  EXPECT_EXIT(parse({"--weft:lb-max-bytes=K"}), usage_exit,
              "--weft:lb-max-bytes=K: not a size: accepted forms N, NK, NM, NG");
  EXPECT_EXIT(parse({"--weft:lb-max-bytes=-1"}), usage_exit, "--weft:lb-max-bytes=-1: not a size");
  EXPECT_EXIT(parse({"--weft:lb-max-bytes=0"}), usage_exit,
              "--weft:lb-max-bytes=0: the size must be at least 1 byte");
  EXPECT_EXIT(parse({"--weft:lb-max-bytes=5000000G"}), usage_exit,
              "--weft:lb-max-bytes=5000000G: larger than 1024T");
}

TEST(Options, LbMaxBytesSizes) {
  EXPECT_EQ(make_config({}, false).lb_max_bytes, std::uint64_t(64) << 20);
  EXPECT_EQ(make_config({"--weft:lb-max-bytes=4096"}, false).lb_max_bytes, 4096u);
  EXPECT_EQ(make_config({"--weft:lb-max-bytes=1K"}, false).lb_max_bytes, 1024u);
  EXPECT_EQ(make_config({"--weft:lb-max-bytes=3m"}, false).lb_max_bytes, 3u << 20);
  EXPECT_EQ(make_config({"--weft:lb-max-bytes=2G"}, false).lb_max_bytes, std::uint64_t(2) << 30);
}

TEST(Options, ValidConfiguration) {
  weft::runtime_config c = make_config(
      {"--weft:threads=5", "--weft:queue=spsc-pairs", "--weft:bind=none", "--weft:timeout=3.5"},
      false);
  EXPECT_EQ(c.threads, 5);
  EXPECT_EQ(c.queue, weft::queue_kind::spsc_pairs);
  EXPECT_EQ(c.bind, "none");
  ASSERT_EQ(c.pe_cpus.size(), 5u);
  for (int cpu : c.pe_cpus) EXPECT_EQ(cpu, -1);
  EXPECT_DOUBLE_EQ(c.timeout_s, 3.5);
}

}  // namespace
