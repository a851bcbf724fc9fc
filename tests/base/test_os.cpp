// base/os.hpp: futex sleep and wake-up in both scopes, process liveness,
// file-name-safe strings, shared memory segments, reading another process's
// memory; the checked helper for failed system calls.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
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

// ------------------------------------------------- shared memory segments

// A name of this test process's own, gone when the test ends.
std::string segment_name(const char* what) {
  return "/weft-test-os-" + std::to_string(getpid()) + "-" + what;
}

TEST(SharedSegment, IsCreatedMappedBySecondMappingAndUnlinked) {
  const std::string name = segment_name("a");
  os::mapping first;
  const os::sys_failure made = os::create_shared_segment(name.c_str(), 8192, first);
  ASSERT_FALSE(made) << made.call << ": " << weft::base::errno_text(made.err).c_str();
  ASSERT_NE(first.addr, nullptr);
  EXPECT_EQ(first.bytes, 8192u);
  auto* a = static_cast<unsigned char*>(first.addr);
  EXPECT_EQ(a[0], 0);  // a new segment is zeroed
  a[0] = 17;
  a[8191] = 42;

  // All of it (bytes 0), read-write: the same memory.
  os::mapping second;
  ASSERT_FALSE(os::map_shared_segment(name.c_str(), 4096, 0, true, second));
  ASSERT_NE(second.addr, nullptr);
  ASSERT_NE(second.addr, first.addr);
  EXPECT_EQ(second.bytes, 8192u);
  auto* b = static_cast<unsigned char*>(second.addr);
  EXPECT_EQ(b[0], 17);
  EXPECT_EQ(b[8191], 42);
  b[100] = 7;
  EXPECT_EQ(a[100], 7);

  // Its first page only, read-only.
  os::mapping head;
  ASSERT_FALSE(os::map_shared_segment(name.c_str(), 4096, 4096, false, head));
  EXPECT_EQ(head.bytes, 4096u);
  EXPECT_EQ(static_cast<const unsigned char*>(head.addr)[100], 7);

  // Unlinked: the name is gone, the mappings stay.
  EXPECT_EQ(os::unlink_shared_segment(name.c_str()), 0);
  EXPECT_EQ(os::unlink_shared_segment(name.c_str()), ENOENT);
  os::mapping none;
  const os::sys_failure gone = os::map_shared_segment(name.c_str(), 0, 0, true, none);
  EXPECT_STREQ(gone.call, "shm_open");
  EXPECT_EQ(gone.err, ENOENT);
  EXPECT_EQ(none.addr, nullptr);
  b[200] = 9;
  EXPECT_EQ(a[200], 9);
  os::prefault(first.addr, first.bytes);  // contents unchanged
  EXPECT_EQ(a[0], 17);
  EXPECT_EQ(a[200], 9);
  os::unmap(head, "test");
  os::unmap(second, "test");
  os::unmap(first, "test");
}

TEST(SharedSegment, AnExistingNameIsEEXISTAndLeftAlone) {
  const std::string name = segment_name("b");
  os::mapping first;
  ASSERT_FALSE(os::create_shared_segment(name.c_str(), 4096, first));
  static_cast<unsigned char*>(first.addr)[0] = 5;
  os::mapping again;
  const os::sys_failure f = os::create_shared_segment(name.c_str(), 4096, again);
  EXPECT_TRUE(f);
  EXPECT_STREQ(f.call, "shm_open");
  EXPECT_EQ(f.err, EEXIST);
  EXPECT_EQ(again.addr, nullptr);
  os::mapping second;  // the first one's name and contents are still there
  ASSERT_FALSE(os::map_shared_segment(name.c_str(), 0, 0, false, second));
  EXPECT_EQ(static_cast<const unsigned char*>(second.addr)[0], 5);
  os::unmap(second, "test");
  os::unmap(first, "test");
  EXPECT_EQ(os::unlink_shared_segment(name.c_str()), 0);
}

TEST(SharedSegment, OneShorterThanTheMinimumIsNotMapped) {
  const std::string name = segment_name("c");
  os::mapping first;
  ASSERT_FALSE(os::create_shared_segment(name.c_str(), 4096, first));
  os::mapping second;
  const os::sys_failure f = os::map_shared_segment(name.c_str(), 8192, 0, true, second);
  EXPECT_FALSE(f);  // not sized yet: success, nothing mapped
  EXPECT_EQ(second.addr, nullptr);
  os::unmap(first, "test");
  EXPECT_EQ(os::unlink_shared_segment(name.c_str()), 0);
}

