// Fibers: run, suspend, resume, nesting, exceptions, stacks reused, many
// fibers interleaved on one thread and on several threads at once, and a
// stack overflow reported as one.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include "weft/threads/fiber.hpp"

namespace wt = weft::threads;

namespace {

struct steps {
  std::vector<int> log;
  int rounds = 3;
};

void stepper(void* arg) {
  auto* s = static_cast<steps*>(arg);
  for (int i = 0; i < s->rounds; ++i) {
    s->log.push_back(i);
    wt::fiber::suspend();
  }
  s->log.push_back(100);
}

TEST(Fiber, RunsSuspendsAndResumesWhereItStopped) {
  steps s;
  wt::fiber* f = wt::fiber::create(&stepper, &s);
  EXPECT_EQ(wt::fiber::current(), nullptr);
  for (int i = 0; i < s.rounds; ++i) {
    EXPECT_FALSE(f->resume());
    EXPECT_EQ(s.log.size(), std::size_t(i + 1));
    EXPECT_EQ(s.log.back(), i);
    EXPECT_EQ(wt::fiber::current(), nullptr);
  }
  EXPECT_TRUE(f->resume());
  EXPECT_TRUE(f->finished());
  EXPECT_EQ(s.log.back(), 100);
  wt::fiber::destroy(f);
}

struct nest {
  wt::fiber* inner = nullptr;
  std::vector<std::string> log;
};

void inner_body(void* arg) {
  auto* n = static_cast<nest*>(arg);
  n->log.push_back("inner1");
  wt::fiber::suspend();  // back to the outer fiber, which resumed it
  n->log.push_back("inner2");
}

void outer_body(void* arg) {
  auto* n = static_cast<nest*>(arg);
  wt::fiber* self = wt::fiber::current();
  n->log.push_back("outer1");
  EXPECT_FALSE(n->inner->resume());
  EXPECT_EQ(wt::fiber::current(), self);
  n->log.push_back("outer2");
  wt::fiber::suspend();  // back to the test
  EXPECT_TRUE(n->inner->resume());
  n->log.push_back("outer3");
}

TEST(Fiber, AFiberResumesAnotherAndSuspendReturnsToTheResumer) {
  nest n;
  n.inner = wt::fiber::create(&inner_body, &n);
  wt::fiber* outer = wt::fiber::create(&outer_body, &n);
  EXPECT_FALSE(outer->resume());
  EXPECT_TRUE(outer->resume());
  const std::vector<std::string> want = {"outer1", "inner1", "outer2", "inner2", "outer3"};
  EXPECT_EQ(n.log, want);
  wt::fiber::destroy(n.inner);
  wt::fiber::destroy(outer);
}

void thrower(void*) {
  wt::fiber::suspend();
  throw std::runtime_error("from the fiber");
}

TEST(Fiber, AnExceptionLeavingTheFunctionIsRethrownByResume) {
  wt::fiber* f = wt::fiber::create(&thrower, nullptr);
  EXPECT_FALSE(f->resume());
  try {
    f->resume();
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "from the fiber");
  }
  EXPECT_TRUE(f->finished());
  wt::fiber::destroy(f);
}

constexpr std::size_t deep_bytes = 900 << 10, page = 4096;
constexpr std::size_t deep_pages = (deep_bytes + page - 1) / page;

// A distinct nonzero value for each page (none is what fresh memory holds).
char page_mark(std::size_t i) {
  return char(1 + (i / page) % 120);
}

void deep(void* arg) {
  // Uses most of a 1 MiB stack: the stack is as large as asked. Writes a mark
  // on every page, then counts the pages that read it back.
  volatile char buf[deep_bytes];
  for (std::size_t i = 0; i < sizeof buf; i += page) buf[i] = page_mark(i);
  int good = 0;
  for (std::size_t i = 0; i < sizeof buf; i += page) good += buf[i] == page_mark(i);
  *static_cast<int*>(arg) = good;
}

