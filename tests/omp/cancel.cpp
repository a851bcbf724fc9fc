// omp-test cancel: cancellation (cancel, cancellation point), run with
// OMP_CANCELLATION=true and without it.
//
// omp_get_cancellation() must follow OMP_CANCELLATION. With cancellation
// off every cancel is ignored and every check below expects the complete,
// uncancelled result. With it on, the checks assert what OpenMP guarantees,
// never how far other threads got before they noticed:
//  - cancel parallel: the thread that cancels leaves the region; the
//    others' `barrier` (a cancellation point) cannot complete without it,
//    so nobody passes it (some are waiting when the cancel comes, some
//    arrive later); the region ends; the same region run again without the
//    cancel, and a plain region after it, have working barriers and loops
//    (no stale flag, no half-counted barrier);
//  - cancel for (dynamic, and static, which GCC schedules inline): the
//    cancelling iteration stops at the cancel; the cancelling thread starts
//    no later chunk (static: its whole block is skipped); each iteration
//    runs at most once; every thread goes on after the loop (the loop's
//    end does not cancel the region); later loops in the region, beyond
//    the 16 work shares libweft-omp keeps in a ring, run completely;
//  - cancel sections: likewise (the cancelling thread runs no other section);
//  - cancel taskgroup: tasks of the group created after the cancelling
//    task ended (taskwait) skip their work at a cancellation point (or are
//    discarded); a later taskgroup runs all its tasks.
// Where a check depends on another thread having seen a cancel, the
// cancelling thread announces it from a destructor that runs when the
// cancel leaves the scope -- after the cancel took effect -- and a thread
// that saw the announcement (acquire) before its cancellation point must
// be cancelled there.
#include <omp.h>
#include <sched.h>
#include <strings.h>

#include <chrono>
#include <cstdlib>
#include <vector>

#include "check.h"

namespace {

constexpr int kMaxTeam = 64;

bool g_on = false;  // cancellation active (omp_get_cancellation())
int g_never = 0;    // 0, but not a constant: the `if` of cancels that never happen

void pause(int rounds) {
  for (int k = 0; k < rounds; ++k) __asm__ __volatile__("" ::: "memory");
}

// Runs when a cancel jumps out of the scope it is declared in (and at the
// scope's normal end when the cancel was ignored).
struct announce_cancel {
  int* flag;
  ~announce_cancel() { __atomic_store_n(flag, 1, __ATOMIC_RELEASE); }
};

bool announced(int* flag) { return __atomic_load_n(flag, __ATOMIC_ACQUIRE) != 0; }

// Waits (bounded, not an assertion) until *counter reaches n.
void wait_until(int* counter, int n) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (__atomic_load_n(counter, __ATOMIC_ACQUIRE) < n &&
         std::chrono::steady_clock::now() < give_up)
    sched_yield();
}

void test_get_cancellation() {
  const char* v = std::getenv("OMP_CANCELLATION");
  const int expected = v != nullptr && strcasecmp(v, "true") == 0 ? 1 : 0;
  CHECK_EQ(omp_get_cancellation(), expected, "omp_get_cancellation() with OMP_CANCELLATION=%s",
           v != nullptr ? v : "(unset)");
  g_on = omp_get_cancellation() != 0;
}

// A region without any cancel: barriers with a late arriver and a dynamic
// loop, right after a cancelled region (which may leave its team recycled).
void check_plain_region(int round) {
  constexpr int kPhases = 20, kN = 300;
  int arrived[kPhases] = {}, early = 0, team = 0;
  std::vector<int> runs(kN, 0);
#pragma omp parallel
  {
    probe_here();
    const int t = omp_get_thread_num(), n = omp_get_num_threads();
    if (t == 0) team = n;
    for (int p = 0; p < kPhases; ++p) {
      if (p % n == t) pause(2000);
      count_hit(&arrived[p]);
#pragma omp barrier
      if (__atomic_load_n(&arrived[p], __ATOMIC_RELAXED) != n)
        __atomic_store_n(&early, 1, __ATOMIC_RELAXED);
    }
#pragma omp for schedule(dynamic, 7)
    for (int i = 0; i < kN; ++i) count_hit(&runs[i]);
  }
  CHECK_EQ(early, 0, "round %d: plain region after a cancelled one: a thread passed a barrier "
                     "before all %d arrived", round, team);
  check_counts(runs.data(), kN, 1, "round %d: plain region after a cancelled one: loop", round);
}

