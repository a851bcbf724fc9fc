// omp-test tasks: explicit tasks.
//
// task + taskwait (recursive Fibonacci with a serial cutoff, checked against
// the serial value); many tasks created by one `single` thread and run by the
// team (each once, done at the single's barrier); tasks created by every
// thread in a `for` (done at the loop's barrier); untied tasks and taskyield;
// firstprivate captures taken at creation (int, C array, std::vector, a
// 64-byte-aligned struct) and shared ones; taskgroup waiting for
// grandchildren; undeferred if(0) tasks, final tasks and omp_in_final,
// mergeable, priority; tasks created outside any parallel region; thread ids
// inside tasks within the team.
#include <omp.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "check.h"

namespace {

constexpr int kMaxTeam = 64;

void pause(int rounds) {
  for (int k = 0; k < rounds; ++k) __asm__ __volatile__("" ::: "memory");
}

long fib_serial(int n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

constexpr int kCutoff = 12;
int fib_tasks_created = 0;  // __atomic

long fib_tasks(int n) {
  if (n < kCutoff) return fib_serial(n);
  long x = 0, y = 0;
  count_hit(&fib_tasks_created);
#pragma omp task shared(x) firstprivate(n)
  x = fib_tasks(n - 1);
  count_hit(&fib_tasks_created);
#pragma omp task shared(y)
  y = fib_tasks(n - 2);
#pragma omp taskwait
  return x + y;
}

void test_fibonacci() {
  constexpr int kN = 25;
  long result = -1;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    result = fib_tasks(kN);
  }
  CHECK_EQ(result, fib_serial(kN), "fib(%d) with tasks (cutoff %d, %d tasks)", kN, kCutoff,
           fib_tasks_created);
  // Also from the serial part of the program: tasks of the initial thread.
  long serial_part = fib_tasks(20);
  CHECK_EQ(serial_part, fib_serial(20), "fib(20) with tasks outside any parallel region");
}

void test_single_producer() {
  constexpr int kTasks = 2000;
  std::vector<int> hits(kTasks, 0);
  int ran_by[kMaxTeam] = {};
  int bad_thread = 0, incomplete_at_barrier = 0, team = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp master
    team = omp_get_num_threads();
#pragma omp single
    {
      for (int i = 0; i < kTasks; ++i) {
#pragma omp task priority(i % 4)
        {
          pause(200);
          count_hit(&hits[i]);
          int t = omp_get_thread_num();
          if (t < 0 || t >= omp_get_num_threads() || t >= kMaxTeam) {
            __atomic_store_n(&bad_thread, 1, __ATOMIC_RELAXED);
          } else {
            count_hit(&ran_by[t]);
          }
        }
      }
    }
    // The single's barrier: every task is complete.
    for (int i = 0; i < kTasks; ++i) {
      if (__atomic_load_n(&hits[i], __ATOMIC_RELAXED) != 1) {
        __atomic_store_n(&incomplete_at_barrier, 1, __ATOMIC_RELAXED);
      }
    }
  }
  check_counts(hits.data(), kTasks, 1, "tasks from one single thread: executions per task");
  CHECK_EQ(incomplete_at_barrier, 0, "tasks from single: a task not done at the single's barrier");
  CHECK_EQ(bad_thread, 0, "tasks: omp_get_thread_num() outside the team inside a task");
  int total = 0;
  for (int t = 0; t < kMaxTeam; ++t) total += ran_by[t];
  CHECK_EQ(total, kTasks, "tasks from single: executions counted by thread (team %d)", team);
}

void test_all_threads_create() {
  constexpr int kTasks = 1000;
  std::vector<int> hits(kTasks, 0);
  int incomplete_at_barrier = 0;
  long shared_sum = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp for schedule(dynamic, 8)
    for (int i = 0; i < kTasks; ++i) {
      // i is firstprivate in the task by default.
#pragma omp task shared(hits, shared_sum)
      {
        count_hit(&hits[i]);
        __atomic_add_fetch(&shared_sum, i, __ATOMIC_RELAXED);
      }
    }
    // The loop's barrier completes all tasks of the team.
    for (int i = 0; i < kTasks; ++i) {
      if (__atomic_load_n(&hits[i], __ATOMIC_RELAXED) != 1) {
        __atomic_store_n(&incomplete_at_barrier, 1, __ATOMIC_RELAXED);
      }
    }
  }
  check_counts(hits.data(), kTasks, 1, "tasks created in a for by all threads: executions");
  CHECK_EQ(incomplete_at_barrier, 0, "tasks created in a for: a task not done at the barrier");
  CHECK_EQ(shared_sum, static_cast<long>(kTasks) * (kTasks - 1) / 2,
           "tasks: sum through a shared variable");
}

void test_untied_and_yield() {
  constexpr int kTasks = 200, kSteps = 20;
  std::vector<int> steps(kTasks, 0);
  int tied_yields = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    {
      for (int i = 0; i < kTasks; ++i) {
        if (i % 2 == 0) {
#pragma omp task untied
          for (int s = 0; s < kSteps; ++s) {
            count_hit(&steps[i]);
#pragma omp taskyield
          }
        } else {
#pragma omp task
          for (int s = 0; s < kSteps; ++s) {
            count_hit(&steps[i]);
#pragma omp taskyield
            count_hit(&tied_yields);
          }
        }
      }
#pragma omp taskwait
    }
  }
  check_counts(steps.data(), kTasks, kSteps, "untied / tied tasks with taskyield: steps run");
  CHECK_EQ(tied_yields, kTasks / 2 * kSteps, "tied tasks: steps after taskyield");
  // taskyield outside any task region is a no-op.
