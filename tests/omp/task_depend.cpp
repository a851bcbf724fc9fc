// omp-test task_depend: task dependences (depend clause, taskwait depend).
//
// A chain of depend(inout) tasks must run in creation order; readers
// (depend(in)) of round k must see writer k's value and writer k+1
// (depend(out)) must wait for them; independent chains on array elements
// each keep their own order; `taskwait depend(in: y)` waits for y's writer.
// All tasks are siblings created by one `single` thread.
#include <omp.h>

#include <vector>

#include "check.h"

namespace {

void pause(int rounds) {
  for (int k = 0; k < rounds; ++k) __asm__ __volatile__("" ::: "memory");
}

void test_chain() {
  constexpr int kTasks = 200;
  std::vector<int> order;
  order.reserve(kTasks);
  int x = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    for (int k = 0; k < kTasks; ++k) {
#pragma omp task depend(inout : x) shared(order, x)
      {
        if (k % 7 == 0) pause(2000);  // a slow predecessor must still come first
        order.push_back(k);
        x += 1;
      }
    }
  }
  CHECK_EQ(static_cast<long>(order.size()), kTasks, "depend(inout) chain: tasks run");
  CHECK_EQ(x, kTasks, "depend(inout) chain: final value");
  for (int k = 0; k < kTasks && k < static_cast<int>(order.size()); ++k) {
    if (!CHECK_EQ(order[k], k, "depend(inout) chain: task at position %d", k)) break;
  }
}

void test_readers_writers() {
  constexpr int kRounds = 40, kReaders = 5;
  std::vector<int> seen(kRounds * kReaders, -1);
  int a = -1;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    for (int k = 0; k < kRounds; ++k) {
#pragma omp task depend(out : a) shared(a)
      {
        pause(500);
        a = k;
      }
      for (int r = 0; r < kReaders; ++r) {
#pragma omp task depend(in : a) shared(a, seen)
        {
          if (r == 0) pause(1000);  // writer k+1 must wait for this slow reader
          seen[k * kReaders + r] = a;
        }
      }
    }
  }
  for (int k = 0; k < kRounds; ++k) {
    for (int r = 0; r < kReaders; ++r) {
      if (!CHECK_EQ(seen[k * kReaders + r], k, "depend(in) reader %d of round %d saw", r, k)) {
        return;
      }
    }
  }
}

void test_element_chains() {
  constexpr int kChains = 8, kLength = 25;
  long v[kChains] = {};
  int bad_order = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    for (int s = 0; s < kLength; ++s) {
      for (int c = 0; c < kChains; ++c) {
#pragma omp task depend(inout : v[c]) shared(v, bad_order)
        {
          if (v[c] != s) __atomic_store_n(&bad_order, 1, __ATOMIC_RELAXED);
          v[c] = s + 1;
        }
      }
    }
  }
  CHECK_EQ(bad_order, 0, "depend(inout: v[c]) chains: a task ran out of order");
  for (int c = 0; c < kChains; ++c) CHECK_EQ(v[c], kLength, "depend(inout: v[%d]): final", c);
}

void test_taskwait_depend() {
  int y = 0, z = 0, y_seen = -1;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    {
#pragma omp task depend(out : y) shared(y)
      {
        pause(3000);
        y = 42;
      }
#pragma omp task depend(out : z) shared(z)
      z = 7;
#pragma omp taskwait depend(in : y)
      y_seen = y;
    }
  }
  CHECK_EQ(y_seen, 42, "taskwait depend(in: y): value of y after it");
  CHECK_EQ(z, 7, "taskwait depend: the other task ran by the end of the region");
}

}  // namespace

int main() {
  test_begin("task_depend");
  test_chain();
  test_readers_writers();
  test_element_chains();
  test_taskwait_depend();
  return test_end();
}