// cancel parallel by thread 0 (when `cancel`), the others at a barrier.
void test_cancel_parallel() {
  constexpr int kRounds = 12, kPhases = 10;
  for (int round = 0; round < kRounds; ++round) {
    const bool cancel = round % 2 == 0;
    const bool cancelled = cancel && g_on;
    int before[kMaxTeam] = {}, after[kMaxTeam] = {}, at_barrier = 0, t0_went_on = 0;
    int arrived[kPhases] = {}, early = 0, team = 0;
#pragma omp parallel
    {
      probe_here();
      const int t = omp_get_thread_num(), n = omp_get_num_threads();
      if (t == 0) team = n;
      count_hit(&before[t % kMaxTeam]);
      if (t == 0) {
        // Let the others reach the barrier first, so that some wait there
        // when the cancel comes (the checks do not depend on it).
        if (cancel) wait_until(&at_barrier, n - 1);
#pragma omp cancel parallel if (cancel)
        count_hit(&t0_went_on);
      } else {
        count_hit(&at_barrier);
      }
#pragma omp barrier
      count_hit(&after[t % kMaxTeam]);
      // Not cancelled: the region's cancellable barriers work.
      for (int p = 0; p < kPhases; ++p) {
        if (p % n == t) pause(2000);
        count_hit(&arrived[p]);
#pragma omp barrier
        if (__atomic_load_n(&arrived[p], __ATOMIC_RELAXED) != n)
          __atomic_store_n(&early, 1, __ATOMIC_RELAXED);
      }
    }
    check_counts(before, team, 1, "round %d: cancel parallel: code before the cancel", round);
    CHECK_EQ(t0_went_on, cancelled ? 0 : 1,
             "round %d: cancel parallel%s: thread 0 went on after its cancel", round,
             cancel ? "" : " if(false)");
    check_counts(after, team, cancelled ? 0 : 1,
                 "round %d: cancel parallel%s: threads past the barrier thread 0 never reached",
                 round, cancel ? "" : " if(false)");
    CHECK_EQ(early, 0, "round %d: a thread passed a barrier before all %d arrived", round, team);
    if (!cancelled) {
      for (int p = 0; p < kPhases; ++p)
        if (!CHECK_EQ(arrived[p], team, "round %d: arrivals at barrier %d", round, p)) break;
    }
    check_plain_region(round);
  }
}

// cancel parallel while the team's threads create tasks: the region ends
// with every task run or discarded; a task that saw the cancel announced
// skips its work at its cancellation point.
void test_cancel_parallel_tasks() {
  constexpr int kTasks = 40;
  int created = 0, ran = 0, ran_after_cancel = 0, cancelled_flag = 0, team = 0;
#pragma omp parallel
  {
    probe_here();
    const int t = omp_get_thread_num();
    if (t == 0) {
      team = omp_get_num_threads();
      announce_cancel a{&cancelled_flag};
#pragma omp cancel parallel
    }
#pragma omp taskgroup
    {
      for (int k = 0; k < kTasks; ++k) {
        count_hit(&created);
#pragma omp task
        {
          const bool seen = announced(&cancelled_flag);
#pragma omp cancellation point taskgroup
          count_hit(&ran);
          if (seen && g_on) count_hit(&ran_after_cancel);
        }
      }
    }
  }
  CHECK_EQ(ran_after_cancel, 0, "cancel parallel: tasks that ran after seeing the cancel");
  if (g_on)
    check_range(ran, 0, created, "cancel parallel: tasks run of those created");
  else
    CHECK_EQ(ran, kTasks * team, "cancel parallel ignored: tasks run");
}