TEST(Fiber, StackIsAsLargeAsAsked) {
  int out = 0;
  wt::fiber* f = wt::fiber::create(&deep, &out, std::size_t(1) << 20);
  EXPECT_TRUE(f->resume());
  EXPECT_EQ(out, int(deep_pages));  // every page written and read back on the fiber's stack
  wt::fiber::destroy(f);
}

void count_up(void* arg) {
  auto* c = static_cast<long*>(arg);
  for (int i = 0; i < 100; ++i) {
    ++*c;
    wt::fiber::suspend();
  }
}

// Many fibers interleaved round-robin, on several threads at once (each
// thread its own fibers): every step runs exactly once, stacks are reused.
TEST(Fiber, ManyFibersInterleavedOnSeveralThreads) {
  constexpr int threads = 4, per_thread = 50;
  std::atomic<long> total{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      for (int round = 0; round < 3; ++round) {
        std::vector<long> counts(per_thread, 0);
        std::vector<wt::fiber*> fs;
        for (int i = 0; i < per_thread; ++i)
          fs.push_back(wt::fiber::create(&count_up, &counts[std::size_t(i)], 64 << 10));
        bool any = true;
        while (any) {
          any = false;
          for (wt::fiber*& f : fs)
            if (f != nullptr && !f->resume())
              any = true;
            else if (f != nullptr) {
              wt::fiber::destroy(f);
              f = nullptr;
            }
        }
        for (long c : counts) total += c;
      }
      wt::release_stack_cache();
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(total.load(), long(threads) * 3 * per_thread * 100);
}

}  // namespace

// A stack overflow inside a fiber is reported as one (the faulting thread's
// alternate signal stack runs the report), then the process ends with
// SIGSEGV as before. Sanitizer builds keep their own SIGSEGV handling.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && defined(__x86_64__)
__attribute__((noinline)) int recurse(int depth) {
  volatile char frame[512];
  frame[0] = char(depth);
  return depth > 1000000000 ? frame[0] : recurse(depth + 1) + frame[0];
}

void overflow_by_recursion(void*) {
  std::printf("%d\n", recurse(0));
}

// One frame larger than the stack: its stack pointer jumps past the
// guard's top page at once.
__attribute__((noinline)) void overflow_by_one_frame(void*) {
  volatile char big[192 << 10];
  for (std::size_t i = 0; i < sizeof big; i += 64) big[i] = 1;
  std::printf("%d\n", big[100]);
}

void run_on_fiber(wt::fiber::entry fn, std::size_t stack) {
  wt::fiber* f = wt::fiber::create(fn, nullptr, stack);
  f->resume();
}

TEST(FiberDeathTest, DeepRecursionIsReportedAsAStackOverflow) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(run_on_fiber(&overflow_by_recursion, 64 << 10),
               "stack overflow in a logical thread \\(fiber\\).*its stack is 64 KiB");
}

TEST(FiberDeathTest, AFrameLargerThanTheStackIsReportedAsAStackOverflow) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(run_on_fiber(&overflow_by_one_frame, 128 << 10),
               "stack overflow in a logical thread \\(fiber\\).*its stack is 128 KiB");
}

TEST(FiberDeathTest, OtherFaultsOnAFiberAreNotCalledOverflows) {
  // A null write on a fiber: the fault goes to the default action (SIGSEGV)
  // without the report. Run in a child whose standard error is read here.
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    dup2(out[1], STDERR_FILENO);
    run_on_fiber(
        [](void*) {
          volatile int* null = nullptr;
          *null = 1;
        },
        64 << 10);
    _exit(0);
  }
  close(out[1]);
  std::string err;
  char buf[256];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) err.append(buf, std::size_t(n));
  close(out[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) << "status " << status;
  EXPECT_EQ(err.find("overflow"), std::string::npos) << err;
}
#endif
