// omp-test task_depend: task dependences (depend clause, depobj, taskwait
// depend).
//
// A chain of depend(inout) tasks must run in creation order; readers
// (depend(in)) of round k must see writer k's value and writer k+1
// (depend(out)) must wait for them; independent chains on array elements
// each keep their own order; `taskwait depend(in: y)` waits for y's writer.
// mutexinoutset: tasks on the same variable never overlap (an in-flight
// counter never above 1), all run, after the preceding out writer and in
// readers and before the following in reader. depobj: an omp_depend_t made
// with depend(inout: x), then update(in), then destroy, used by tasks
// (depend(depobj: o)) and by taskwait depend(depobj: o), ordered with plain
// depend clauses on the same variable; a depobj of kind mutexinoutset.
// Array sections: identical sections (a[0:n], a[:n], p[0:n] of the same
// storage) order their tasks; two disjoint halves each keep their own order
// (nothing is asserted between them). depend(iterator(j = 0:n), in: a[j]).
// if(0) tasks with depend: undeferred, they wait for their predecessors and
// are complete when the construct returns. Tasks on the same variable
// created by different threads are not siblings: no order is asserted, only
// that all run; the children of each of many tasks form their own chains
// (same variable, different parents: ordered within a parent only). A long
// chain (thousands of tasks) and a long writer/readers sequence.
// Unless said otherwise the tasks are siblings created by one `single`
// thread. GCC 12 rejects depend(inoutset: ...) and omp_all_memory (OpenMP
// 5.1), so they are not tested.
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

void test_mutexinoutset() {
  constexpr int kReaders = 4, kMutex = 60;
  int x = 0, in_flight = 0, max_in_flight = 0, mutex_ran = 0, readers_ran = 0;
  int bad_writer = 0, bad_readers = 0, reader_saw_runs = -1;
  long final_seen = -1;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    {
#pragma omp task depend(out : x) shared(x)
      {
        pause(3000);
        x = 1000;
      }
      for (int r = 0; r < kReaders; ++r) {
#pragma omp task depend(in : x) shared(x, readers_ran)
        {
          if (r == 0) pause(2000);  // the mutexinoutset tasks must wait for this slow reader
          if (x != 1000) __atomic_store_n(&bad_writer, 1, __ATOMIC_RELAXED);
          count_hit(&readers_ran);
        }
      }
      for (int m = 0; m < kMutex; ++m) {
#pragma omp task depend(mutexinoutset : x) shared(x, in_flight, max_in_flight, mutex_ran)
        {
          int now = __atomic_add_fetch(&in_flight, 1, __ATOMIC_RELAXED);
          int max = __atomic_load_n(&max_in_flight, __ATOMIC_RELAXED);
          while (now > max && !__atomic_compare_exchange_n(&max_in_flight, &max, now, 0,
                                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
          }
          if (x < 1000) __atomic_store_n(&bad_writer, 1, __ATOMIC_RELAXED);
          if (__atomic_load_n(&readers_ran, __ATOMIC_RELAXED) != kReaders) {
            __atomic_store_n(&bad_readers, 1, __ATOMIC_RELAXED);
          }
          int old = x;  // a plain read-modify-write: overlapping tasks lose updates
          pause(m % 5 == 0 ? 1000 : 100);
          x = old + m + 1;
          count_hit(&mutex_ran);
          __atomic_sub_fetch(&in_flight, 1, __ATOMIC_RELAXED);
        }
      }
#pragma omp task depend(in : x) shared(x, final_seen, reader_saw_runs)
      {
        final_seen = x;
        reader_saw_runs = __atomic_load_n(&mutex_ran, __ATOMIC_RELAXED);
      }
    }
  }
  const long expected = 1000 + static_cast<long>(kMutex) * (kMutex + 1) / 2;
  CHECK_EQ(mutex_ran, kMutex, "depend(mutexinoutset): tasks run");
  CHECK_EQ(max_in_flight, 1, "depend(mutexinoutset): most tasks running at once");
  CHECK_EQ(bad_writer, 0, "depend(mutexinoutset): ran before the preceding depend(out) writer");
  CHECK_EQ(bad_readers, 0, "depend(mutexinoutset): ran before the preceding depend(in) readers");
  CHECK_EQ(x, expected, "depend(mutexinoutset): final value (lost updates: tasks overlapped)");
  CHECK_EQ(final_seen, expected, "depend(in) after the mutexinoutset tasks: value seen");
  CHECK_EQ(reader_saw_runs, kMutex, "depend(in) after the mutexinoutset tasks: ran after them all");
}