#pragma omp taskyield
}

struct alignas(64) Aligned {
  long values[8];
};

void test_captures() {
  constexpr int kTasks = 64;
  std::vector<int> base(100, 1);
  int array[16];
  for (int k = 0; k < 16; ++k) array[k] = k;
  Aligned aligned{};
  for (int k = 0; k < 8; ++k) aligned.values[k] = k * 10;
  int value = 5;
  int bad_vector = 0, bad_array = 0, bad_aligned = 0, bad_misaligned = 0, bad_value = 0;
  long shared_total = 0;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    {
      for (int k = 0; k < kTasks; ++k) {
        // Captured now; the originals change right after each creation.
#pragma omp task firstprivate(base, array, aligned, value) shared(shared_total)
        {
          if (std::accumulate(base.begin(), base.end(), 0) != 100 + k) {
            __atomic_store_n(&bad_vector, 1, __ATOMIC_RELAXED);
          }
          base[0] = -1000;  // the task's own copy
          long sum = 0;
          for (int a = 0; a < 16; ++a) sum += array[a];
          if (sum != 120 + k) __atomic_store_n(&bad_array, 1, __ATOMIC_RELAXED);
          if (aligned.values[7] != 70 + k) __atomic_store_n(&bad_aligned, 1, __ATOMIC_RELAXED);
          if (reinterpret_cast<std::uintptr_t>(&aligned) % alignof(Aligned) != 0) {
            __atomic_store_n(&bad_misaligned, 1, __ATOMIC_RELAXED);
          }
          if (value != 5 + k) __atomic_store_n(&bad_value, 1, __ATOMIC_RELAXED);
          __atomic_add_fetch(&shared_total, value, __ATOMIC_RELAXED);
        }
        base[k % 100] += 1;
        array[k % 16] += 1;
        aligned.values[7] += 1;
        value += 1;
      }
    }
  }
  CHECK_EQ(bad_vector, 0, "task firstprivate(std::vector): copy not taken at creation");
  CHECK_EQ(bad_array, 0, "task firstprivate(int[16]): copy not taken at creation");
  CHECK_EQ(bad_aligned, 0, "task firstprivate(aligned struct): copy not taken at creation");
  CHECK_EQ(bad_misaligned, 0, "task firstprivate(alignas(64) struct): copy misaligned");
  CHECK_EQ(bad_value, 0, "task firstprivate(int): copy not taken at creation");
  CHECK_EQ(std::accumulate(base.begin(), base.end(), 0), 100 + kTasks,
           "task firstprivate(std::vector): the original was changed by a task");
  CHECK_EQ(shared_total, kTasks * 5L + static_cast<long>(kTasks) * (kTasks - 1) / 2,
           "task shared(total): sum");
}

void test_taskgroup() {
  constexpr int kChildren = 50, kGrandchildren = 4;
  int children = 0, grandchildren = 0, seen_children = -1, seen_grandchildren = -1;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    {
#pragma omp taskgroup
      {
        for (int c = 0; c < kChildren; ++c) {
#pragma omp task shared(children, grandchildren)
          {
            for (int g = 0; g < kGrandchildren; ++g) {
#pragma omp task shared(grandchildren)
              {
                pause(500);
                count_hit(&grandchildren);
              }
            }
            count_hit(&children);
          }
        }
      }
      // The end of the taskgroup waits for the descendants, not only children.
      seen_children = __atomic_load_n(&children, __ATOMIC_RELAXED);
      seen_grandchildren = __atomic_load_n(&grandchildren, __ATOMIC_RELAXED);
    }
  }
  CHECK_EQ(seen_children, kChildren, "taskgroup: children done at its end");
  CHECK_EQ(seen_grandchildren, kChildren * kGrandchildren,
           "taskgroup: grandchildren done at its end");
}

void test_task_clauses() {
  int undeferred = 0, undeferred_seen = -1, final_flag = -1, child_in_final = -1;
  int included_seen = -1, merged = 0, not_final_outside = -1;
#pragma omp parallel
  {
    probe_here();
#pragma omp single
    {
      volatile int no = 0;
      // if(0): the creating task waits for it, so its effect is visible at once.
#pragma omp task if (no) shared(undeferred)
      {
        pause(1000);
        undeferred = 1;
      }
      undeferred_seen = undeferred;

      // final(1): the task and every task it creates are final and included.
#pragma omp task final(1) shared(final_flag, child_in_final, included_seen)
      {
        final_flag = omp_in_final();
        int included = 0;
#pragma omp task shared(included, child_in_final)
        {
          pause(1000);
          child_in_final = omp_in_final();
          included = 1;
        }
        included_seen = included;
      }
#pragma omp task mergeable shared(merged)
      count_hit(&merged);
#pragma omp taskwait
      not_final_outside = omp_in_final();
    }
  }
  CHECK_EQ(undeferred_seen, 1, "task if(0): effect not visible right after the construct");
  CHECK_EQ(final_flag, 1, "task final(1): omp_in_final() inside");
  CHECK_EQ(child_in_final, 1, "child of a final task: omp_in_final() inside");
  CHECK_EQ(included_seen, 1, "child of a final task: not run at once (included task)");
  CHECK_EQ(merged, 1, "task mergeable: executions");
  CHECK_EQ(not_final_outside, 0, "omp_in_final() in the implicit task");
}

}  // namespace

int main() {
  test_begin("tasks");
  test_fibonacci();
  test_single_producer();
  test_all_threads_create();
  test_untied_and_yield();
  test_captures();
  test_taskgroup();
  test_task_clauses();
  return test_end();
}
