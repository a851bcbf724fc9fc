// The option parser in isolation (program-level errors: tests/cli).
#include <gtest/gtest.h>

#include "weft/base/options.hpp"

namespace wb = weft::base;

namespace {
wb::option_set make_set() {
  wb::option_set s;
  s.define({"threads", "2", "integer 1..64", "PEs", wb::integer_in(1, 64)});
  s.define({"queue", "mpsc", "mpsc|spsc-pairs", "queue", wb::one_of({"mpsc", "spsc-pairs"})});
  s.define({"stats", "0", "bool", "stats", wb::boolean(), true});
  return s;
}
}  // namespace

TEST(Options, CommandLineIsRemovedAndWinsOverEnvironment) {
  auto s = make_set();
  char a0[] = "app", a1[] = "--weft:threads=4", a2[] = "input.dat", a3[] = "--weft:stats";
  char* argv[] = {a0, a1, a2, a3, nullptr};
  int argc = 4;
  char e0[] = "WEFT_THREADS=3", e1[] = "WEFT_QUEUE=spsc-pairs", e2[] = "PATH=/bin";
  char* envp[] = {e0, e1, e2, nullptr};
  s.parse(argc, argv, envp);
  EXPECT_EQ(argc, 2);
  EXPECT_STREQ(argv[1], "input.dat");
  EXPECT_EQ(argv[2], nullptr);
  EXPECT_EQ(s.get_int("threads"), 4);
  EXPECT_EQ(s.source("threads"), wb::option_source::command_line);
  EXPECT_EQ(s.get("queue"), "spsc-pairs");
  EXPECT_EQ(s.origin("queue"), "WEFT_QUEUE=spsc-pairs");
  EXPECT_TRUE(s.get_bool("stats"));
}

TEST(Options, DefaultsStayWhenNothingIsGiven) {
  auto s = make_set();
  char a0[] = "app";
  char* argv[] = {a0, nullptr};
  int argc = 1;
  s.parse(argc, argv, nullptr);
  EXPECT_EQ(s.get_int("threads"), 2);
  EXPECT_FALSE(s.given("threads"));
  EXPECT_EQ(s.origin("threads"), "default");
}

TEST(OptionsDeathTest, BadInputExitsWithCode2) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto run = [](const char* arg, const char* env) {
    auto s = make_set();
    char a0[] = "app";
    std::string a1 = arg;
    char* argv[] = {a0, a1.data(), nullptr};
    int argc = 2;
    std::string e = env;
    char* envp[] = {e.data(), nullptr};
    s.parse(argc, argv, envp);
  };
  EXPECT_EXIT(run("--weft:threads=0", "X=1"), testing::ExitedWithCode(2),
              "--weft:threads=0: out of range.*accepted: integer 1..64");
  EXPECT_EXIT(run("--weft:threads=two", "X=1"), testing::ExitedWithCode(2), "not an integer");
  EXPECT_EXIT(run("--weft:queue=lifo", "X=1"), testing::ExitedWithCode(2),
              "--weft:queue=lifo: unknown value; accepted: mpsc\\|spsc-pairs");
  EXPECT_EXIT(run("--weft:nosuch=1", "X=1"), testing::ExitedWithCode(2),
              "unknown option --weft:nosuch");
  EXPECT_EXIT(run("--weft:threads", "X=1"), testing::ExitedWithCode(2), "needs a value");
  EXPECT_EXIT(run("--weft:thread=2", "X=1"), testing::ExitedWithCode(2),
              "unknown option --weft:thread \\(did you mean --weft:threads\\?");
  EXPECT_EXIT(run("--weft-threads=2", "X=1"), testing::ExitedWithCode(2),
              "--weft-threads=2 is not a weft option.*did you mean --weft:threads=2\\?");
  EXPECT_EXIT(run("-weft:queue=mpsc", "X=1"), testing::ExitedWithCode(2),
              "did you mean --weft:queue=mpsc\\?");
  EXPECT_EXIT(run("x", "WEFT_THREADS=0"), testing::ExitedWithCode(2),
              "WEFT_THREADS=0: out of range");
}

// An unknown WEFT_* variable is not weft's business (environment modules set
// WEFT_ROOT and the like): one warning, with a suggestion for a near miss,
// and parsing goes on.
TEST(Options, UnknownEnvironmentVariablesAreWarnedAboutOnce) {
  auto s = make_set();
  char a0[] = "app";
  char* argv[] = {a0, nullptr};
  int argc = 1;
  std::string e1 = "WEFT_ROOT=/opt/weft", e2 = "WEFT_THRAEDS=3", e3 = "WEFT_THREADS=2";
  char* envp[] = {e1.data(), e2.data(), e3.data(), nullptr};
  testing::internal::CaptureStderr();
  s.parse(argc, argv, envp);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(s.get_int("threads"), 2);
  EXPECT_NE(err.find("ignoring WEFT_* environment variables that name no weft option: WEFT_ROOT, "
                     "WEFT_THRAEDS (did you mean WEFT_THREADS?)"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("warning", err.find("warning") + 1), std::string::npos) << "warned twice: " << err;
}

// Arguments that only look like weft's stay the program's.
TEST(Options, ArgumentsNotCloseToAnOptionStayTheProgramS) {
  auto s = make_set();
  char a0[] = "app";
  std::string a1 = "--weft-output=run.dat", a2 = "-weft";
  char* argv[] = {a0, a1.data(), a2.data(), nullptr};
  int argc = 3;
  s.parse(argc, argv, nullptr);
  ASSERT_EQ(argc, 3);
  EXPECT_STREQ(argv[1], "--weft-output=run.dat");
  EXPECT_STREQ(argv[2], "-weft");
}

TEST(Options, ClosestNameIsATypoNotAnotherWord) {
  auto s = make_set();
  EXPECT_EQ(s.closest("thraeds"), "threads");
  EXPECT_EQ(s.closest("THREADS"), "threads");
  EXPECT_EQ(s.closest("queu"), "queue");
  EXPECT_EQ(s.closest("root"), "");
  EXPECT_EQ(s.closest("output"), "");
}