void test_depobj() {
  constexpr int kChain = 50, kReaders = 6, kMutex = 20;
  int x = 0, y = 0, bad_chain = 0, readers_ran = 0, bad_writer2 = 0, x_after_taskwait = -1;
  int y_in_flight = 0, y_overlap = 0;
  std::vector<int> seen(kReaders, -1);
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    {
      omp_depend_t obj;
#pragma omp depobj(obj) depend(inout : x)
      // A chain mixing the depend object and plain inout on x: one order.
      for (int k = 0; k < kChain; ++k) {
        if (k % 2 == 0) {
#pragma omp task depend(depobj : obj) shared(x, bad_chain)
          {
            if (k % 10 == 0) pause(1000);
            if (x != k) __atomic_store_n(&bad_chain, 1, __ATOMIC_RELAXED);
            x = k + 1;
          }
        } else {
#pragma omp task depend(inout : x) shared(x, bad_chain)
          {
            if (x != k) __atomic_store_n(&bad_chain, 1, __ATOMIC_RELAXED);
            x = k + 1;
          }
        }
      }
      // The tasks above took their dependences at creation; from here on the
      // object stands for depend(in: x).
#pragma omp depobj(obj) update(in)
#pragma omp task depend(out : x) shared(x)
      {
        pause(2000);
        x = 500;
      }
      for (int r = 0; r < kReaders; ++r) {
#pragma omp task depend(depobj : obj) shared(x, seen, readers_ran)
        {
          if (r == 0) pause(1000);
          seen[r] = x;
          count_hit(&readers_ran);
        }
      }
#pragma omp task depend(out : x) shared(x, bad_writer2)
      {
        if (__atomic_load_n(&readers_ran, __ATOMIC_RELAXED) != kReaders) bad_writer2 = 1;
        pause(1000);
        x = 600;
      }
      // depend(in: x) through the object: waits for the last writer.
#pragma omp taskwait depend(depobj : obj)
      x_after_taskwait = x;
#pragma omp depobj(obj) destroy

      omp_depend_t mutex_obj;
#pragma omp depobj(mutex_obj) depend(mutexinoutset : y)
      for (int m = 0; m < kMutex; ++m) {
#pragma omp task depend(depobj : mutex_obj) shared(y, y_in_flight, y_overlap)
        {
          if (__atomic_add_fetch(&y_in_flight, 1, __ATOMIC_RELAXED) != 1) {
            __atomic_store_n(&y_overlap, 1, __ATOMIC_RELAXED);
          }
          int old = y;
          pause(5000);
          y = old + 1;
          __atomic_sub_fetch(&y_in_flight, 1, __ATOMIC_RELAXED);
        }
      }
#pragma omp taskwait
#pragma omp depobj(mutex_obj) destroy
    }
  }
  CHECK_EQ(bad_chain, 0, "depend(depobj: inout) mixed with depend(inout): a task out of order");
  for (int r = 0; r < kReaders; ++r) {
    CHECK_EQ(seen[r], 500, "depend(depobj) after update(in): reader %d saw", r);
  }
  CHECK_EQ(bad_writer2, 0, "depend(out) after depobj readers: ran before them");
  CHECK_EQ(x_after_taskwait, 600, "taskwait depend(depobj: in x): value of x after it");
  CHECK_EQ(y_overlap, 0, "depend(depobj: mutexinoutset): tasks overlapped");
  CHECK_EQ(y, kMutex, "depend(depobj: mutexinoutset): final value");
}