TEST(SharedSegment, AFailedCreateNamesTheCallAndLeavesNoName) {
  // A name with a second '/': shm_open refuses it.
  os::mapping m;
  const os::sys_failure bad = os::create_shared_segment("/weft-test/os", 4096, m);
  EXPECT_STREQ(bad.call, "shm_open");
  EXPECT_EQ(bad.err, EINVAL);
  // Far more than /dev/shm holds: refused when sized or reserved, and the
  // name made by shm_open is gone again.
  const std::string name = segment_name("d");
  const os::sys_failure big = os::create_shared_segment(name.c_str(), std::size_t(1) << 50, m);
  ASSERT_TRUE(big);
  EXPECT_TRUE(std::strcmp(big.call, "ftruncate") == 0 ||
              std::strcmp(big.call, "posix_fallocate") == 0 || std::strcmp(big.call, "mmap") == 0)
      << big.call;
  EXPECT_EQ(m.addr, nullptr);
  EXPECT_EQ(os::unlink_shared_segment(name.c_str()), ENOENT);
}

TEST(SharedSegment, FreeBytesAreKnownWhereThereIsADevShm) {
  if (access("/dev/shm", F_OK) != 0) GTEST_SKIP() << "no /dev/shm";
  EXPECT_TRUE(os::shared_memory_free_bytes().has_value());
}

TEST(SharedSegmentDeathTest, AFailedUnmapIsFatalAndNamed) {
  EXPECT_EXIT(os::unmap({reinterpret_cast<void*>(1), 4096}, "a test mapping"),
              ::testing::ExitedWithCode(weft::base::exit_fatal),
              "fatal: munmap failed for a test mapping \\(4096 bytes at 0x1\\): Invalid argument "
              "\\(errno 22\\)");
}

// ------------------------------------------------ another process's memory

std::uint64_t g_word = 1;

TEST(ReadProcessMemory, ReadsAChildsWordAndNamesTheFailures) {
  os::allow_memory_reads_by_any_process();
  int to_parent[2], to_child[2];
  ASSERT_EQ(pipe(to_parent), 0);
  ASSERT_EQ(pipe(to_child), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    g_word = 0x1234'5678'9abc'def0ull;  // only in the child's memory
    char c = 1;
    if (write(to_parent[1], &c, 1) != 1) _exit(1);
    if (read(to_child[0], &c, 1) != 1) _exit(1);  // until the parent has read
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(to_parent[0], &c, 1), 1);
  std::uint64_t v = 0;
  const auto remote = reinterpret_cast<std::uint64_t>(&g_word);  // same address after fork
  EXPECT_EQ(os::read_process_memory(child, &v, remote, sizeof v), std::ptrdiff_t(sizeof v));
  EXPECT_EQ(v, 0x1234'5678'9abc'def0ull);
  EXPECT_EQ(g_word, 1u);
  // An address that is mapped nowhere there.
  EXPECT_EQ(os::read_process_memory(child, &v, 8, sizeof v), -EFAULT);
  ASSERT_EQ(write(to_child[1], &c, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // Reaped: gone (unless its pid was reused at once).
  EXPECT_EQ(os::read_process_memory(child, &v, remote, sizeof v), -ESRCH);
  for (int fd : {to_parent[0], to_parent[1], to_child[0], to_child[1]}) close(fd);
}

// ---------------------------------------------------------------- membarrier

TEST(Membarrier, ARegisteredBarrierReturnsOrTheRegistrationSaysWhyNot) {
  for (auto scope :
       {os::membarrier_scope::this_process, os::membarrier_scope::registered_processes}) {
    const char* why = os::membarrier_register(scope);
    ASSERT_NE(why, nullptr);
    if (*why != '\0') {
      EXPECT_NE(std::strstr(why, "membarrier(2)"), nullptr) << why;  // names what is missing
      continue;
    }
    os::membarrier(scope, "test");
    os::membarrier(scope, "test");
  }
}