// cancel for in a dynamic loop, in a region that may be cancelled (GCC ends
// its loops with GOMP_loop_end_cancel, whose result sends a thread to the
// region's end).
void test_cancel_for_dynamic() {
  constexpr int kN = 2000, kAt = 150, kLaterLoops = 20, kLaterN = 50;
  std::vector<int> runs(kN, 0), ran_by(kN, -1), later(kLaterLoops * kLaterN, 0);
  int canceller = -1, after_cancel = 0, ran_after_cancel = 0, cancelled_flag = 0;
  int after_loop[kMaxTeam] = {}, team = 0;
#pragma omp parallel
  {
    probe_here();
    const int t = omp_get_thread_num();
    if (t == 0) team = omp_get_num_threads();
#pragma omp cancel parallel if (g_never)
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < kN; ++i) {
      if (i == kAt) {
        __atomic_store_n(&canceller, t, __ATOMIC_RELAXED);
        {
          announce_cancel a{&cancelled_flag};
#pragma omp cancel for
        }
        count_hit(&after_cancel);
      }
      const bool seen = announced(&cancelled_flag);
#pragma omp cancellation point for
      count_hit(&runs[i]);
      __atomic_store_n(&ran_by[i], t, __ATOMIC_RELAXED);
      if (seen && g_on) count_hit(&ran_after_cancel);
    }
    count_hit(&after_loop[t % kMaxTeam]);
    // More loops than the ring has work shares: none sees a stale cancel
    // (a cancel whose `if` is false is a cancellation point; GCC leaves out
    // a `cancellation point` in a loop that has no cancel).
    for (int l = 0; l < kLaterLoops; ++l) {
#pragma omp for schedule(dynamic, 3)
      for (int i = 0; i < kLaterN; ++i) {
#pragma omp cancel for if (g_never)
        count_hit(&later[l * kLaterN + i]);
      }
    }
  }
  check_counts(after_loop, team, 1, "cancel for (dynamic): threads going on after the loop");
  check_counts(later.data(), long(later.size()), 1, "loops after a cancelled one");
  if (!g_on) {
    check_counts(runs.data(), kN, 1, "cancel for ignored: iterations");
    CHECK_EQ(after_cancel, 1, "cancel for ignored: the cancelling iteration went on");
    return;
  }
  CHECK_EQ(after_cancel, 0, "cancel for (dynamic): the cancelling iteration went on");
  CHECK_EQ(runs[kAt], 0, "cancel for (dynamic): the cancelling iteration's body");
  CHECK_EQ(ran_after_cancel, 0, "cancel for (dynamic): iterations run after seeing the cancel");
  int twice = 0, by_canceller = 0, total = 0;
  for (int i = 0; i < kN; ++i) {
    total += runs[i];
    if (runs[i] > 1) ++twice;
    if (i > kAt && runs[i] != 0 && ran_by[i] == canceller) ++by_canceller;
  }
  CHECK_EQ(twice, 0, "cancel for (dynamic): iterations run more than once");
  CHECK_EQ(by_canceller, 0,
           "cancel for (dynamic): iterations after %d run by the cancelling thread %d", kAt,
           canceller);
  check_range(total, 0, kN - 1, "cancel for (dynamic): iterations run");
}

// cancel for in a static loop (scheduled inline by GCC: no work share) by
// thread 0 at its first iteration: its whole block is skipped. Twice: in a
// region that may be cancelled (the loop ends with GOMP_barrier_cancel) and
// in one that may not (GOMP_barrier).
void check_static(const char* what, const std::vector<int>& runs, const std::vector<int>& next,
                  int after_cancel, const int* after_loop, int team) {
  const int n = int(runs.size());
  check_counts(after_loop, team, 1, "%s: threads going on after the loop", what);
  check_counts(next.data(), long(next.size()), 1, "%s: the next static loop", what);
  if (!g_on) {
    check_counts(runs.data(), n, 1, "%s ignored: iterations", what);
    CHECK_EQ(after_cancel, 1, "%s ignored: the cancelling iteration went on", what);
    return;
  }
  CHECK_EQ(after_cancel, 0, "%s: the cancelling iteration went on", what);
  // Thread 0's block is at least the first n / team iterations.
  check_counts(runs.data(), n / team, 0, "%s: iterations of the cancelling thread's block", what);
  int twice = 0;
  for (int i = 0; i < n; ++i) twice += runs[i] > 1;
  CHECK_EQ(twice, 0, "%s: iterations run more than once", what);
}