void test_array_sections() {
  constexpr int kN = 64, kReaders = 4, kHalfSteps = 30;
  int a[kN] = {};
  std::vector<long> storage(kN, 0);
  long* p = storage.data();
  long reader_sums[kReaders] = {};
  long final_sum = -1, p_sum = -1;
  int bad_inout = 0, bad_lo = 0, bad_hi = 0;
  long lo_step = 0, hi_step = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    {
#pragma omp task depend(out : a[0 : kN]) shared(a)
      {
        pause(2000);
        for (int i = 0; i < kN; ++i) a[i] = i + 1;
      }
      for (int r = 0; r < kReaders; ++r) {
#pragma omp task depend(in : a[0 : kN]) shared(a, reader_sums)
        {
          long sum = 0;
          for (int i = 0; i < kN; ++i) sum += a[i];
          reader_sums[r] = sum;
        }
      }
#pragma omp task depend(inout : a[0 : kN]) shared(a, reader_sums, bad_inout)
      {
        for (int r = 0; r < kReaders; ++r) {
          if (__atomic_load_n(&reader_sums[r], __ATOMIC_RELAXED) == 0) bad_inout = 1;
        }
        for (int i = 0; i < kN; ++i) a[i] *= 2;
      }
      // The same section written as a[:kN].
#pragma omp task depend(in : a[ : kN]) shared(a, final_sum)
      {
        long sum = 0;
        for (int i = 0; i < kN; ++i) sum += a[i];
        final_sum = sum;
      }
      // A pointer's section.
#pragma omp task depend(out : p[0 : kN])
      {
        pause(20000);
        for (int i = 0; i < kN; ++i) p[i] = 3;
      }
#pragma omp task depend(in : p[0 : kN]) shared(p_sum)
      {
        long sum = 0;
        for (int i = 0; i < kN; ++i) sum += p[i];
        p_sum = sum;
      }
      // Two disjoint halves: each half's tasks (identical sections) keep
      // their order; the halves may interleave.
      for (int s = 0; s < kHalfSteps; ++s) {
#pragma omp task depend(inout : p[0 : kN / 2]) shared(lo_step, bad_lo)
        {
          if (s % 3 == 1) pause(5000);
          if (lo_step != s) bad_lo = 1;
          lo_step = s + 1;
        }
#pragma omp task depend(inout : p[kN / 2 : kN / 2]) shared(hi_step, bad_hi)
        {
          if (s % 3 == 0) pause(5000);
          if (hi_step != s) bad_hi = 1;
          hi_step = s + 1;
        }
      }
    }
  }
  const long first_sum = static_cast<long>(kN) * (kN + 1) / 2;
  for (int r = 0; r < kReaders; ++r) {
    CHECK_EQ(reader_sums[r], first_sum, "depend(in: a[0:n]) reader %d after depend(out: a[0:n])", r);
  }
  CHECK_EQ(bad_inout, 0, "depend(inout: a[0:n]) ran before the depend(in: a[0:n]) readers");
  CHECK_EQ(final_sum, 2 * first_sum, "depend(in: a[:n]) after depend(inout: a[0:n])");
  CHECK_EQ(p_sum, 3L * kN, "depend(in: p[0:n]) after depend(out: p[0:n])");
  CHECK_EQ(bad_lo, 0, "depend(inout: p[0:n/2]) chain out of order");
  CHECK_EQ(bad_hi, 0, "depend(inout: p[n/2:n/2]) chain out of order");
  CHECK_EQ(lo_step, kHalfSteps, "depend(inout: p[0:n/2]) chain: final");
  CHECK_EQ(hi_step, kHalfSteps, "depend(inout: p[n/2:n/2]) chain: final");
}

void test_iterator() {
  constexpr int kN = 12;
  long a[kN] = {};
  long sum_seen = -1;
  int bad_cleared = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    {
      for (int j = 0; j < kN; ++j) {
#pragma omp task depend(out : a[j]) shared(a)
        {
          if (j % 4 == 0) pause(20000);
          a[j] = j + 1;
        }
      }
      // One task depending on all kN elements.
#pragma omp task depend(iterator(j = 0 : kN), in : a[j]) shared(a, sum_seen)
      {
        long sum = 0;
        for (int j = 0; j < kN; ++j) sum += a[j];
        sum_seen = sum;
      }
#pragma omp task depend(iterator(j = 0 : kN), out : a[j]) shared(a)
      {
        pause(500);
        for (int j = 0; j < kN; ++j) a[j] = 0;
      }
      for (int j = 0; j < kN; ++j) {
#pragma omp task depend(in : a[j]) shared(a, bad_cleared)
        {
          if (a[j] != 0) __atomic_store_n(&bad_cleared, 1, __ATOMIC_RELAXED);
        }
      }
    }
  }
  CHECK_EQ(sum_seen, static_cast<long>(kN) * (kN + 1) / 2,
           "depend(iterator(j=0:n), in: a[j]) after the writers of each a[j]");
  CHECK_EQ(bad_cleared, 0, "depend(in: a[j]) after depend(iterator(...), out: a[j])");
}

void test_undeferred() {
  int x = 0, seen_in_task = -1, done = 0, done_after = -1, chain_seen = -1, y = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    {
      volatile int no = 0;
#pragma omp task depend(out : x) shared(x)
      {
        pause(20000);
        x = 7;
      }
      // Undeferred: runs after its predecessor, and is complete when the
      // construct returns.
#pragma omp task depend(in : x) if (no) shared(x, seen_in_task, done)
      {
        seen_in_task = x;
        __atomic_store_n(&done, 1, __ATOMIC_RELAXED);
      }
      done_after = __atomic_load_n(&done, __ATOMIC_RELAXED);
      for (int k = 0; k < 10; ++k) {
#pragma omp task depend(inout : y) shared(y)
        {
          pause(500);
          y += 1;
        }
      }
#pragma omp task depend(inout : y) if (no) shared(y, chain_seen)
      {
        chain_seen = y;
        y += 100;
      }
    }
  }
  CHECK_EQ(seen_in_task, 7, "task if(0) depend(in: x): value of x its predecessor wrote");
  CHECK_EQ(done_after, 1, "task if(0) depend(in: x): complete when the construct returns");
  CHECK_EQ(chain_seen, 10, "task if(0) depend(inout: y) after a chain of 10: value seen");
  CHECK_EQ(y, 110, "task if(0) depend(inout: y) after a chain of 10: final value");
}

