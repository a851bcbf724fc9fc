// base/os.hpp: futex sleep and wake-up in both scopes, process liveness,
// file-name-safe strings; the checked helper for failed system calls.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <thread>
#include "weft/base/error.hpp"
#include "weft/base/os.hpp"

namespace os = weft::base::os;

TEST(Futex, AWaitOnAWordThatNoLongerHoldsTheValueReturnsAtOnce) {
  std::atomic<std::uint32_t> w{3};
  os::futex_wait(w, 2, 0, os::futex_scope::this_process, "test");  // no limit: must not sleep
  std::atomic<int> v{-1};
  os::futex_wait(v, 0, 0, os::futex_scope::shared, "test");
  SUCCEED();
}

TEST(Futex, AWaitWithALimitReturnsWithoutAWake) {
  std::atomic<int> w{1};
  os::futex_wait(w, 1, 2'000'000, os::futex_scope::this_process, "test");  // 2 ms
  os::futex_wait(w, 1, 2'000'000, os::futex_scope::shared, "test");
  EXPECT_EQ(w.load(), 1);
}

// A sleeper that waits with no limit for the word to become 0: only a wake
// (after the store) lets the test end; the CTest timeout catches a lost one.
void wakes_a_sleeper(os::futex_scope scope) {
  for (int round = 0; round < 50; ++round) {
    std::atomic<std::uint32_t> word{1};
    std::atomic<bool> asleep{false};
    std::thread sleeper([&] {
      asleep.store(true);
      while (word.load() == 1) os::futex_wait(word, 1, 0, scope, "test");
    });
    while (!asleep.load()) std::this_thread::yield();
    word.store(0);
    EXPECT_GE(os::futex_wake(word, 1, scope, "test"), 0);
    sleeper.join();
  }
}
TEST(Futex, AWakeEndsASleepInThisProcessScope) { wakes_a_sleeper(os::futex_scope::this_process); }
TEST(Futex, AWakeEndsASleepInSharedScope) { wakes_a_sleeper(os::futex_scope::shared); }

TEST(Futex, AWakeWithNobodyAsleepWakesNone) {
  std::atomic<int> w{0};
  EXPECT_EQ(os::futex_wake(w, 1, os::futex_scope::this_process, "test"), 0);
  EXPECT_EQ(os::futex_wake(w, 1 << 30, os::futex_scope::shared, "test"), 0);
}

TEST(ProcessAlive, ThisProcessRunsAndAReapedChildDoesNot) {
  EXPECT_TRUE(os::process_alive(getpid()));
  EXPECT_TRUE(os::process_alive(1));  // init: another user's process counts (EPERM)
  EXPECT_FALSE(os::process_alive(0));
  EXPECT_FALSE(os::process_alive(-5));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  errno = 1234;
  EXPECT_FALSE(os::process_alive(child));  // reaped: gone (unless the pid was reused at once)
  EXPECT_EQ(errno, 1234);                  // left as it was
}

TEST(FileNameSafe, KeepsLettersDigitsDotUnderscoreDashAndReplacesTheRest) {
  EXPECT_EQ(os::file_name_safe("job-1.2_x"), "job-1.2_x");
  EXPECT_EQ(os::file_name_safe("a/b c@d:e"), "a_b_c_d_e");
  EXPECT_EQ(os::file_name_safe("\xc3\xa9t\xc3\xa9"), "__t__");  // each byte of "été"
  EXPECT_EQ(os::file_name_safe(""), "");
}

// The checked helper's message names the call, what it was for, the errno's
// text and its number, and ends the job with the fatal exit code.
TEST(CheckedCallDeathTest, NamesTheCallThePurposeAndTheErrno) {
  EXPECT_EXIT(weft::base::fatal_sys(ENOENT, "shm_open", "for the segment %s", "/weft-x"),
              ::testing::ExitedWithCode(weft::base::exit_fatal),
              "fatal: shm_open failed for the segment /weft-x: No such file or directory "
              "\\(errno 2\\)");
  EXPECT_EXIT(weft::base::fatal_errno(EBADF, "eventfd()"),
              ::testing::ExitedWithCode(weft::base::exit_fatal),
              "fatal: eventfd\\(\\) failed: Bad file descriptor \\(errno 9\\)");
}

TEST(CheckedCall, ErrnoTextIsTheSystemsText) {
  const weft::base::errno_text t(ENOENT);
  EXPECT_STREQ(t.c_str(), "No such file or directory");
  EXPECT_EQ(t.code(), ENOENT);
}