void test_cancel_for_static() {
  constexpr int kN = 1200;
  for (int variant = 0; variant < 2; ++variant) {
    std::vector<int> runs(kN, 0), next(kN, 0);
    int after_cancel = 0, after_loop[kMaxTeam] = {}, team = 0, cancelled_flag = 0;
    int ran_after_cancel = 0;
    if (variant == 0) {
#pragma omp parallel
      {
        probe_here();
        const int t = omp_get_thread_num();
        if (t == 0) team = omp_get_num_threads();
#pragma omp cancel parallel if (g_never)
#pragma omp for schedule(static)
        for (int i = 0; i < kN; ++i) {
          if (i == 0) {
            {
              announce_cancel a{&cancelled_flag};
#pragma omp cancel for
            }
            count_hit(&after_cancel);
          }
          const bool seen = announced(&cancelled_flag);
#pragma omp cancellation point for
          count_hit(&runs[i]);
          if (seen && g_on) count_hit(&ran_after_cancel);
        }
        count_hit(&after_loop[t % kMaxTeam]);
#pragma omp for schedule(static)
        for (int i = 0; i < kN; ++i) {
#pragma omp cancel for if (g_never)
          count_hit(&next[i]);
        }
      }
    } else {
#pragma omp parallel
      {
        probe_here();
        const int t = omp_get_thread_num();
        if (t == 0) team = omp_get_num_threads();
#pragma omp for schedule(static)
        for (int i = 0; i < kN; ++i) {
          if (i == 0) {
            {
              announce_cancel a{&cancelled_flag};
#pragma omp cancel for
            }
            count_hit(&after_cancel);
          }
          const bool seen = announced(&cancelled_flag);
#pragma omp cancellation point for
          count_hit(&runs[i]);
          if (seen && g_on) count_hit(&ran_after_cancel);
        }
        count_hit(&after_loop[t % kMaxTeam]);
#pragma omp for schedule(static)
        for (int i = 0; i < kN; ++i) {
#pragma omp cancel for if (g_never)
          count_hit(&next[i]);
        }
      }
    }
    const char* what = variant == 0 ? "cancel for (static, cancellable region)"
                                    : "cancel for (static)";
    check_static(what, runs, next, after_cancel, after_loop, team);
    CHECK_EQ(ran_after_cancel, 0, "%s: iterations run after seeing the cancel", what);
  }
}

// cancel sections: the first section cancels; the others check.
void test_cancel_sections() {
  constexpr int kSections = 8, kLater = 20;
  int runs[kSections] = {}, ran_by[kSections] = {}, after_cancel = 0, ran_after_cancel = 0;
  int cancelled_flag = 0, after_sections[kMaxTeam] = {}, team = 0, later[kLater * 2] = {};
#pragma omp parallel
  {
    probe_here();
    const int t = omp_get_thread_num();
    if (t == 0) team = omp_get_num_threads();
#pragma omp cancel parallel if (g_never)
#define WEFT_TEST_SECTION(k)                                  \
  _Pragma("omp section") {                                    \
    const bool seen = announced(&cancelled_flag);             \
    _Pragma("omp cancellation point sections")                \
    count_hit(&runs[k]);                                      \
    __atomic_store_n(&ran_by[k], t, __ATOMIC_RELAXED);        \
    if (seen && g_on) count_hit(&ran_after_cancel);           \
  }
#pragma omp sections
    {
#pragma omp section
      {
        __atomic_store_n(&ran_by[0], t, __ATOMIC_RELAXED);
        {
          announce_cancel a{&cancelled_flag};
#pragma omp cancel sections
        }
        count_hit(&after_cancel);
        count_hit(&runs[0]);
      }
      WEFT_TEST_SECTION(1)
      WEFT_TEST_SECTION(2)
      WEFT_TEST_SECTION(3)
      WEFT_TEST_SECTION(4)
      WEFT_TEST_SECTION(5)
      WEFT_TEST_SECTION(6)
      WEFT_TEST_SECTION(7)
    }
#undef WEFT_TEST_SECTION
    count_hit(&after_sections[t % kMaxTeam]);
    for (int l = 0; l < kLater; ++l) {
#pragma omp sections
      {
#pragma omp section
        {
#pragma omp cancel sections if (g_never)
          count_hit(&later[2 * l]);
        }
#pragma omp section
        {
#pragma omp cancel sections if (g_never)
          count_hit(&later[2 * l + 1]);
        }
      }
    }
  }
  check_counts(after_sections, team, 1, "cancel sections: threads going on after the sections");
  check_counts(later, kLater * 2, 1, "sections after a cancelled one");
  if (!g_on) {
    check_counts(runs, kSections, 1, "cancel sections ignored: sections");
    CHECK_EQ(after_cancel, 1, "cancel sections ignored: the cancelling section went on");
    return;
  }
  CHECK_EQ(after_cancel, 0, "cancel sections: the cancelling section went on");
  CHECK_EQ(ran_after_cancel, 0, "cancel sections: sections run after seeing the cancel");
  int twice = 0, by_canceller = 0;
  for (int k = 1; k < kSections; ++k) {
    twice += runs[k] > 1;
    by_canceller += runs[k] != 0 && ran_by[k] == ran_by[0];
  }
  CHECK_EQ(twice, 0, "cancel sections: sections run more than once");
  CHECK_EQ(by_canceller, 0, "cancel sections: sections run by the cancelling thread after it");
}