void test_not_siblings() {
  // Tasks created by different threads (implicit tasks) on the same
  // variable: not siblings, no order between them; all must run.
  constexpr int kPerThread = 50;
  [[maybe_unused]] int x = 0;
  int team = 0;
  long total = 0;
#pragma omp parallel shared(x, total)
  {
    probe_here();
#pragma omp single nowait
    team = omp_get_num_threads();
    for (int k = 0; k < kPerThread; ++k) {
#pragma omp task depend(inout : x) shared(total)
      __atomic_add_fetch(&total, 1, __ATOMIC_RELAXED);
    }
  }
  CHECK_EQ(total, static_cast<long>(team) * kPerThread,
           "depend(inout: x) tasks created by every thread: executions");

  // Children of different parent tasks on one variable: each parent's
  // children are siblings and keep their order; parents' chains may overlap.
  constexpr int kParents = 16, kLength = 40;
  long step[kParents] = {};
  int bad_order = 0;
  [[maybe_unused]] int y = 0;
  long children_ran = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    for (int p = 0; p < kParents; ++p) {
#pragma omp task shared(step, bad_order, y, children_ran)
      {
        for (int k = 0; k < kLength; ++k) {
#pragma omp task depend(inout : y) shared(step, bad_order, children_ran)
          {
            if (k % 9 == 0) pause(300);
            if (step[p] != k) __atomic_store_n(&bad_order, 1, __ATOMIC_RELAXED);
            step[p] = k + 1;
            __atomic_add_fetch(&children_ran, 1, __ATOMIC_RELAXED);
          }
        }
        if (p % 2 == 0) {
#pragma omp taskwait
          if (step[p] != kLength) __atomic_store_n(&bad_order, 1, __ATOMIC_RELAXED);
        }
      }
    }
  }
  CHECK_EQ(bad_order, 0, "depend(inout) chains of children of %d parent tasks: out of order",
           kParents);
  CHECK_EQ(children_ran, static_cast<long>(kParents) * kLength,
           "depend(inout) chains of children of parent tasks: executions");
  for (int p = 0; p < kParents; ++p) CHECK_EQ(step[p], kLength, "chain of parent %d: final", p);
}

void test_long_chain() {
  constexpr int kTasks = 5000;
  int x = 0, first_bad = -1;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    for (int k = 0; k < kTasks; ++k) {
#pragma omp task depend(inout : x) shared(x, first_bad)
      {
        if (x != k && first_bad < 0) first_bad = k;
        x = k + 1;
      }
    }
  }
  CHECK_EQ(first_bad, -1, "long depend(inout) chain of %d tasks: first task out of order",
           kTasks);
  CHECK_EQ(x, kTasks, "long depend(inout) chain: final value");

  // Writer, two readers, writer, ...: 3000 tasks.
  constexpr int kRounds = 1000;
  long w = -1;
  int bad_read = 0, bad_write = 0;
  std::vector<int> reads(kRounds, 0);
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    for (int k = 0; k < kRounds; ++k) {
#pragma omp task depend(out : w) shared(w, reads, bad_write)
      {
        if (k > 0 && __atomic_load_n(&reads[k - 1], __ATOMIC_RELAXED) != 2) bad_write = 1;
        w = k;
      }
      for (int r = 0; r < 2; ++r) {
#pragma omp task depend(in : w) shared(w, reads, bad_read)
        {
          if (w != k) __atomic_store_n(&bad_read, 1, __ATOMIC_RELAXED);
          count_hit(&reads[k]);
        }
      }
    }
  }
  CHECK_EQ(bad_read, 0, "long writer/readers sequence: a reader saw another round's value");
  CHECK_EQ(bad_write, 0, "long writer/readers sequence: a writer ran before the readers");
  check_counts(reads.data(), kRounds, 2, "long writer/readers sequence: reads per round");
  CHECK_EQ(w, kRounds - 1, "long writer/readers sequence: final value");
}

}  // namespace

int main() {
  test_begin("task_depend");
  test_chain();
  test_readers_writers();
  test_element_chains();
  test_taskwait_depend();
  test_mutexinoutset();
  test_depobj();
  test_array_sections();
  test_iterator();
  test_undeferred();
  test_not_siblings();
  test_long_chain();
  return test_end();
}