// cancel taskgroup: a task cancels its group; tasks of the group created
// after it ended skip their work.
void test_cancel_taskgroup() {
  constexpr int kLate = 16, kRounds = 10;
  for (int round = 0; round < kRounds; ++round) {
    int after_cancel = 0, late_ran = 0, early_ran = 0, other_ran = 0, team = 0;
    int cancelled_flag = 0, started = 0, waiter_saw = 0, waiter_ran = 0;
#pragma omp parallel
    {
      probe_here();
#pragma omp single
      {
        team = omp_get_num_threads();
#pragma omp taskgroup
        {
          // Started before the cancel (another thread runs the cancelling
          // task meanwhile), it reaches its cancellation point after it.
#pragma omp task
          {
            count_hit(&started);
            wait_until(&cancelled_flag, 1);
            const bool seen = announced(&cancelled_flag);
            if (seen) count_hit(&waiter_saw);
#pragma omp cancellation point taskgroup
            if (seen) count_hit(&waiter_ran);
          }
#pragma omp task
          {
            wait_until(&started, 1);
            {
              announce_cancel a{&cancelled_flag};
#pragma omp cancel taskgroup
            }
            count_hit(&after_cancel);
          }
#pragma omp taskwait
          for (int k = 0; k < kLate; ++k) {
#pragma omp task
            {
#pragma omp cancellation point taskgroup
              count_hit(&late_ran);
            }
          }
        }
        // A new taskgroup: not cancelled.
#pragma omp taskgroup
        {
          for (int k = 0; k < kLate; ++k) {
#pragma omp task
            {
#pragma omp cancellation point taskgroup
              count_hit(&other_ran);
            }
          }
        }
      }
      // Every thread: tasks in taskgroups of its own, none cancelled.
#pragma omp taskgroup
      {
#pragma omp task
        {
#pragma omp cancellation point taskgroup
          count_hit(&early_ran);
        }
      }
    }
    CHECK_EQ(after_cancel, g_on ? 0 : 1, "round %d: cancel taskgroup: the cancelling task went on",
             round);
    CHECK_EQ(late_ran, g_on ? 0 : kLate,
             "round %d: cancel taskgroup: tasks created after the cancel that did their work",
             round);
    CHECK_EQ(waiter_ran, g_on ? 0 : waiter_saw,
             "round %d: cancel taskgroup: a running task of the group went on after seeing "
             "the cancel", round);
    CHECK_EQ(other_ran, kLate, "round %d: tasks of a later taskgroup", round);
    CHECK_EQ(early_ran, team, "round %d: tasks of the threads' own taskgroups", round);
  }
}

}  // namespace

int main(int argc, char** argv) {
  (void)argv;
  g_never = argc > 1000 ? 1 : 0;
  test_begin("cancel");
  test_get_cancellation();
  test_cancel_parallel();
  test_cancel_parallel_tasks();
  test_cancel_for_dynamic();
  test_cancel_for_static();
  test_cancel_sections();
  test_cancel_taskgroup();
  return test_end();
}
